//! Widening tokens: the file's `u16` or `u32` tokens, read into this thread's chunk (see
//! the files' [`chunk`](crate::source::files::chunk)), written into their place in the
//! sample as the training dtype in one pass, so that the pinned slot is written once and
//! read never — with streaming stores on x86-64 for samples of 4 KiB or more, which write
//! the slot's lines without loading them into the cache first. Tokens that keep their width
//! are read straight into the sample, and only checked (`u32` tokens as `i32`).

use super::format::ShardFormat;
use super::token_type::TokenType;

/// How tokens of a shard's format become the decoder's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Widening {
    /// The same bytes (`u16` to `u16`, `u32` to `u32`).
    Copy,
    /// The same bytes, each checked to be at most `i32::MAX` (`u32` to `i32`).
    CheckI32,
    /// `u16` to `i32`.
    U16ToI32,
    /// `u16` to `u32`.
    U16ToU32,
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
            (ShardFormat::U16, TokenType::U32) => Widening::U16ToU32,
            (ShardFormat::U16, TokenType::I32) => Widening::U16ToI32,
            (ShardFormat::U16, TokenType::I64) => Widening::U16ToI64,
            (ShardFormat::U32, TokenType::U16) => return None,
            (ShardFormat::U32, TokenType::U32) => Widening::Copy,
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

/// Checks, for [`Widening::CheckI32`], that the tokens read straight into `out` fit
/// `i32`; the other same-width widening ([`Widening::Copy`]) has nothing to check.
pub(crate) fn check_i32(out: &[u8], widening: Widening) -> Result<(), TooLargeForI32> {
    match widening {
        Widening::CheckI32 => first_too_large(out),
        _ => Ok(()),
    }
}

/// Widens the tokens of `raw` (the format's width) into `out` (the type's): the
/// `out.len() / b` first tokens of `raw`, which must hold that many. `raw` and `out` are
/// apart, so this is one plain pass.
pub(crate) fn widen_into(raw: &[u8], out: &mut [u8], widening: Widening) -> Result<(), TooLargeForI32> {
    match widening {
        Widening::Copy | Widening::CheckI32 => {
            // Checked where the bytes are read from (in cache), before the slot is written.
            let n = out.len().min(raw.len());
            check_i32(&raw[..n], widening)?;
            if !streaming::copy(&raw[..n], &mut out[..n]) {
                out[..n].copy_from_slice(&raw[..n]);
            }
        }
        // `u16` to `i32` and to `u32` are the same bytes: zero-extended.
        Widening::U16ToI32 | Widening::U16ToU32 => {
            if !streaming::u16_to_u32(raw, out) {
                widen_apart::<2, 4>(raw, out, |t| u32::from(u16::from_le_bytes(*t)).to_le_bytes());
            }
        }
        Widening::U16ToI64 => widen_apart::<2, 8>(raw, out, |t| i64::from(u16::from_le_bytes(*t)).to_le_bytes()),
        Widening::U32ToI64 => widen_apart::<4, 8>(raw, out, |t| i64::from(u32::from_le_bytes(*t)).to_le_bytes()),
    }
    Ok(())
}

/// Widening with stores that go around the cache, where the target has them: the slot is
/// written once and read next by the copy engine, so loading its lines into the cache
/// before writing them (what plain stores do) only doubles the memory traffic of a large
/// sample.
mod streaming {
    /// Outputs shorter than this are widened with plain stores: the fence a streamed pass
    /// ends with is not worth it for a few lines.
    const LEAST: usize = 4 << 10;

