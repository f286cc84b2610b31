//! Decoders for the sources' windows: tokens widened to the training dtype, next-token
//! (inputs, targets) pairs, and raw records.
//!
//! Each checks that the slot's sample size matches what the window needs and returns a
//! [`DecodeError`] saying what to set otherwise; none panics or reads outside the window
//! on any input. Every value is written little-endian.

use std::fmt;

use super::fixed_records::RecordWindow;
use super::token_shards::{ShardFormat, TokenWindow};
use crate::decode::Decode;
use crate::error::DecodeError;

/// The integer type tokens are written as in the batch.
///
/// The token decoders read shards of either [`ShardFormat`]. From a `u32` shard:
/// [`I64`](Self::I64) holds every token; [`I32`](Self::I32) holds every token up to
/// `i32::MAX` (llm.c's vocabularies are far below it) and a larger token is a
/// [`DecodeError`] naming it, never wrapped into a negative id; [`U16`](Self::U16) is
/// refused for every window (a `DecodeError`; check up front with
/// [`TokenShards::check_token_type`](super::TokenShards::check_token_type)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenType {
    /// `u16`: a plain copy of a `u16` shard's tokens. Cannot hold a `u32` shard's.
    U16,
    /// `i32` (what embedding lookups in most frameworks take). A `u32` shard's token
    /// above `i32::MAX` is a [`DecodeError`], not a wrapped value.
    I32,
    /// `i64` (PyTorch's default index type): holds every token of either format.
    I64,
}

impl TokenType {
    /// Bytes per token.
    pub const fn bytes(self) -> usize {
        match self {
            TokenType::U16 => 2,
            TokenType::I32 => 4,
            TokenType::I64 => 8,
        }
    }

    /// Whether this type holds every token a shard of `format` may store: false only
    /// for [`U16`](Self::U16) from [`ShardFormat::U32`]. ([`I32`](Self::I32) is accepted
    /// for `u32` shards; a token above `i32::MAX` fails at decode time.)
    pub const fn holds(self, format: ShardFormat) -> bool {
        !matches!((self, format), (TokenType::U16, ShardFormat::U32))
    }

    /// The type's name, as in Rust.
    pub const fn name(self) -> &'static str {
        match self {
            TokenType::U16 => "u16",
            TokenType::I32 => "i32",
            TokenType::I64 => "i64",
        }
    }
}

