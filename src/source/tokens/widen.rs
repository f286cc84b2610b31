//! Widening tokens in place: a decoder reads a window's tokens (the file's bytes) into the
//! *tail* of the sample's byte range, then widens them forward into the whole range, so
//! the tokens go from the file to the pinned slot with one read and one pass, and no
//! buffer but a small one on the stack.
//!
//! Forward is safe: with `n` tokens of `w` bytes widened to `b ≥ w` bytes, the raw tokens
//! start at `n·(b − w)`; the block of tokens `i..i + m` is copied out to the stack before
//! its `m·b` output bytes are written, and those end at `(i + m)·b ≤ n·(b − w) + (i + m)·w`
//! (that is, `i + m ≤ n`): where the next block's raw tokens begin. Every raw token is
//! read before any write reaches it.

use super::format::ShardFormat;
use super::token_type::TokenType;

/// Tokens widened per block (the stack buffer holds a block's raw bytes: 2 KiB at most).
const BLOCK: usize = 512;

/// How tokens of a shard's format become the decoder's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Widening {
    /// The same bytes (`u16` to `u16`).
    Copy,
    /// The same bytes, each checked to be at most `i32::MAX` (`u32` to `i32`).
    CheckI32,
    /// `u16` to `i32`.
    U16ToI32,
    /// `u16` to `i64`.
    U16ToI64,
    /// `u32` to `i64`.
    U32ToI64,
}

impl Widening {
    /// How `from` tokens become `to`; `None` when `to` cannot hold them (`u32` to `u16`).
    pub(super) fn of(from: ShardFormat, to: TokenType) -> Option<Self> {
        Some(match (from, to) {
            (ShardFormat::U16, TokenType::U16) => Widening::Copy,
            (ShardFormat::U16, TokenType::I32) => Widening::U16ToI32,
            (ShardFormat::U16, TokenType::I64) => Widening::U16ToI64,
            (ShardFormat::U32, TokenType::U16) => return None,
            (ShardFormat::U32, TokenType::I32) => Widening::CheckI32,
            (ShardFormat::U32, TokenType::I64) => Widening::U32ToI64,
        })
    }
}

/// A `u32` token above `i32::MAX`, found by [`Widening::CheckI32`]: its index among the
/// tokens widened, and its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct TooLargeForI32 {
    pub(super) index: usize,
    pub(super) token: u32,
}

/// Widens the `n` tokens that lie in the last `n × w` bytes of `out` (`w` the format's
/// width) into the `n × b` bytes of `out` (`b` the type's), `n` being `out.len() / b`.
pub(super) fn widen_tail(out: &mut [u8], widening: Widening) -> Result<(), TooLargeForI32> {
    match widening {
        Widening::Copy => Ok(()),
        Widening::CheckI32 => check_i32(out),
        Widening::U16ToI32 => {
            widen_forward::<2, 4>(out, |t| i32::from(u16::from_le_bytes(*t)).to_le_bytes());
            Ok(())
        }
        Widening::U16ToI64 => {
            widen_forward::<2, 8>(out, |t| i64::from(u16::from_le_bytes(*t)).to_le_bytes());
            Ok(())
        }
        Widening::U32ToI64 => {
            widen_forward::<4, 8>(out, |t| i64::from(u32::from_le_bytes(*t)).to_le_bytes());
            Ok(())
        }
    }
}

/// Widens the tokens of `raw` (the format's width) into `out` (the type's): the
/// `out.len() / b` first tokens of `raw`, which must hold that many. `raw` and `out` are
/// apart, so this is one plain pass.
pub(super) fn widen_into(raw: &[u8], out: &mut [u8], widening: Widening) -> Result<(), TooLargeForI32> {
    match widening {
        Widening::Copy | Widening::CheckI32 => {
            let n = out.len().min(raw.len());
            out[..n].copy_from_slice(&raw[..n]);
            if widening == Widening::CheckI32 {
                check_i32(out)?;
            }
        }
        Widening::U16ToI32 => widen_apart::<2, 4>(raw, out, |t| i32::from(u16::from_le_bytes(*t)).to_le_bytes()),
        Widening::U16ToI64 => widen_apart::<2, 8>(raw, out, |t| i64::from(u16::from_le_bytes(*t)).to_le_bytes()),
        Widening::U32ToI64 => widen_apart::<4, 8>(raw, out, |t| i64::from(u32::from_le_bytes(*t)).to_le_bytes()),
    }
    Ok(())
}

