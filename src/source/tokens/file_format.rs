//! [`TokenFileFormat`]: a file format of tokens — how one file of it opens as a
//! [`TokenShard`] — and [`Llmc`], llm.c's, which [`TokenShards::open`] opens.
//!
//! A format is what differs between token files: its header (or none), the width of its
//! tokens and where they start. Once a file is open, its tokens are read alike whatever its
//! format, so everything token shards feed (windows, documents, mixtures) reads every
//! format. Each other format is a folder of its own beside `tokens/`
//! ([`RawTokens`](crate::source::RawTokens) in `raw/`).
//!
//! [`TokenShards::open`]: crate::source::TokenShards::open

use std::fmt;
use std::path::Path;

use super::shard::TokenShard;
use crate::error::Result;

/// A file format of tokens: how one file of it is checked and opened as a [`TokenShard`]
/// (where its tokens start, how wide they are, how many there are). What
/// [`TokenShards::open_as`](crate::source::TokenShards::open_as) takes: [`Llmc`],
/// [`RawTokens`](crate::source::RawTokens).
pub trait TokenFileFormat: fmt::Debug + Send + Sync {
    /// Opens and checks the file at `path`. A file that is not what the format says is a
    /// [`SourceError::File`](crate::source::SourceError::File) naming it, with the format's
    /// own problem ([`FileProblem::format_problem`](crate::source::FileProblem::format_problem)).
    fn open(&self, path: &Path) -> Result<TokenShard>;
}

/// A format by reference (`&*boxed` for a `Box<dyn TokenFileFormat>`).
impl<T: TokenFileFormat + ?Sized> TokenFileFormat for &T {
    fn open(&self, path: &Path) -> Result<TokenShard> {
        (**self).open(path)
    }
}

/// llm.c's `.bin` token shards (and modded-nanogpt's): a header of 256 `i32` that says
/// the token width ([`ShardFormat`](crate::source::ShardFormat)) and count, then the tokens.
/// [`TokenShard::open`] opens one; [`TokenShards::open`](crate::source::TokenShards::open)
/// opens files of this format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Llmc;

impl TokenFileFormat for Llmc {
    fn open(&self, path: &Path) -> Result<TokenShard> {
        TokenShard::open(path)
    }
}
