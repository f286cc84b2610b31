//! [`RawProblem`]: what is wrong with a file as raw headerless tokens.

use crate::error::source::FileProblem;
use crate::source::tokens::ShardFormat;

/// What is wrong with a file as raw tokens of the type said.
///
/// It rides in a [`SourceError::File`](crate::source::SourceError::File) that names the
/// file, as [`FileProblem::Format`]; [`FileProblem::format_problem`] gives it back:
///
/// ```
/// use pinring::source::{RawProblem, RawTokens, ShardFormat, SourceError, TokenShards};
/// use pinring::Error;
/// # let path = std::env::temp_dir().join(format!("pinring-raw-problem-doc-{}.bin", std::process::id()));
/// std::fs::write(&path, [0u8; 6]).unwrap(); // three u16 tokens: not whole u32 tokens
/// let err = TokenShards::open_as([&path], RawTokens::U32).unwrap_err();
/// let Error::Source(SourceError::File { problem, .. }) = &err else { panic!("{err}") };
/// assert_eq!(
///     problem.format_problem::<RawProblem>(),
///     Some(&RawProblem::PartialToken { len: 6, format: ShardFormat::U32 })
/// );
/// assert!(err.to_string().contains("not a whole number of u32 tokens"), "{err}");
/// # std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RawProblem {
    /// The file's size is not a multiple of the token width said: not a file of these
    /// tokens (the message says when it is one of the other width's).
    #[error(
        "length {len} is not a whole number of {format} tokens ({} bytes each){}",
        format.token_bytes(),
        other_width_hint(*len, *format)
    )]
    PartialToken {
        /// The file's length in bytes.
        len: u64,
        /// The token type said.
        format: ShardFormat,
    },
    /// The file starts with an llm.c shard's header (a magic number, its version and a
    /// token count that fits the file's size): its first 512 "tokens" would be the header.
    #[error(
        "starts with an llm.c shard's header ({format} tokens, {tokens} of them): open it as \
         an llm.c shard (TokenShards::open), not as raw tokens"
    )]
    LlmcHeader {
        /// The header's token width.
        format: ShardFormat,
        /// The header's token count.
        tokens: u64,
    },
    /// The file starts with numpy's `.npy` magic (`\x93NUMPY` and a format version): the
    /// array's header would be read as tokens.
    #[error(
        "starts with numpy's .npy header (magic \\x93NUMPY, version {major}): its header is not \
         tokens (numpy's `tofile` writes an array without one)"
    )]
    NpyHeader {
        /// The `.npy` format's major version.
        major: u8,
    },
}

impl From<RawProblem> for FileProblem {
    fn from(problem: RawProblem) -> Self {
        FileProblem::Format(Box::new(problem))
    }
}

/// What a [`RawProblem::PartialToken`] message adds when the file is a whole number of the
/// other width's tokens.
fn other_width_hint(len: u64, said: ShardFormat) -> String {
    let other = match said {
        ShardFormat::U16 => ShardFormat::U32,
        ShardFormat::U32 => ShardFormat::U16,
    };
    if len.is_multiple_of(other.token_bytes() as u64) {
        format!(": it is a whole number of {other} tokens; were they written as {other}?")
    } else {
        String::new()
    }
}
