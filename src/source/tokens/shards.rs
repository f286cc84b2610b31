//! [`TokenShards`]: one or more token files in order (llm.c shards, or files of another
//! [`TokenFileFormat`]), the token source for a sampler, and how its windows decode.

use std::path::Path;
use std::sync::Arc;

use super::decoders::Tokens;
use super::file_format::{Llmc, TokenFileFormat};
use super::format::ShardFormat;
use super::problem::ShardProblem;
use super::shard::TokenShard;
use super::token_type::TokenType;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::files::glob;
use crate::source::sampling::window_format::WindowFormat;
use crate::source::sampling::file_set::FileSet;
use crate::source::sampling::sampler::Sampler;
use crate::source::sampling::sampler_builder::SamplerBuilder;

/// One or more token files, in order: the token source for a [`Sampler`], whose windows
/// are `Window<TokenShard>`. The files are llm.c shards ([`open`](Self::open),
/// [`glob`](Self::glob)) or of another [`TokenFileFormat`] ([`open_as`](Self::open_as),
/// [`glob_as`](Self::glob_as)); their tokens are decoded to [`TokenType::I32`] unless
/// [`decode_as`](Self::decode_as) says otherwise. A [`FileSet`]: its sampling and checkpoint
/// fingerprint are every file format's.
///
/// ```
/// use pinring::source::{write_shard, Order, TokenShards};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-shards-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// write_shard(dir.join("train_000.bin"), &[1, 2, 3, 4, 5])?;
/// write_shard(dir.join("train_001.bin"), &[6, 7, 8, 9, 10, 11])?;
/// let shards = TokenShards::glob(dir.join("train_*.bin"))?;
/// assert_eq!(shards.tokens(), 11);
///
/// // Windows of 3 tokens (T = 2), stride 2, within each shard.
/// let sampler = shards.windows(3).build()?;
/// let epoch = sampler.epoch(0).map(|w| w.to_vec()).collect::<Result<Vec<_>, _>>()?;
/// assert_eq!(epoch, [vec![1, 2, 3], vec![3, 4, 5], vec![6, 7, 8], vec![8, 9, 10]]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
pub type TokenShards = FileSet<TokenShard, TokenType>;

impl TokenShards {
    /// Opens and checks every file in `paths` as an llm.c shard (either width), in the
    /// order given. The first malformed file is the error; no files is
    /// [`SourceError::NoFiles`]. ([`open_as`](Self::open_as) opens files of another
    /// format.)
    pub fn open<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Result<Self> {
        Self::open_as(paths, Llmc)
    }

    /// Opens every file a pattern names as an llm.c shard, sorted by name: `*` and `?` in
    /// the file name (`data/fineweb_train_*.bin`). A pattern that matches nothing is
    /// [`SourceError::NoMatch`].
    pub fn glob(pattern: impl AsRef<Path>) -> Result<Self> {
        Self::glob_as(pattern, Llmc)
    }

