//! Packing one rank's pieces of documents into its slot, whatever stream they came from (a
//! [`Documents`](crate::source::Documents) source's steps, or a mixture's): each piece's
//! tokens read through this thread's chunk (one large read serving the pieces that follow
//! it in a sequential walk) and widened from there into `tokens`, its first token checked
//! to be `bos`, then `cu_seqlens` and `positions`; and the batch description the pieces
//! give (a row per piece, the step, the extents).

use super::index::BosIndex;
use super::layout::Layout;
use super::schedule::StepSizes;
use super::walk::Piece;
use crate::describe::Describe;
use crate::error::DecodeError;
use crate::row::Row;
use crate::source::files::deferred::Run;
use crate::source::tokens::widen::{widen_into, TooLargeForI32, Widening};

/// A piece of a document with the index of its source (whose shard `piece.shard` it lies
/// in, and whose `bos` it starts with).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShardPiece<'a> {
    pub(crate) index: &'a BosIndex,
    pub(crate) piece: Piece,
}

/// Describes a step of `sizes` whose pieces are `pieces` (with their sources): a row per
/// piece (`id` the document's id in its source, `len` its length in `cu_seqlens`: the last
/// one's is one less, since the step's last token is a target only), the step (a batch of
/// one step: batch size 1) and the extents `[N + 1, max_docs, N]`.
pub(crate) fn describe_pieces(
    step: u64,
    sizes: StepSizes,
    pieces: impl Iterator<Item = (u16, Piece)>,
    out: &mut Describe<'_>,
) {
    out.step(step);
    out.batch_size(1);
    let mut last: Option<(u16, Piece)> = None;
    for piece in pieces {
        if let Some(p) = last.replace(piece) {
            out.row(row(p, 0));
        }
    }
    if let Some(p) = last {
        out.row(row(p, 1));
    }
    out.dims(&Layout::dims(sizes));
}

/// Packs step `step` of `sizes`, whose pieces are `pieces`, into `out` laid out as
/// `layout`: every piece's tokens read through this thread's chunk and widened (or copied)
/// into their place in `tokens`, `cu_seqlens` (`[0, ends…]`, the last piece less 1 so that
/// it ends at `N`, padded with `N` to `max_docs`) and, when the layout has them,
/// `positions`. The step's reads are one run: each shard is checked once, after them.
///
/// Errors: a slot smaller than the fields or a step past the layout, a shard changed under
/// the loader or that could not be read (`SourceError::Read`, as a [`DecodeError`]), a
/// piece whose first token is not `bos` (`DocumentProblem::NotADocumentStart`: the index
/// does not fit the shard; a cached one is removed from the cache), a `u32` token above
/// `i32::MAX` for `i32` output, pieces that do not add up to `N + 1` tokens.
pub(crate) fn pack<'a, I>(
    layout: &Layout,
    step: u64,
    sizes: StepSizes,
    pieces: I,
    out: &mut [u8],
) -> Result<(), DecodeError>
where
    I: Iterator<Item = ShardPiece<'a>>,
{
    if out.len() < layout.bytes() {
        return Err(DecodeError::new(format!(
            "sample slot is {} bytes, but the fields of these packed documents take {}: \
             build the config from Documents::config() (a mixture's from Mixture::config())",
            out.len(),
            layout.bytes()
        )));
    }
    if sizes.tokens + 1 > layout.max_tokens || sizes.max_docs > layout.max_docs {
        return Err(DecodeError::new(format!(
            "step {step} packs {} tokens and {} cu_seqlens entries, past the {} and {} the \
             layout holds: decode a source's steps with its own decoder and config",
            sizes.tokens + 1,
            sizes.max_docs,
            layout.max_tokens,
            layout.max_docs
        )));
    }
    let n = sizes.tokens as usize;
    let ty = layout.token_type;
    let b = ty.bytes();
    let (head, rest) = out.split_at_mut(layout.cu_seqlens);
    let tokens = &mut head[layout.tokens..layout.tokens + (n + 1) * b];
    let (cu, positions) = match layout.positions {
        Some(p) => {
            let (cu, pos) = rest.split_at_mut(p - layout.cu_seqlens);
            (cu, Some(&mut pos[..n * 4]))
        }
        None => (rest, None),
    };
    let max_docs = sizes.max_docs as usize;
    let run = Run::begin();
    let mut filled = 0usize;
    let mut entries = 1usize;
    put_i32(cu, 0, 0);
    let mut positions = positions;
    for ShardPiece { index, piece } in pieces {
        let shard = index.shard(piece.shard);
        let len = piece.len as usize;
        let widening = Widening::of(shard.format(), ty).ok_or_else(|| {
            DecodeError::new(format!(
                "{} holds {} tokens, which {ty} cannot hold: decode as u32, i32 or i64",
                shard.path().display(),
                shard.format()
            ))
        })?;
        let Some(dst) = tokens.get_mut(filled * b..(filled + len) * b) else {
            return Err(walk_mismatch(step, sizes, filled + len));
        };
        let start = piece.start as usize;
        let w = shard.format().token_bytes();
        let mut first = None;
        let mut bad = Ok(());
        shard.read_tokens_chunked(start, len, |i, bytes| {
            if i == 0 {
                let mut t = [0u8; 4];
                t[..w].copy_from_slice(&bytes[..w]);
                first = Some(u32::from_le_bytes(t));
            }
            let m = bytes.len() / w;
            if let Err(e) = widen_into(bytes, &mut dst[i * b..(i + m) * b], widening) {
                bad = bad.and(Err(TooLargeForI32 { index: i + e.index, ..e }));
            }
        })?;
        let found = first.unwrap_or(index.bos());
        if found != index.bos() && !index.uses_file_indexes() {
            // A shard that changed says so first; one that did not has a wrong index.
            run.finish().map_err(|failed| failed.error)?;
            return Err(index.not_a_start(piece.shard, piece.start, found).into());
        }
        bad.map_err(|e| {
            DecodeError::new(format!(
                "token {} (index {} of {}) does not fit i32, whose largest is {}: decode \
                 as u32 or i64",
                e.token,
                start + e.index,
                shard.path().display(),
                i32::MAX
            ))
        })?;
        if let Some(pos) = positions.as_deref_mut() {
            // Inputs are tokens 0..N: the last piece's last token is a target only.
            for (i, at) in (filled..(filled + len).min(n)).enumerate() {
                put_i32(pos, at, i as i32);
            }
        }
        filled += len;
        if entries < max_docs {
            put_i32(cu, entries, filled.min(n) as i32);
        }
        entries += 1;
    }
    run.finish().map_err(|failed| failed.error)?;
    if filled != n + 1 || entries > max_docs {
        return Err(walk_mismatch(step, sizes, filled));
    }
    for i in entries..max_docs {
        put_i32(cu, i, n as i32);
    }
    Ok(())
}

/// A batch row for `piece` of `source`, its length less `less`.
fn row((source, piece): (u16, Piece), less: u64) -> Row {
    Row {
        id: piece.doc,
        len: u32::try_from(piece.len - less).unwrap_or(u32::MAX),
        source,
    }
}

/// Writes `v` as the `i`-th little-endian `i32` of `out`.
fn put_i32(out: &mut [u8], i: usize, v: i32) {
    out[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
}

/// The error for a step whose pieces do not add up to its size (a pinring bug: the
/// iterator walked it whole).
fn walk_mismatch(step: u64, sizes: StepSizes, filled: usize) -> DecodeError {
    DecodeError::new(format!(
        "internal error (a pinring bug; please report it): step {step} walked to {filled} \
         tokens, not {} + 1",
        sizes.tokens
    ))
}
