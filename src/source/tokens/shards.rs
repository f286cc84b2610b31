//! [`TokenShards`]: one or more token shards in order, the token source for a sampler.

use std::path::Path;
use std::sync::Arc;

use super::format::ShardFormat;
use super::problem::ShardProblem;
use super::shard::TokenShard;
use super::decoders::Tokens;
use super::token_type::TokenType;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::files::glob;
use crate::source::sampling::checkpoint::Fingerprint;
use crate::source::sampling::as_source::WindowFormat;
use crate::source::sampling::sampler::Sampler;
use crate::source::sampling::sampler_builder::SamplerBuilder;
use crate::source::sampling::segmented::{Segmented, WindowSpec};
use crate::source::sampling::window::Window;

/// One or more token shards, in order: the token source for a
/// [`Sampler`], whose windows are `Window<TokenShard>`.
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
#[derive(Debug, Clone)]
pub struct TokenShards {
    shards: Vec<Arc<TokenShard>>,
    /// What a loader decodes their tokens to (`TokenType::I32` unless set).
    decode_as: TokenType,
}

impl TokenShards {
    /// Opens and checks every file in `paths`, in the order given. The first malformed
    /// file is the error; no files is [`SourceError::NoFiles`].
    pub fn open<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Result<Self> {
        let shards = paths
            .into_iter()
            .map(|p| TokenShard::open(p).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        Self::from_shards(shards)
    }

    /// Opens every file a pattern names, sorted by name: `*` and `?` in the file name
    /// (`data/fineweb_train_*.bin`). A pattern that matches nothing is
    /// [`SourceError::NoMatch`].
    pub fn glob(pattern: impl AsRef<Path>) -> Result<Self> {
        Self::open(glob::expand(pattern.as_ref())?)
    }

    /// Shards already opened.
    pub fn from_shards(shards: impl IntoIterator<Item = Arc<TokenShard>>) -> Result<Self> {
        let shards: Vec<_> = shards.into_iter().collect();
        if shards.is_empty() {
            return Err(SourceError::NoFiles.into());
        }
        Ok(TokenShards {
            shards,
            decode_as: TokenType::I32,
        })
    }

    /// The shards, in order.
    pub fn shards(&self) -> &[Arc<TokenShard>] {
        &self.shards
    }

    /// Tokens in all shards.
    pub fn tokens(&self) -> u64 {
        self.shards.iter().map(|s| s.len() as u64).sum()
    }

    /// The widest format among the shards ([`ShardFormat::U32`] if any shard holds
    /// `u32` tokens). Shards of both formats may be mixed; a window never crosses a
    /// shard.
    pub fn format(&self) -> ShardFormat {
        self.shards
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
        match self.shards.iter().find(|s| !ty.holds(s.format())) {
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
    pub fn decode_as(mut self, ty: TokenType) -> Self {
        self.decode_as = ty;
        self
    }

    /// What a loader decodes their tokens to ([`decode_as`](Self::decode_as)).
    pub fn decoded_as(&self) -> TokenType {
        self.decode_as
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
        Tokens::new(self.decode_as)
    }

    fn sample_bytes(&self, window: u64) -> usize {
        Tokens::new(self.decode_as).sample_bytes(window)
    }
}

impl Segmented for TokenShards {
    type Window = Window<TokenShard>;

    fn segments(&self) -> usize {
        self.shards.len()
    }

    fn units(&self, segment: usize) -> u64 {
        self.shards.get(segment).map_or(0, |s| s.len() as u64)
    }

    fn window(&self, spec: WindowSpec) -> Window<TokenShard> {
        // Only windows inside a shard are asked for; `placed` clamps anything else.
        let shard = &self.shards[spec.segment.min(self.shards.len() - 1)];
        Window::placed(shard.clone(), spec)
    }

    fn unit_name(&self) -> &'static str {
        "tokens"
    }

    fn segment_path(&self, segment: usize) -> Option<&Path> {
        self.shards.get(segment).map(|s| s.path())
    }

    /// Format `"u16"` or `"u32"` (`"u16+u32"` when the shards mix both), each shard's
    /// file name, its size in bytes (header and tokens) and its content fingerprint
    /// ([`TokenShard::content`]).
    fn fingerprint(&self) -> Fingerprint {
        let has = |f| self.shards.iter().any(|s| s.format() == f);
        let format = match (has(ShardFormat::U16), has(ShardFormat::U32)) {
            (true, true) => "u16+u32",
            (false, true) => "u32",
            _ => "u16",
        };
        let mut print = Fingerprint::new(format, 0);
        for s in &self.shards {
            print.push_file_with_content(s.path(), s.file_bytes(), s.content());
        }
        print
    }
}