impl fmt::Display for TokenType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Writes tokens `from..from + n` of `window` into `out` as `ty`, where `n` is
/// `out.len() / ty.bytes()`; the callers check that `out` has the size they need and that
/// the tokens lie in the window.
fn widen(
    window: &TokenWindow,
    from: usize,
    ty: TokenType,
    out: &mut [u8],
) -> Result<(), DecodeError> {
    let n = out.len() / ty.bytes();
    let width = window.format().token_bytes();
    let src = window
        .bytes()
        .get(from * width..(from + n) * width)
        .unwrap_or(&[]);
    match (window.format(), ty) {
        (ShardFormat::U16, TokenType::U16) => out.copy_from_slice(src),
        (ShardFormat::U16, TokenType::I32) => {
            for (o, b) in out.chunks_exact_mut(4).zip(src.chunks_exact(2)) {
                o.copy_from_slice(&i32::from(u16::from_le_bytes([b[0], b[1]])).to_le_bytes());
            }
        }
        (ShardFormat::U16, TokenType::I64) => {
            for (o, b) in out.chunks_exact_mut(8).zip(src.chunks_exact(2)) {
                o.copy_from_slice(&i64::from(u16::from_le_bytes([b[0], b[1]])).to_le_bytes());
            }
        }
        (ShardFormat::U32, TokenType::U16) => {
            return Err(DecodeError::new(format!(
                "{} holds u32 tokens, which u16 cannot hold: decode as i32 or i64 \
                 (TokenShards::check_token_type finds this up front)",
                window.shard().path().display()
            )))
        }
        (ShardFormat::U32, TokenType::I32) => {
            // The bytes of a u32 up to i32::MAX are those of the same i32: copy, and
            // check the high bits once for the whole window (no branch per token).
            out.copy_from_slice(src);
            let high = src.chunks_exact(4).fold(0u8, |acc, b| acc | b[3]) & 0x80;
            if high != 0 {
                let (i, t) = src
                    .chunks_exact(4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .enumerate()
                    .find(|&(_, t)| t > i32::MAX as u32)
                    .unwrap_or((0, 0));
                return Err(DecodeError::new(format!(
                    "token {t} (index {} of {}) does not fit i32, whose largest is {}: \
                     decode as i64",
                    window.start() + from + i,
                    window.shard().path().display(),
                    i32::MAX
                )));
            }
        }
        (ShardFormat::U32, TokenType::I64) => {
            for (o, b) in out.chunks_exact_mut(8).zip(src.chunks_exact(4)) {
                o.copy_from_slice(
                    &i64::from(u32::from_le_bytes([b[0], b[1], b[2], b[3]])).to_le_bytes(),
                );
            }
        }
    }
    Ok(())
}

/// `n` as `usize`, or `usize::MAX` when it does not fit.
const fn saturating_usize(n: u64) -> usize {
    if n > usize::MAX as u64 {
        usize::MAX
    } else {
        n as usize
    }
}

fn size_mismatch(what: &str, got: usize, need: usize, hint: &str) -> DecodeError {
    DecodeError::new(format!(
        "sample slot is {got} bytes, but {what} needs {need}: set bytes_per_sample with {hint}"
    ))
}

/// Writes a [`TokenWindow`]'s tokens into the sample as [`TokenType`]: a window of `n`
/// tokens takes `n × ty.bytes()` bytes. The widening from the shard's `u16` or `u32` is
/// the decode work (see [`TokenType`] for `u32` shards). The trainer slices `[:, :-1]` and `[:, 1:]` for inputs and targets, as
/// modded-nanogpt does; [`NextToken`] writes them apart instead.
///
/// ```
/// use pinring::source::{write_shard, TokenShards, TokenType, Tokens};
/// use pinring::{Config, Fence, Pipeline};
///
/// # let path = std::env::temp_dir().join(format!("pinring-tokens-doc-{}.bin", std::process::id()));
/// write_shard(&path, &(0..1025u16).collect::<Vec<_>>())?;
/// let sampler = TokenShards::open([&path])?.windows(65).build()?; // T = 64
/// let decoder = Tokens::new(TokenType::I32);
/// let config = Config::builder()
///     .batch_size(4)
///     .bytes_per_sample(decoder.sample_bytes(65))
///     .decode_threads(2)
///     .build()?;
/// // One epoch: 16 windows, 4 batches.
/// let mut pipeline = Pipeline::new(config, decoder, sampler.epoch(0))?;
/// while let Some(batch) = pipeline.pop()? {
///     let first = i32::from_le_bytes(batch.bytes()[..4].try_into().unwrap());
///     assert_eq!(first, batch.seq() as i32 * 4 * 64); // window k starts at token 64k
///     batch.release(Fence::Sync).expect("a Sync fence always captures");
/// }
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Tokens {
    ty: TokenType,
}

impl Tokens {
    /// A decoder writing tokens as `ty`.
    pub const fn new(ty: TokenType) -> Self {
        Tokens { ty }
    }

    /// The type tokens are written as.
    pub const fn token_type(&self) -> TokenType {
        self.ty
    }

    /// Bytes a window of `window_tokens` tokens takes: the `bytes_per_sample` to configure.
    /// Saturates at `usize::MAX` (which no config accepts) rather than overflowing.
    pub const fn sample_bytes(&self, window_tokens: u64) -> usize {
        saturating_usize(window_tokens).saturating_mul(self.ty.bytes())
    }
}

impl Decode for Tokens {
    type Sample = TokenWindow;

    fn identify(window: &TokenWindow) -> Option<(u64, u64)> {
        Some((window.id(), window.epoch()))
    }

    fn decode(&self, window: TokenWindow, out: &mut [u8]) -> Result<(), DecodeError> {
        let n = window.bytes().len() / window.format().token_bytes();
        let need = n * self.ty.bytes();
        if out.len() != need {
            return Err(size_mismatch(
                &format!("a window of {} tokens as {}", window.len(), self.ty),
                out.len(),
                need,
                "Tokens::sample_bytes",
            ));
        }
        widen(&window, 0, self.ty, out)
    }
}

/// Splits a [`TokenWindow`] of `T + 1` tokens for next-token training: the sample is
/// the `T` inputs (tokens `0..T`) followed by the `T` targets (tokens `1..=T`), each as
/// [`TokenType`], so a batch is a `[B, 2, T]` array. Reads shards of either
/// [`ShardFormat`] (see [`TokenType`] for `u32` shards). [`split`](Self::split) cuts a
/// sample's bytes back into the two halves.
///
/// ```
/// use pinring::source::{NextToken, TokenType};
///
/// let decoder = NextToken::new(TokenType::U16);
/// assert_eq!(decoder.sample_bytes(5), 2 * 4 * 2); // T = 4: 4 inputs + 4 targets, 2 bytes each
/// let sample = [1u8, 0, 2, 0, 3, 0, 4, 0, 2, 0, 3, 0, 4, 0, 5, 0];
/// let (inputs, targets) = NextToken::split(&sample);
/// assert_eq!((inputs[0], targets[0]), (1, 2));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextToken {
    ty: TokenType,
}