    /// `u16` tokens of `raw` zero-extended into the `u32` values filling `out`, streamed;
    /// false (nothing written) where it does not apply: not x86-64, an output shorter than
    /// [`LEAST`], or one not 4-byte aligned.
    #[cfg(target_arch = "x86_64")]
    pub(super) fn u16_to_u32(raw: &[u8], out: &mut [u8]) -> bool {
        use std::arch::x86_64::{
            _mm_loadu_si128, _mm_sfence, _mm_stream_si128, __m128i,
        };
        let n = (out.len() / 4).min(raw.len() / 2);
        let base = out.as_mut_ptr() as usize;
        if n * 4 < LEAST || base % 4 != 0 {
            return false;
        }
        let zext = |i: usize, out: &mut [u8]| {
            let t = u32::from(u16::from_le_bytes([raw[2 * i], raw[2 * i + 1]]));
            out[4 * i..4 * i + 4].copy_from_slice(&t.to_le_bytes());
        };
        // Plain stores up to the first 16-byte boundary of `out`, streams of 8 tokens to
        // the last, plain stores after it.
        let head = ((16 - base % 16) % 16 / 4).min(n);
        for i in 0..head {
            zext(i, out);
        }
        let body = (n - head) / 8 * 8;
        let (src, dst) = (raw.as_ptr(), out.as_mut_ptr());
        let mut i = head;
        while i < head + body {
            // Tokens `i..i + 8` lie in `raw` (16 bytes from `2i`: `i + 8 <= n <= raw.len() / 2`)
            // and their values in `out` (32 bytes from `4i`: `i + 8 <= n <= out.len() / 4`),
            // whose address `base + 4i` is 16-byte aligned (`head` brought it there; `4i`
            // steps by 32).
            // SAFETY: the 16 bytes read lie in `raw` (above); an unaligned load.
            let v = unsafe { _mm_loadu_si128(src.wrapping_add(2 * i).cast::<__m128i>()) };
            let (lo, hi) = zero_extend(v);
            // SAFETY: the 16 bytes written lie in `out`, 16-byte aligned (above).
            unsafe { _mm_stream_si128(dst.wrapping_add(4 * i).cast::<__m128i>(), lo) };
            // SAFETY: as the line above, 16 bytes further.
            unsafe { _mm_stream_si128(dst.wrapping_add(4 * i + 16).cast::<__m128i>(), hi) };
            i += 8;
        }
        for i in head + body..n {
            zext(i, out);
        }
        // Streamed stores are not ordered with later ones: the fence orders them before
        // whatever publishes the sample (the item's Release decrement that makes the batch
        // FILLED), so the copy thread that Acquires it reads these bytes.
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_sfence() };
        true
    }

    /// The 8 `u16` lanes of `v` zero-extended: the low four, the high four.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn zero_extend(v: std::arch::x86_64::__m128i) -> (std::arch::x86_64::__m128i, std::arch::x86_64::__m128i) {
        use std::arch::x86_64::{_mm_setzero_si128, _mm_unpackhi_epi16, _mm_unpacklo_epi16};
        // SAFETY: SSE2, which these need, is part of x86-64.
        let zero = unsafe { _mm_setzero_si128() };
        // SAFETY: as above.
        let lo = unsafe { _mm_unpacklo_epi16(v, zero) };
        // SAFETY: as above.
        let hi = unsafe { _mm_unpackhi_epi16(v, zero) };
        (lo, hi)
    }

    /// `raw` copied into `out` (of its length), streamed; false (nothing written) where it
    /// does not apply, as for [`u16_to_u32`].
    #[cfg(target_arch = "x86_64")]
    pub(super) fn copy(raw: &[u8], out: &mut [u8]) -> bool {
        use std::arch::x86_64::{_mm_loadu_si128, _mm_sfence, _mm_stream_si128, __m128i};
        let n = out.len().min(raw.len());
        let base = out.as_mut_ptr() as usize;
        if n < LEAST {
            return false;
        }
        let head = ((16 - base % 16) % 16).min(n);
        out[..head].copy_from_slice(&raw[..head]);
        let body = (n - head) / 16 * 16;
        let (src, dst) = (raw.as_ptr(), out.as_mut_ptr());
        let mut i = head;
        while i < head + body {
            // Bytes `i..i + 16` lie in `raw` and in `out` (`i + 16 <= head + body <= n`), and
            // `base + i` is 16-byte aligned (`head` brought it there; `i` steps by 16).
            // SAFETY: the 16 bytes read lie in `raw` (above); an unaligned load.
            let v = unsafe { _mm_loadu_si128(src.wrapping_add(i).cast::<__m128i>()) };
            // SAFETY: the 16 bytes written lie in `out`, 16-byte aligned (above).
            unsafe { _mm_stream_si128(dst.wrapping_add(i).cast::<__m128i>(), v) };
            i += 16;
        }
        out[head + body..n].copy_from_slice(&raw[head + body..n]);
        // The fence as in `u16_to_u32`.
        // SAFETY: SSE2 is part of x86-64.
        unsafe { _mm_sfence() };
        true
    }

    /// Not x86-64: plain stores.
    #[cfg(not(target_arch = "x86_64"))]
    pub(super) fn u16_to_u32(_raw: &[u8], _out: &mut [u8]) -> bool {
        false
    }

    /// Not x86-64: plain stores.
    #[cfg(not(target_arch = "x86_64"))]
    pub(super) fn copy(_raw: &[u8], _out: &mut [u8]) -> bool {
        false
    }
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

/// Checks that every `u32` in `bytes` is at most `i32::MAX` (whose bytes are then those of
/// the same `i32`): the high bits of the whole run at once, then the first offender's
/// place only if there is one.
fn first_too_large(bytes: &[u8]) -> Result<(), TooLargeForI32> {
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
    use crate::source::tokens::widen::{check_i32, widen_into, Widening};

    /// Widening gives what widening token by token gives, for every length around the
    /// vector widths and every widening, into a sample at any byte offset.
    #[test]
    fn widening_matches_token_by_token() {
        let cases: [(Widening, usize, usize); 6] = [
            (Widening::Copy, 2, 2),
            (Widening::Copy, 4, 4),
            (Widening::U16ToI32, 2, 4),
            (Widening::U16ToU32, 2, 4),
            (Widening::U16ToI64, 2, 8),
            (Widening::U32ToI64, 4, 8),
        ];
        for (widening, w, b) in cases {
            for n in (0..40).chain(500..530).chain(1020..1030).chain(2040..2060) {
                let tokens: Vec<u64> = (0..n as u64)
                    .map(|i| (i * 2_654_435_761) % (1u64 << (8 * w)))
                    .collect();
                let raw: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()[..w].to_vec()).collect();
                for skew in [0, 1, 3, 4, 8, 12] {
                    let mut out = vec![0x55u8; n * b + skew];
                    widen_into(&raw, &mut out[skew..], widening).unwrap();
                    let got: Vec<u64> = out[skew..]
                        .chunks_exact(b)
                        .map(|c| {
                            let mut v = [0u8; 8];
                            v[..b].copy_from_slice(c);
                            u64::from_le_bytes(v)
                        })
                        .collect();
                    assert_eq!(got, tokens, "{widening:?} n={n} skew={skew}");
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
        let err = check_i32(&bytes, Widening::CheckI32).unwrap_err();
        assert_eq!((err.index, err.token), (2, 1 << 31));
        assert!(check_i32(&bytes[..8], Widening::CheckI32).is_ok());
        assert!(check_i32(&bytes, Widening::Copy).is_ok());
    }
}
