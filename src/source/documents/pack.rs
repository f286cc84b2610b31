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
use crate::error::source::SourceError;
use crate::error::DecodeError;
use crate::row::Row;
use crate::source::files::deferred::Run;
use crate::source::tokens::widen::{widen_into, TooLargeForI32, Widening};
use crate::source::tokens::TokenType;

/// A piece of a document with the index of its source (whose shard `piece.shard` it lies
/// in, and whose `bos` it starts with).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ShardPiece<'a> {
    pub(crate) index: &'a BosIndex,
    pub(crate) piece: Piece,
}

/// Describes micro-step `micro` of step `step` of `sizes`, whose pieces are `pieces`
/// (with their sources): a row per piece (`id` the document's id in its source, `len` its
/// length in `cu_seqlens`: the last one's is one less, since the step's last token is a
/// target only), the step (a batch of one step: batch size 1) and the extents
/// `[N + 1, max_docs, N, micro]`.
pub(crate) fn describe_pieces(
    step: u64,
    micro: u64,
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
    out.dims(&Layout::dims(sizes, micro));
}

/// Packs step `step` of `sizes` of `rank`, whose pieces are `pieces`, into `out` laid out
/// as `layout`: every piece's tokens read through this thread's chunk and widened (or
/// copied) into their place in `tokens`; `cu_seqlens` — `[0, ends…]`, the last piece less 1
/// so that it ends at `N` (whole documents), or `[0, positions of bos in the inputs…]` (a
/// contiguous window: one piece of `N + 1` tokens, not starting at a `bos` necessarily) —
/// its segments split at the layout's `seq_cap`, padded with `N` to `max_docs`; and, when
/// the layout has them, `positions` (each input's position in its segment before the
/// cap), `targets` as int64 and `bigram_inputs`. The step's reads are one run: each shard
/// is checked once, after them.
///
/// Errors: a slot smaller than the fields or a step past the layout, a shard changed under
/// the loader or that could not be read (`SourceError::Read`, as a [`DecodeError`]), a
/// piece of a document whose first token is not `bos` (`DocumentProblem::NotADocumentStart`:
/// the index does not fit the shard; a cached one is removed from the cache), a `u32` token
/// above `i32::MAX` for `i32` output, pieces that do not add up to `N + 1` tokens; more
/// `cu_seqlens` entries than `max_docs` (a window with that many `bos`, or the cap's
/// pieces): `SourceError::TooManyDocuments`.
pub(crate) fn pack<'a, I>(
    layout: &Layout,
    (step, rank): (u64, u64),
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
    let derived = layout.derived;
    let n = sizes.tokens as usize;
    let ty = layout.token_type;
    let b = ty.bytes();
    let max_docs = sizes.max_docs as usize;
    let mut ends: Vec<i32> = Vec::with_capacity(max_docs);
    ends.push(0);
    let mut bos = None;
    {
        let tokens = &mut out[layout.tokens..layout.tokens + (n + 1) * b];
        let run = Run::begin();
        let mut filled = 0usize;
        for ShardPiece { index, piece } in pieces {
            bos = Some(index.bos());
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
            if derived.align_to_bos && found != index.bos() && !index.uses_file_indexes() {
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
            filled += len;
            if derived.align_to_bos {
                ends.push(filled.min(n) as i32);
            }
        }
        run.finish().map_err(|failed| failed.error)?;
        if filled != n + 1 {
            return Err(walk_mismatch(step, sizes, filled));
        }
    }
    let tokens = &out[layout.tokens..layout.tokens + (n + 1) * b];
    if !derived.align_to_bos {
        // modded-nanogpt's validation walk: cu_seqlens[1..] are where the inputs hold bos.
        let bos = i64::from(bos.unwrap_or(0));
        ends.extend((0..n).filter(|&i| token_at(tokens, ty, i) == bos).map(|i| i as i32));
    }
    let too_many = |needed: usize| -> DecodeError {
        SourceError::TooManyDocuments {
            step,
            rank,
            needed: needed as u64 - 1,
            max_docs: sizes.max_docs,
        }
        .into()
    };
    if ends.len() > max_docs {
        return Err(too_many(ends.len()));
    }
    // The segments: each entry to the next, the last to N.
    let segments = |ends: &[i32]| {
        let next = ends.iter().skip(1).copied().chain([n as i32]);
        ends.iter().copied().zip(next).collect::<Vec<_>>()
    };
    if let Some(at) = layout.positions {
        let mut pos = vec![0u8; n * 4];
        for (a, e) in segments(&ends) {
            for (i, at) in (a..e).enumerate() {
                put_i32(&mut pos, at as usize, i as i32);
            }
        }
        out[at..at + n * 4].copy_from_slice(&pos);
    }
    let cu = match derived.seq_cap {
        Some(cap) => capped(&ends, n as i32, cap),
        None => ends,
    };
    if cu.len() > max_docs {
        return Err(too_many(cu.len()));
    }
    let tokens = &out[layout.tokens..layout.tokens + (n + 1) * b];
    let mut derived_bytes = Vec::new();
    if let Some(m) = derived.bigram_modulus {
        derived_bytes = vec![0u8; n * 4];
        let x = |i: usize| token_at(tokens, ty, i) as i32;
        bigram_hash(n, x, m, |i, v| put_i32(&mut derived_bytes, i, v));
    }
    let mut targets = Vec::new();
    if layout.targets.is_some() {
        targets = vec![0u8; n * 8];
        for i in 0..n {
            targets[8 * i..8 * i + 8].copy_from_slice(&token_at(tokens, ty, i + 1).to_le_bytes());
        }
    }
    if let Some(at) = layout.bigram {
        out[at..at + n * 4].copy_from_slice(&derived_bytes);
    }
    if let Some(at) = layout.targets {
        out[at..at + n * 8].copy_from_slice(&targets);
    }
    let cu_out = &mut out[layout.cu_seqlens..layout.cu_seqlens + max_docs * 4];
    for (i, &v) in cu.iter().enumerate() {
        put_i32(cu_out, i, v);
    }
    for i in cu.len()..max_docs {
        put_i32(cu_out, i, n as i32);
    }
    Ok(())
}

