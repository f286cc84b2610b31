//! Widening tokens in place: a decoder reads a window's tokens (the file's bytes) into the
//! *tail* of the sample's byte range, then widens them forward into the whole range, so
//! the tokens go from the file to the pinned slot with one read and one pass, and no
//! buffer but a small one on the stack.
//!
//! Forward is safe: with `n` tokens of `w` bytes widened to `b > w` bytes, read to start at
//! `r ≤ n·(b − w)`, the block of tokens `i..i + m` is copied out to the stack before its
//! `m·b` output bytes are written, and those end at `(i + m)·b ≤ r + (i + m)·w` (that is,
//! `(i + m)·(b − w) ≤ r`): where the next block's raw tokens begin. The last `k` tokens,
//! for which that fails when `r` is below `n·(b − w)`, are set aside on the stack first
//! (`k·(b − w) ≥ n·(b − w) − r`). Every raw token is read before any write reaches it.
//!
//! Why `r` may lie below `n·(b − w)`: [`raw_start`] moves it down (by less than 64 bytes)
//! so that the read's destination and its source in the file agree modulo 64. A copy from
//! the page cache whose destination is a few bytes ahead of its source modulo 32 runs up to
//! ten times slower on some CPUs (an AMD EPYC: 80 µs against 8 µs for a 256 KiB `pread`).

use super::format::ShardFormat;
use super::token_type::TokenType;

/// Tokens widened per block (the stack buffer holds a block's raw bytes: 2 KiB at most).
const BLOCK: usize = 512;

