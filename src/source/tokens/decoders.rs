//! The token decoders: a window's tokens widened to the training dtype ([`Tokens`]), or
//! cut into next-token (inputs, targets) pairs ([`NextToken`]).
//!
//! Each checks that the slot's sample size matches what the window needs and returns a
//! [`DecodeError`] saying what to set otherwise; none panics or reads outside the window
//! on any input. Every value is written little-endian. Tokens that keep their width are read
//! from the shard straight into the slot; tokens to widen are read through this thread's
//! chunk (in cache) and widened from there into their place (see [`widen`](super::widen)). A
//! shard that changed under the loader, or that the file system could not read, is the
//! read's [`SourceError`](crate::source::SourceError), which the pipeline reports from
//! `pop`.

use super::shard::TokenShard;
use super::token_type::TokenType;
use super::widen::{check_i32, widen_into, TooLargeForI32, Widening};
use crate::decode::Decode;
use crate::error::DecodeError;
use crate::source::sampling::window::Window;
use crate::source::sampling::window_sample::window_sample;

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

/// Writes a window's tokens (a `Window<TokenShard>`) into the sample as [`TokenType`]: a
/// window of `n` tokens takes `n × ty.bytes()` bytes. The read and the widening from the
/// shard's `u16` or `u32` are the decode work (see [`TokenType`] for `u32` shards). The
/// trainer slices `[:, :-1]` and `[:, 1:]` for inputs and targets, as modded-nanogpt does;
/// [`NextToken`] writes them apart instead.
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
    window_sample!(TokenShard);

    fn decode(&self, window: Window<TokenShard>, out: &mut [u8]) -> Result<(), DecodeError> {
        let n = window.len();
        let need = n.saturating_mul(self.ty.bytes());
        if out.len() != need {
            return Err(size_mismatch(
                &format!("a window of {n} tokens as {}", self.ty),
                out.len(),
                need,
                "Tokens::sample_bytes",
            ));
        }
        let widening = widening(&window, self.ty)?;
        if window.format().token_bytes() == self.ty.bytes() {
            // Nothing widens: the file's tokens straight into the sample (through the
            // chunk when the walk is sequential and the window short).
            window.read_into(out)?;
            return check_i32(out, widening).map_err(|e| too_large(&window, 0, e));
        }
        // Widened on the way: each piece of the file read into this thread's chunk (in
        // cache), then widened into its place in the sample.
        let b = self.ty.bytes();
        let mut bad = Ok(());
        window
            .shard()
            .read_tokens_chunked(window.start(), n, |i, piece| {
                let m = piece.len() / window.format().token_bytes();
                if let Err(e) = widen_into(piece, &mut out[i * b..(i + m) * b], widening) {
                    bad = bad.and(Err(TooLargeForI32 { index: i + e.index, ..e }));
                }
            })?;
        bad.map_err(|e| too_large(&window, 0, e))
    }
}

/// How the window's tokens become `ty`, or the error for a type that cannot hold them.
fn widening(window: &Window<TokenShard>, ty: TokenType) -> Result<Widening, DecodeError> {
    Widening::of(window.format(), ty).ok_or_else(|| {
        DecodeError::new(format!(
            "{} holds {} tokens, which {ty} cannot hold: decode as u32, i32 or i64 \
             (TokenShards::check_token_type finds this up front)",
            window.shard().path().display(),
            window.format()
        ))
    })
}

/// The error for a `u32` token above `i32::MAX`, `e.index` tokens after the window's
/// token `from`.
fn too_large(window: &Window<TokenShard>, from: usize, e: TooLargeForI32) -> DecodeError {
    DecodeError::new(format!(
        "token {} (index {} of {}) does not fit i32, whose largest is {}: decode as u32 or i64",
        e.token,
        window.start() + from + e.index,
        window.shard().path().display(),
        i32::MAX
    ))
}

/// Splits a window of `T + 1` tokens (a `Window<TokenShard>`) for next-token training:
/// the sample is
/// the `T` inputs (tokens `0..T`) followed by the `T` targets (tokens `1..=T`), each as
/// [`TokenType`], so a batch is a `[B, 2, T]` array. Reads shards of either
/// [`ShardFormat`](crate::source::ShardFormat) (see [`TokenType`] for `u32` shards). [`split`](Self::split) cuts a
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
    window_sample!(TokenShard);

    fn decode(&self, window: Window<TokenShard>, out: &mut [u8]) -> Result<(), DecodeError> {
        let n = window.len();
        let t = n.saturating_sub(1);
        if t == 0 {
            return Err(DecodeError::new(format!(
                "a next-token window needs at least 2 tokens, got {n}"
            )));
        }
        let b = self.ty.bytes();
        let need = (2 * t).saturating_mul(b);
        if out.len() != need {
            return Err(size_mismatch(
                &format!("a window of {n} tokens split as {}", self.ty),
                out.len(),
                need,
                "NextToken::sample_bytes",
            ));
        }
        let widening = widening(&window, self.ty)?;
        let w = window.format().token_bytes();
        let (inputs, targets) = out.split_at_mut(t * b);
        // The T + 1 tokens read once, a piece at a time through this thread's chunk (in
        // cache): a piece of tokens i..i + m is widened (or copied) into the inputs'
        // i..min(i + m, T) and into the targets' max(i, 1) - 1..i + m - 1.
        let mut bad = Ok(());
        window
            .shard()
            .read_tokens_chunked(window.start(), t + 1, |i, piece| {
                let m = piece.len() / w;
                let ins = m.min(t.saturating_sub(i));
                if let Err(e) =
                    widen_into(&piece[..ins * w], &mut inputs[i * b..(i + ins) * b], widening)
                {
                    bad = bad.and(Err((0, TooLargeForI32 { index: i + e.index, ..e })));
                }
                let skip = usize::from(i == 0);
                let first = i + skip - 1;
                let tgs = m - skip;
                if let Err(e) = widen_into(
                    &piece[skip * w..],
                    &mut targets[first * b..(first + tgs) * b],
                    widening,
                ) {
                    bad = bad.and(Err((1, TooLargeForI32 { index: first + e.index, ..e })));
                }
            })?;
        bad.map_err(|(from, e)| too_large(&window, from, e))
    }
}
