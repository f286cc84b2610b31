//! Widening tokens: the file's `u16` or `u32` tokens, read into this thread's chunk (see
//! the files' [`chunk`](crate::source::files::chunk)), written into their place in the
//! sample as the training dtype in one pass, so that the pinned slot is written once and
//! read never. Tokens that keep their width are read straight into the sample, and only
//! checked (`u32` tokens as `i32`).

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
            out[..n].copy_from_slice(&raw[..n]);
        }
        Widening::U16ToI32 => widen_apart::<2, 4>(raw, out, |t| i32::from(u16::from_le_bytes(*t)).to_le_bytes()),
        Widening::U16ToU32 => widen_apart::<2, 4>(raw, out, |t| u32::from(u16::from_le_bytes(*t)).to_le_bytes()),
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
            for n in (0..40).chain(500..530).chain(1020..1030) {
                let tokens: Vec<u64> = (0..n as u64)
                    .map(|i| (i * 2_654_435_761) % (1u64 << (8 * w)))
                    .collect();
                let raw: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()[..w].to_vec()).collect();
                for skew in [0, 1, 3] {
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
