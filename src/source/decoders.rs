//! Decoders for the sources' windows: tokens widened to the training dtype, next-token
//! (inputs, targets) pairs, and raw records.
//!
//! Each checks that the slot's sample size matches what the window needs and returns a
//! [`DecodeError`] saying what to set otherwise; none panics or reads outside the window
//! on any input. Every value is written little-endian.

use std::fmt;

use super::fixed_records::RecordWindow;
use super::token_shards::TokenWindow;
use crate::decode::Decode;
use crate::error::DecodeError;

/// The integer type tokens are written as in the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenType {
    /// `u16`, as stored: a plain copy.
    U16,
    /// `i32` (what embedding lookups in most frameworks take).
    I32,
    /// `i64` (PyTorch's default index type).
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

/// Writes `src` (little-endian `u16` tokens) into `out` as `ty`. `out` must be exactly
/// `src.len() / 2 * ty.bytes()` long; the callers check.
fn widen(src: &[u8], ty: TokenType, out: &mut [u8]) {
    let tokens = src
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]));
    match ty {
        TokenType::U16 => out.copy_from_slice(src),
        TokenType::I32 => {
            for (o, t) in out.chunks_exact_mut(4).zip(tokens) {
                o.copy_from_slice(&i32::from(t).to_le_bytes());
            }
        }
        TokenType::I64 => {
            for (o, t) in out.chunks_exact_mut(8).zip(tokens) {
                o.copy_from_slice(&i64::from(t).to_le_bytes());
            }
        }
    }
}

fn size_mismatch(what: &str, got: usize, need: usize, hint: &str) -> DecodeError {
    DecodeError::new(format!(
        "sample slot is {got} bytes, but {what} needs {need}: set bytes_per_sample with {hint}"
    ))
}

/// Writes a [`TokenWindow`]'s tokens into the sample as [`TokenType`]: a window of `n`
/// tokens takes `n × ty.bytes()` bytes. The widening from the shard's `u16` is the decode
/// work. The trainer slices `[:, :-1]` and `[:, 1:]` for inputs and targets, as
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
///     .samples_per_batch(4)
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
    pub const fn sample_bytes(&self, window_tokens: u64) -> usize {
        window_tokens as usize * self.ty.bytes()
    }
}

impl Decode for Tokens {
    type Sample = TokenWindow;

    fn decode(&self, window: TokenWindow, out: &mut [u8]) -> Result<(), DecodeError> {
        let src = window.bytes();
        let need = src.len() / 2 * self.ty.bytes();
        if out.len() != need {
            return Err(size_mismatch(
                &format!("a window of {} tokens as {}", window.len(), self.ty),
                out.len(),
                need,
                "Tokens::sample_bytes",
            ));
        }
        widen(src, self.ty, out);
        Ok(())
    }
}

/// Splits a [`TokenWindow`] of `T + 1` tokens for next-token training: the sample is
/// the `T` inputs (tokens `0..T`) followed by the `T` targets (tokens `1..=T`), each as
/// [`TokenType`], so a batch is a `[B, 2, T]` array. [`split`](Self::split) cuts a
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
    pub const fn sample_bytes(&self, window_tokens: u64) -> usize {
        2 * (window_tokens.saturating_sub(1) as usize) * self.ty.bytes()
    }

    /// A sample's (inputs, targets) bytes: its two halves.
    pub fn split(sample: &[u8]) -> (&[u8], &[u8]) {
        sample.split_at(sample.len() / 2)
    }
}

impl Decode for NextToken {
    type Sample = TokenWindow;

    fn decode(&self, window: TokenWindow, out: &mut [u8]) -> Result<(), DecodeError> {
        let src = window.bytes();
        let t = (src.len() / 2).saturating_sub(1);
        if t == 0 {
            return Err(DecodeError::new(format!(
                "a next-token window needs at least 2 tokens, got {}",
                src.len() / 2
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
        widen(&src[..2 * t], self.ty, inputs);
        widen(&src[2..], self.ty, targets);
        Ok(())
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

    fn decode(&self, window: RecordWindow, out: &mut [u8]) -> Result<(), DecodeError> {
        let src = window.bytes();
        if out.len() != src.len() {
            return Err(size_mismatch(
                &format!(
                    "{} record(s) of {} bytes",
                    window.count(),
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