/// `W`-byte tokens of `raw` into `B`-byte values filling `out`.
#[inline(always)]
fn widen_apart<const W: usize, const B: usize>(
    raw: &[u8],
    out: &mut [u8],
    widen: impl Fn(&[u8; W]) -> [u8; B],
) {
    for (o, t) in out.chunks_exact_mut(B).zip(raw.chunks_exact(W)) {
        if let Ok(t) = <&[u8; W]>::try_from(t) {
            o.copy_from_slice(&widen(t));
        }
    }
}

/// The forward in-place widening of `W`-byte tokens into `B`-byte values (see the
/// module's docs for why it never overwrites a token it has not read).
fn widen_forward<const W: usize, const B: usize>(
    out: &mut [u8],
    widen: impl Fn(&[u8; W]) -> [u8; B],
) {
    let n = out.len() / B;
    let raw = n * (B - W);
    let mut block = [0u8; BLOCK * 4];
    let mut i = 0;
    while i < n {
        let m = BLOCK.min(n - i);
        let src = raw + i * W;
        let block = &mut block[..m * W];
        block.copy_from_slice(&out[src..src + m * W]);
        widen_apart(block, &mut out[i * B..(i + m) * B], &widen);
        i += m;
    }
}

/// Checks that every `u32` in `bytes` is at most `i32::MAX` (whose bytes are then those of
/// the same `i32`): the high bits of the whole run at once, then the first offender's
/// place only if there is one.
fn check_i32(bytes: &[u8]) -> Result<(), TooLargeForI32> {
    let high = bytes.chunks_exact(4).fold(0u8, |acc, b| acc | b[3]) & 0x80;
    if high == 0 {
        return Ok(());
    }
    let (index, token) = bytes
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .enumerate()
        .find(|&(_, t)| t > i32::MAX as u32)
        .unwrap_or((0, 0));
    Err(TooLargeForI32 { index, token })
}

#[cfg(test)]
mod tests {
    use crate::source::tokens::widen::{widen_into, widen_tail, Widening};

    /// Widening in place gives what widening token by token gives, for every length
    /// around the block size and every widening.
    #[test]
    fn in_place_matches_token_by_token() {
        let cases: [(Widening, usize, usize); 4] = [
            (Widening::Copy, 2, 2),
            (Widening::U16ToI32, 2, 4),
            (Widening::U16ToI64, 2, 8),
            (Widening::U32ToI64, 4, 8),
        ];
        for (widening, w, b) in cases {
            for n in (0..40).chain(500..530).chain(1020..1030) {
                let tokens: Vec<u64> = (0..n as u64)
                    .map(|i| (i * 2_654_435_761) % (1u64 << (8 * w)))
                    .collect();
                let mut out = vec![0xAAu8; n * b];
                for (i, t) in tokens.iter().enumerate() {
                    let at = n * (b - w) + i * w;
                    out[at..at + w].copy_from_slice(&t.to_le_bytes()[..w]);
                }
                let raw = out[n * (b - w)..].to_vec();
                let mut apart = vec![0x55u8; n * b];
                widen_into(&raw, &mut apart, widening).unwrap();
                widen_tail(&mut out, widening).unwrap();
                assert!(apart == out, "{widening:?} n={n}: apart and in place differ");
                let got: Vec<u64> = out
                    .chunks_exact(b)
                    .map(|c| {
                        let mut v = [0u8; 8];
                        v[..b].copy_from_slice(c);
                        u64::from_le_bytes(v)
                    })
                    .collect();
                assert_eq!(got, tokens, "{widening:?} n={n}");
            }
        }
    }

    #[test]
    fn check_i32_finds_the_first_token_too_large() {
        let mut bytes = Vec::new();
        for t in [1u32, i32::MAX as u32, 1 << 31, u32::MAX] {
            bytes.extend_from_slice(&t.to_le_bytes());
        }
        let err = widen_tail(&mut bytes, Widening::CheckI32).unwrap_err();
        assert_eq!((err.index, err.token), (2, 1 << 31));
        assert!(widen_tail(&mut bytes[..8], Widening::CheckI32).is_ok());
    }
}
