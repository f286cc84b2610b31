//! [`PackDocuments`]: the decoder of a [`Documents`](crate::source::Documents) source — a
//! step's pieces read straight into the slot's `tokens` field and widened in place, then
//! `cu_seqlens` and `positions` — and the batch description each step gives (a row per
//! document, the step, the extents).

use super::layout::Layout;
use super::step::DocStep;
use super::walk::Piece;
use crate::decode::Decode;
use crate::describe::{Describe, Row};
use crate::error::DecodeError;
use crate::source::tokens::widen::{raw_start, widen_in_place, Widening};

/// Packs a [`DocStep`] into its batch's slot: the rank's pieces of documents into `tokens`
/// (read from their shards by position, straight into the slot, and widened there to the
/// token type), `cu_seqlens` (`[0, ends…]`, the last piece less 1 so that it ends at `N`,
/// padded with `N` to `max_docs`) and, when the source has them, `positions` (each
/// input's position in its document). Made by
/// [`Documents::decoder`](crate::source::Documents::decoder); the slot's layout is the
/// source's [`fields`](crate::source::Documents::fields).
///
/// It describes each batch ([`Decode::describe`]): a row per piece (`id` the document's
/// id, `len` its length in `cu_seqlens`), the step, and the dims `[N + 1, max_docs, N]`.
///
/// Errors: a step that could not be made returns its [`SourceError`](crate::source::SourceError)
/// (`pop` reports it as [`Error::Source`](crate::Error::Source)); a slot smaller than the
/// fields, a shard changed under the loader (`SourceError::Read`), a `u32` token above
/// `i32::MAX` for `i32` output are [`DecodeError`]s. Walking the pieces again allocates
/// nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PackDocuments {
    _made_by_documents: (),
}

impl PackDocuments {
    pub(super) const fn new() -> Self {
        PackDocuments {
            _made_by_documents: (),
        }
    }
}

impl Decode for PackDocuments {
    type Sample = DocStep;

    fn identify(step: &DocStep) -> Option<(u64, u64)> {
        Some((step.step, step.epoch))
    }

    fn describe(step: &DocStep, out: &mut Describe<'_>) {
        out.step(step.step);
        if step.outcome.is_err() {
            return;
        }
        // A row per piece, its length in cu_seqlens: the last one's is one less.
        let mut last: Option<Piece> = None;
        for piece in step.pieces() {
            if let Some(p) = last.replace(piece) {
                out.row(row(p, 0));
            }
        }
        if let Some(p) = last {
            out.row(row(p, 1));
        }
        out.dims(&Layout::dims(step.sizes));
    }

    fn decode(&self, step: DocStep, out: &mut [u8]) -> Result<(), DecodeError> {
        if let Err(e) = step.outcome {
            return Err(DecodeError::from(*e));
        }
        let layout = &step.inner.layout;
        if out.len() < layout.bytes() {
            return Err(DecodeError::new(format!(
                "sample slot is {} bytes, but the fields of these packed documents take {}: \
                 build the config from Documents::config()",
                out.len(),
                layout.bytes()
            )));
        }
        let sizes = step.sizes;
        if sizes.tokens + 1 > layout.max_tokens || sizes.max_docs > layout.max_docs {
            return Err(DecodeError::new(format!(
                "step {} packs {} tokens and {} cu_seqlens entries, past the {} and {} the \
                 layout holds: decode a source's steps with its own decoder and config",
                step.step,
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
        read_pieces(&step, tokens, b)?;
        // Then each piece widened where it was read, and its cu_seqlens and positions.
        let mut filled = 0usize;
        let mut entries = 1usize;
        put_i32(cu, 0, 0);
        let mut positions = positions;
        for piece in step.pieces() {
            let len = piece.len as usize;
            let shard = step.inner.index.shard(piece.shard);
            let widening = Widening::of(shard.format(), ty).ok_or_else(|| {
                DecodeError::new(format!(
                    "{} holds {} tokens, which {ty} cannot hold: decode as i32 or i64",
                    shard.path().display(),
                    shard.format()
                ))
            })?;
            let Some(dst) = tokens.get_mut(filled * b..(filled + len) * b) else {
                return Err(walk_mismatch(&step, filled + len));
            };
            let start = piece.start as usize;
            let raw = raw_start(
                dst,
                len * shard.format().token_bytes(),
                shard.offset_of(start),
            );
            widen_in_place(dst, raw, widening).map_err(|e| {
                DecodeError::new(format!(
                    "token {} (index {} of {}) does not fit i32, whose largest is {}: decode \
                     as i64",
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
        if filled != n + 1 || entries > max_docs {
            return Err(walk_mismatch(&step, filled));
        }
        for i in entries..max_docs {
            put_i32(cu, i, n as i32);
        }
        Ok(())
    }
}

/// Reads the raw tokens of every piece of `step` into `tokens` (`b` bytes a token), each at
/// the tail of its place there ([`raw_start`]), to be widened in place: the pieces of one
/// shard that follow each other (a whole step, in sequential order) in one go, with one
/// check of the file after them.
fn read_pieces(step: &DocStep, tokens: &mut [u8], b: usize) -> Result<(), DecodeError> {
    let index = &step.inner.index;
    let mut pieces = step.pieces().peekable();
    let mut rest: &mut [u8] = tokens;
    while let Some(&first) = pieces.peek() {
        let shard = index.shard(first.shard);
        let w = shard.format().token_bytes();
        let runs = std::iter::from_fn(|| pieces.next_if(|p| p.shard == first.shard)).map_while(
            |p| {
                let len = p.len as usize;
                // A walk that overflows the step is reported by the caller's second pass.
                if rest.len() < len * b {
                    return None;
                }
                let (dst, tail) = std::mem::take(&mut rest).split_at_mut(len * b);
                rest = tail;
                let start = p.start as usize;
                let raw = raw_start(dst, len * w, shard.offset_of(start));
                Some((start, &mut dst[raw..raw + len * w]))
            },
        );
        shard.read_token_ranges(runs)?;
    }
    Ok(())
}

/// A batch row for `piece`, its length less `less`.
fn row(piece: Piece, less: u64) -> Row {
    Row {
        id: piece.doc,
        len: u32::try_from(piece.len - less).unwrap_or(u32::MAX),
        source: 0,
    }
}

/// Writes `v` as the `i`-th little-endian `i32` of `out`.
fn put_i32(out: &mut [u8], i: usize, v: i32) {
    out[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
}

/// The error for a step whose pieces do not add up to its size (a pinring bug: the
/// iterator walked it whole).
fn walk_mismatch(step: &DocStep, filled: usize) -> DecodeError {
    DecodeError::new(format!(
        "internal error (a pinring bug; please report it): step {} walked to {filled} tokens, \
         not {} + 1",
        step.step, step.sizes.tokens
    ))
}