/// modded-nanogpt's `get_bigram_hash` of the `n` inputs `x(0..n)` with modulus `m`
/// (`bigram_vocab_size - 1`), each output given to `put(i, value)`: `out[0] = m`, then
/// `out[i] = ((36313 · x[i]) XOR (27191 · prev)) mod m` with `prev = m` at `i = 1` (master
/// sets `out[0]` before it hashes `out[1:]` against `out[:-1]`) and `x[i - 1]` after; the
/// products wrap in int32 and `mod` is non-negative (torch's `%` takes the divisor's sign).
pub(crate) fn bigram_hash(n: usize, x: impl Fn(usize) -> i32, m: i32, mut put: impl FnMut(usize, i32)) {
    if n == 0 {
        return;
    }
    put(0, m);
    let mut prev = m;
    for i in 1..n {
        let cur = x(i);
        put(i, (cur.wrapping_mul(36313) ^ prev.wrapping_mul(27191)).rem_euclid(m));
        prev = cur;
    }
}

/// `ends` (`cu_seqlens`' entries before the padding, the first 0) with every segment — an
/// entry to the next, the last to `n` — longer than `cap` split from its start into
/// pieces of `cap` (the last shorter).
pub(crate) fn capped(ends: &[i32], n: i32, cap: u64) -> Vec<i32> {
    let cap = i64::try_from(cap).unwrap_or(i64::MAX);
    let mut out = Vec::with_capacity(ends.len());
    for (i, &a) in ends.iter().enumerate() {
        out.push(a);
        let b = ends.get(i + 1).copied().unwrap_or(n);
        let mut at = i64::from(a) + cap;
        while at < i64::from(b) {
            out.push(at as i32);
            at += cap;
        }
    }
    out
}

/// Token `i` of `tokens`, written as `ty`, as an `i64`.
fn token_at(tokens: &[u8], ty: TokenType, i: usize) -> i64 {
    let b = ty.bytes();
    let t = &tokens[i * b..(i + 1) * b];
    match ty {
        TokenType::U16 => i64::from(u16::from_le_bytes([t[0], t[1]])),
        TokenType::U32 => i64::from(u32::from_le_bytes([t[0], t[1], t[2], t[3]])),
        TokenType::I32 => i64::from(i32::from_le_bytes([t[0], t[1], t[2], t[3]])),
        TokenType::I64 => i64::from_le_bytes(t.try_into().unwrap_or([0; 8])),
    }
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
