//! [`ShardProblem`]: what is wrong with a file as an llm.c token shard.

use super::format::{ShardFormat, SHARD_HEADER_BYTES, SHARD_MAGIC_U32};
use super::token_type::TokenType;
use crate::error::source::FileProblem;

/// What is wrong with a file as a token shard: its header, or its size against the
/// header, or (from [`TokenShards::check_token_type`](crate::source::TokenShards::check_token_type))
/// its tokens against the decoder's type.
///
/// It rides in a [`SourceError::File`](crate::source::SourceError::File) that names the
/// file, as [`FileProblem::Format`]; [`FileProblem::format_problem`] gives it back:
///
/// ```
/// use pinring::source::{ShardProblem, SourceError, TokenShard, SHARD_MAGIC};
/// use pinring::Error;
/// # let path = std::env::temp_dir().join(format!("pinring-problem-doc-{}.bin", std::process::id()));
/// std::fs::write(&path, [0u8; 2000]).unwrap(); // zeros: not a shard's magic
/// let err = TokenShard::open(&path).unwrap_err();
/// let Error::Source(SourceError::File { problem, .. }) = &err else { panic!("{err}") };
/// assert_eq!(
///     problem.format_problem::<ShardProblem>(),
///     Some(&ShardProblem::BadMagic { found: 0, expected: SHARD_MAGIC })
/// );
/// # std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShardProblem {
    /// The file is shorter than the header.
    #[error("truncated header: the file has {len} bytes, a header needs {needed}")]
    TruncatedHeader {
        /// The file's length in bytes.
        len: u64,
        /// Bytes the header takes.
        needed: u64,
    },
    /// The header's magic number is neither llm.c format's.
    #[error(
        "wrong magic number {found}: not a token shard (llm.c's shards start with {expected} \
         for u16 tokens or {SHARD_MAGIC_U32} for u32 tokens)"
    )]
    BadMagic {
        /// The magic found.
        found: i32,
        /// The u16 format's magic, [`SHARD_MAGIC`](crate::source::SHARD_MAGIC) (the u32
        /// format's is [`SHARD_MAGIC_U32`]).
        expected: i32,
    },
    /// The header's version is not the one this crate reads for the header's magic.
    #[error("unsupported version {found} for {} (expected {expected})", version_context(*expected))]
    BadVersion {
        /// The version found.
        found: i32,
        /// The version this crate reads for the magic found:
        /// [`SHARD_VERSION`](crate::source::SHARD_VERSION) for u16 shards,
        /// [`SHARD_VERSION_U32`](crate::source::SHARD_VERSION_U32) for u32 shards.
        expected: i32,
    },
    /// The header's token count is zero or negative (or, when writing, too large).
    #[error("bad token count {count} in the header: it must be in 1..=2147483647")]
    BadTokenCount {
        /// The count found (or asked for).
        count: i64,
    },
    /// The header promises more tokens than the file holds.
    #[error(
        "token count {count} is beyond the file: it needs {needed} bytes, the file has {len}{}",
        width_hint_short(*count, *needed, *len)
    )]
    TokensBeyondFile {
        /// The header's token count.
        count: u64,
        /// Bytes header plus tokens take.
        needed: u64,
        /// The file's length in bytes.
        len: u64,
    },
    /// The file holds bytes past the tokens the header counts. When the file is exactly
    /// the size of the counted tokens at another width, the message says so: a shard of
    /// `u32` tokens behind a `u16` header is the usual cause.
    #[error(
        "{extra} trailing bytes after the {count} tokens the header counts{}",
        width_hint_trailing(*count, *extra, *token_bytes)
    )]
    TrailingBytes {
        /// The header's token count.
        count: u64,
        /// Bytes past the last token.
        extra: u64,
        /// Bytes per token of the header's format (2 or 4).
        token_bytes: u64,
    },
    /// A decoder's token type cannot hold the tokens the shard stores: `u16` output from a
    /// shard of `u32` tokens. Found up front by
    /// [`TokenShards::check_token_type`](crate::source::TokenShards::check_token_type).
    #[error(
        "holds {format} tokens, which the decoder's {ty} cannot hold: decode it as u32, i32 or i64"
    )]
    TokenTypeTooNarrow {
        /// The shard's format.
        format: ShardFormat,
        /// The decoder's token type.
        ty: TokenType,
    },
}

impl From<ShardProblem> for FileProblem {
    fn from(problem: ShardProblem) -> Self {
        FileProblem::Format(Box::new(problem))
    }
}

/// The format a [`ShardProblem::BadVersion`]'s expected version belongs to.
fn version_context(expected: i32) -> String {
    match [ShardFormat::U16, ShardFormat::U32]
        .into_iter()
        .find(|f| f.version() == expected)
    {
        Some(f) => format!("a {} shard (magic {})", f.describe(), f.magic()),
        None => "this shard".to_owned(),
    }
}

/// The token width the file's data would have if each counted token took the same
/// number of bytes, when that is a plausible width other than the header's.
fn other_width(count: u64, data: u64, token_bytes: u64) -> Option<u64> {
    if count == 0 || !data.is_multiple_of(count) {
        return None;
    }
    let width = data / count;
    (matches!(width, 1 | 2 | 4 | 8) && width != token_bytes).then_some(width)
}

fn width_hint(width: u64, token_bytes: u64) -> String {
    format!(
        "; the file holds exactly {width} bytes per counted token, where the header's format \
         has {token_bytes}: were the tokens written {}-bit? (u16 tokens go with magic {} and \
         version {}, u32 tokens with magic {} and version {})",
        width * 8,
        ShardFormat::U16.magic(),
        ShardFormat::U16.version(),
        ShardFormat::U32.magic(),
        ShardFormat::U32.version(),
    )
}

/// The token-width hint of a [`ShardProblem::TrailingBytes`] message, or nothing.
fn width_hint_trailing(count: u64, extra: u64, token_bytes: u64) -> String {
    count
        .checked_mul(token_bytes)
        .and_then(|d| d.checked_add(extra))
        .and_then(|data| other_width(count, data, token_bytes))
        .map_or_else(String::new, |w| width_hint(w, token_bytes))
}

/// The token-width hint of a [`ShardProblem::TokensBeyondFile`] message, or nothing.
fn width_hint_short(count: u64, needed: u64, len: u64) -> String {
    let header = SHARD_HEADER_BYTES as u64;
    let (Some(tokens), Some(data)) = (needed.checked_sub(header), len.checked_sub(header)) else {
        return String::new();
    };
    if count == 0 || tokens % count != 0 || data == 0 {
        return String::new();
    }
    other_width(count, data, tokens / count)
        .map_or_else(String::new, |w| width_hint(w, tokens / count))
}