    /// Opens and checks every file in `paths` as a file of `format`, in the order given:
    /// [`Llmc`] (what [`open`](Self::open) opens), [`RawTokens`](crate::source::RawTokens)
    /// (headerless `u16` or `u32` tokens, as numpy's `tofile` writes them), ... Everything
    /// token shards feed — windows, [`Documents`](crate::source::Documents), mixtures —
    /// reads them alike. The first bad file is the error, named; no files is
    /// [`SourceError::NoFiles`].
    ///
    /// ```
    /// use pinring::source::{RawTokens, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-open-as-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// // OLMo's and MaxText's layout: u32 tokens, little-endian, nothing else.
    /// let tokens: Vec<u8> = (0..1000u32).flat_map(|t| t.to_le_bytes()).collect();
    /// std::fs::write(dir.join("part-0.bin"), &tokens).unwrap();
    /// let shards = TokenShards::open_as([dir.join("part-0.bin")], RawTokens::U32)?;
    /// assert_eq!(shards.tokens(), 1000);
    /// let sampler = shards.windows(5).build()?;
    /// assert_eq!(sampler.epoch(0).next().unwrap().to_vec()?, [0, 1, 2, 3, 4]);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn open_as<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
        format: impl TokenFileFormat,
    ) -> Result<Self> {
        FileSet::open_each(paths, |p| format.open(p), TokenType::I32)
    }

    /// Opens every file a pattern names as a file of `format`, sorted by name (`*` and `?`
    /// in the file name). A pattern that matches nothing is [`SourceError::NoMatch`].
    pub fn glob_as(pattern: impl AsRef<Path>, format: impl TokenFileFormat) -> Result<Self> {
        Self::open_as(glob::expand(pattern.as_ref())?, format)
    }

    /// Shards already opened (of any format).
    pub fn from_shards(shards: impl IntoIterator<Item = Arc<TokenShard>>) -> Result<Self> {
        FileSet::new(shards.into_iter().collect(), TokenType::I32)
    }

    /// The shards, in order.
    pub fn shards(&self) -> &[Arc<TokenShard>] {
        self.all()
    }

    /// Tokens in all shards.
    pub fn tokens(&self) -> u64 {
        self.total_units()
    }

    /// The widest format among the shards ([`ShardFormat::U32`] if any shard holds
    /// `u32` tokens). Shards of both formats may be mixed; a window never crosses a
    /// shard.
    pub fn format(&self) -> ShardFormat {
        self.shards()
            .iter()
            .map(|s| s.format())
            .max()
            .unwrap_or(ShardFormat::U16)
    }

    /// Checks up front that decoders writing tokens as `ty` can hold every shard's
    /// tokens: [`TokenType::U16`] cannot hold a `u32` shard's, which is a
    /// [`SourceError::File`] naming the first such shard, with the problem
    /// [`ShardProblem::TokenTypeTooNarrow`]. (Without the check, each window of such a
    /// shard is a [`DecodeError`](crate::DecodeError).)
    ///
    /// [`TokenType::I32`] passes: llm.c's vocabularies are far below `i32::MAX`, and a
    /// `u32` token above it is found while decoding, as a `DecodeError` naming the token
    /// (it is never wrapped into a negative id).
    pub fn check_token_type(&self, ty: TokenType) -> Result<()> {
        match self.shards().iter().find(|s| !ty.holds(s.format())) {
            Some(s) => Err(SourceError::file(
                s.path(),
                ShardProblem::TokenTypeTooNarrow {
                    format: s.format(),
                    ty,
                },
            )
            .into()),
            None => Ok(()),
        }
    }

    /// The same shards, decoded to `ty` by a [`Loader`](crate::Loader) over their windows
    /// (`TokenType::I32` unless set; the [`Tokens`](crate::source::Tokens) decoder of
    /// that type). A type too narrow for the shards' tokens is refused when the loader is
    /// built ([`check_token_type`](Self::check_token_type)).
    pub fn decode_as(self, ty: TokenType) -> Self {
        self.with_decode(ty)
    }

    /// What a loader decodes their tokens to ([`decode_as`](Self::decode_as)).
    pub fn decoded_as(&self) -> TokenType {
        *self.decode()
    }

    /// A sampler builder for windows of `tokens` tokens (`T + 1` for next-token
    /// training) at a stride of `tokens - 1`, so consecutive windows share one token and
    /// every token but a shard's first is a target exactly once per epoch.
    pub fn windows(self, tokens: u64) -> SamplerBuilder<Self> {
        Sampler::builder(self)
            .window(tokens)
            .stride(tokens.saturating_sub(1).max(1))
    }
}

impl SamplerBuilder<TokenShards> {
    /// Decodes the windows' tokens to `ty` ([`TokenShards::decode_as`]).
    pub fn decode_as(self, ty: TokenType) -> Self {
        self.map_source(|s| s.decode_as(ty))
    }
}

impl WindowFormat for TokenShards {
    type Decoder = Tokens;

    fn window_decoder(&self) -> Tokens {
        Tokens::new(self.decoded_as())
    }

    fn sample_bytes(&self, window: u64) -> usize {
        Tokens::new(self.decoded_as()).sample_bytes(window)
    }
}