/// How tokens of a shard's format become the decoder's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Widening {
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
    pub(crate) fn of(from: ShardFormat, to: TokenType) -> Option<Self> {
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
pub(crate) struct TooLargeForI32 {
    pub(crate) index: usize,
    pub(crate) token: u32,
}

/// Bytes by which [`raw_start`] may move a read down: the alignment it matches.
const ALIGN: usize = 64;

/// Where in `out` to read `raw_bytes` of tokens that start at `file_offset` in their file,
/// to widen them in place with [`widen_in_place`]: their natural place, the tail of `out`
/// (`out.len() − raw_bytes`), moved down by less than [`ALIGN`] bytes so that the
/// destination's address and `file_offset` agree modulo [`ALIGN`] (when there is room).
pub(crate) fn raw_start(out: &[u8], raw_bytes: usize, file_offset: u64) -> usize {
    let natural = out.len().saturating_sub(raw_bytes);
    let at = (out.as_ptr() as usize).wrapping_add(natural) % ALIGN;
    let want = (file_offset % ALIGN as u64) as usize;
    let down = (at + ALIGN - want) % ALIGN;
    if down <= natural {
        natural - down
    } else {
        natural
    }
}

/// Widens the `n = out.len() / b` tokens (of the format's width `w`) that lie in
/// `out[raw..raw + n·w]` into the `n·b` bytes of `out` (`b` the type's width), `raw` being
/// [`raw_start`]'s: at most `n·(b − w)` and less than [`ALIGN`] below it (and 0 when
/// nothing widens).
pub(crate) fn widen_in_place(
    out: &mut [u8],
    raw: usize,
    widening: Widening,
) -> Result<(), TooLargeForI32> {
    match widening {
        Widening::Copy => Ok(()),
        Widening::CheckI32 => check_i32(out),
        Widening::U16ToI32 => {
            widen_from::<2, 4>(out, raw, |t| i32::from(u16::from_le_bytes(*t)).to_le_bytes());
            Ok(())
        }
        Widening::U16ToI64 => {
            widen_from::<2, 8>(out, raw, |t| i64::from(u16::from_le_bytes(*t)).to_le_bytes());
            Ok(())
        }
        Widening::U32ToI64 => {
            widen_from::<4, 8>(out, raw, |t| i64::from(u32::from_le_bytes(*t)).to_le_bytes());
            Ok(())
        }
    }
}

/// Widens the tokens of `raw` (the format's width) into `out` (the type's): the
/// `out.len() / b` first tokens of `raw`, which must hold that many. `raw` and `out` are
/// apart, so this is one plain pass.
pub(crate) fn widen_into(raw: &[u8], out: &mut [u8], widening: Widening) -> Result<(), TooLargeForI32> {
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

/// The in-place widening of the `W`-byte tokens at `out[raw..]` into `B`-byte values
/// filling `out`, `B > W` (see the module's docs for why it never overwrites a token it
/// has not read).
fn widen_from<const W: usize, const B: usize>(
    out: &mut [u8],
    raw: usize,
    widen: impl Fn(&[u8; W]) -> [u8; B],
) {
    let n = out.len() / B;
    let natural = n * (B - W);
    let raw = raw.min(natural);
    debug_assert!(natural - raw < ALIGN, "raw_start moves a read less than ALIGN");
    // The last `k` tokens' output would reach their raw bytes before they are read: aside.
    let mut aside = [0u8; ALIGN];
    let k = (natural - raw).div_ceil(B - W).min(n).min(ALIGN / W);
    let kept = n - k;
    let from = raw + kept * W;
    aside[..k * W].copy_from_slice(&out[from..from + k * W]);
    widen_forward(out, kept, raw, &widen);
    widen_apart(&aside[..k * W], &mut out[kept * B..n * B], &widen);
}

/// Widens the first `count` tokens of `out[raw..]` forward into `out[..count·B]`, a block
/// at a time through the stack; `count·(B − W) ≤ raw`.
fn widen_forward<const W: usize, const B: usize>(
    out: &mut [u8],
    count: usize,
    raw: usize,
    widen: impl Fn(&[u8; W]) -> [u8; B],
) {
    let mut block = [0u8; BLOCK * 4];
    let mut i = 0;
    while i < count {
        let m = BLOCK.min(count - i);
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
    use crate::source::tokens::widen::{raw_start, widen_in_place, widen_into, Widening};

    /// Widening in place gives what widening token by token gives, for every length
    /// around the block size, every widening, and reads moved down by 0 to 63 bytes.
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
                let natural = n * (b - w);
                for down in [0, 1, 2, 7, 31, 62, 63].into_iter().filter(|&d| d <= natural) {
                    let raw = natural - down;
                    let mut out = vec![0xAAu8; n * b];
                    for (i, t) in tokens.iter().enumerate() {
                        let at = raw + i * w;
                        out[at..at + w].copy_from_slice(&t.to_le_bytes()[..w]);
                    }
                    let bytes = out[raw..raw + n * w].to_vec();
                    let mut apart = vec![0x55u8; n * b];
                    widen_into(&bytes, &mut apart, widening).unwrap();
                    widen_in_place(&mut out, raw, widening).unwrap();
                    let got: Vec<u64> = out
                        .chunks_exact(b)
                        .map(|c| {
                            let mut v = [0u8; 8];
                            v[..b].copy_from_slice(c);
                            u64::from_le_bytes(v)
                        })
                        .collect();
                    assert_eq!(got, tokens, "{widening:?} n={n} down={down}");
                    assert!(apart == out, "{widening:?} n={n}: apart and in place differ");
                }
            }
        }
    }

    /// The read's place matches the file offset modulo 64, moved down by less than 64.
    #[test]
    fn raw_start_aligns_with_the_file() {
        let out = vec![0u8; 4096];
        for raw_bytes in [0, 1, 2048, 4000] {
            for offset in [0u64, 2, 1026, 4095] {
                let r = raw_start(&out, raw_bytes, offset);
                let natural = 4096 - raw_bytes;
                assert!(r <= natural && natural - r < 64, "{raw_bytes} {offset}: {r}");
                if natural >= 63 {
                    assert_eq!((out.as_ptr() as usize + r) % 64, (offset % 64) as usize);
                }
            }
        }
    }

    #[test]
    fn check_i32_finds_the_first_token_too_large() {
        let mut bytes = Vec::new();
        for t in [1u32, i32::MAX as u32, 1 << 31, u32::MAX] {
            bytes.extend_from_slice(&t.to_le_bytes());
        }
        let err = widen_in_place(&mut bytes, 0, Widening::CheckI32).unwrap_err();
        assert_eq!((err.index, err.token), (2, 1 << 31));
        assert!(widen_in_place(&mut bytes[..8], 0, Widening::CheckI32).is_ok());
    }
}