impl NextToken {
    /// A decoder writing inputs and targets as `ty`.
    pub const fn new(ty: TokenType) -> Self {
        NextToken { ty }
    }

    /// The type tokens are written as.
    pub const fn token_type(&self) -> TokenType {
        self.ty
    }

    /// Bytes a window of `window_tokens` (`T + 1`) tokens takes: `2 × T × ty.bytes()`.
    /// Saturates at `usize::MAX` (which no config accepts) rather than overflowing.
    pub const fn sample_bytes(&self, window_tokens: u64) -> usize {
        saturating_usize(window_tokens.saturating_sub(1))
            .saturating_mul(2)
            .saturating_mul(self.ty.bytes())
    }

    /// A sample's (inputs, targets) bytes: its two halves.
    pub fn split(sample: &[u8]) -> (&[u8], &[u8]) {
        sample.split_at(sample.len() / 2)
    }
}

impl Decode for NextToken {
    type Sample = TokenWindow;

    fn identify(window: &TokenWindow) -> Option<(u64, u64)> {
        Some((window.id(), window.epoch()))
    }

    fn decode(&self, window: TokenWindow, out: &mut [u8]) -> Result<(), DecodeError> {
        let n = window.bytes().len() / window.format().token_bytes();
        let t = n.saturating_sub(1);
        if t == 0 {
            return Err(DecodeError::new(format!(
                "a next-token window needs at least 2 tokens, got {n}"
            )));
        }
        let need = 2 * t * self.ty.bytes();
        if out.len() != need {
            return Err(size_mismatch(
                &format!("a window of {} tokens split as {}", t + 1, self.ty),
                out.len(),
                need,
                "NextToken::sample_bytes",
            ));
        }
        let (inputs, targets) = out.split_at_mut(need / 2);
        widen(&window, 0, self.ty, inputs)?;
        widen(&window, 1, self.ty, targets)
    }
}

/// Copies a [`RecordWindow`]'s bytes into the sample unchanged; the sample size must be
/// the window's byte size (`record_bytes` times records per window).
///
/// ```
/// use pinring::source::{FixedRecords, RecordBytes, Sampler};
/// use pinring::Decode;
///
/// # let path = std::env::temp_dir().join(format!("pinring-recbytes-doc-{}.bin", std::process::id()));
/// std::fs::write(&path, b"abcdefgh").unwrap();
/// let sampler = Sampler::builder(FixedRecords::open([&path], 4)?).build()?;
/// let mut out = [0u8; 4];
/// RecordBytes.decode(sampler.epoch(0).nth(1).unwrap(), &mut out)?;
/// assert_eq!(&out, b"efgh");
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordBytes;

impl Decode for RecordBytes {
    type Sample = RecordWindow;

    fn identify(window: &RecordWindow) -> Option<(u64, u64)> {
        Some((window.id(), window.epoch()))
    }

    fn decode(&self, window: RecordWindow, out: &mut [u8]) -> Result<(), DecodeError> {
        let src = window.bytes();
        if out.len() != src.len() {
            return Err(size_mismatch(
                &format!(
                    "{} record(s) of {} bytes",
                    window.len(),
                    window.file().record_bytes()
                ),
                out.len(),
                src.len(),
                "the record size times records per window",
            ));
        }
        out.copy_from_slice(src);
        Ok(())
    }
}
