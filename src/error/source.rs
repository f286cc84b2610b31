//! What can go wrong opening a data source or setting up a sampler.

use std::path::PathBuf;

use crate::source::TokenType;
use crate::source::{ShardFormat, SHARD_MAGIC_U32};

/// A data source could not be opened, or a sampler was set up wrong.
///
/// Reached through [`Error::Source`](crate::Error::Source). Every file problem names the
/// file; match on [`FileProblem`] to tell the cases apart.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// One file is unreadable or malformed.
    #[error("{}: {problem}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: FileProblem,
    },
    /// A pattern given to a `glob` constructor matched no file.
    #[error("no file matches `{pattern}`")]
    NoMatch {
        /// The pattern as given.
        pattern: PathBuf,
    },
    /// A pattern has a wildcard outside its last component, or is not valid UTF-8.
    #[error("unsupported pattern `{}`: {why}", pattern.display())]
    BadPattern {
        /// The pattern as given.
        pattern: PathBuf,
        /// What is unsupported about it.
        why: &'static str,
    },
    /// A source was given no files.
    #[error("no files given")]
    NoFiles,
    /// A sampler or source setting that must be at least 1 was 0.
    #[error("`{0}` must be at least 1")]
    Zero(&'static str),
    /// `rank` is not below `world_size`.
    #[error("rank {rank} is not below world_size {world_size}")]
    BadRank {
        /// The rank given.
        rank: u64,
        /// The world size given.
        world_size: u64,
    },
    /// No segment (file) of the source is long enough for a single window, so an epoch
    /// is empty.
    #[error("no window of {window} units fits: the longest file holds {longest}")]
    NoWindows {
        /// Units (tokens or records) per window.
        window: u64,
        /// Units in the longest segment.
        longest: u64,
    },
    /// The source has windows, but this rank's share of an epoch is empty: there are
    /// fewer windows than ranks (or [`even_ranks`](crate::source::SamplerBuilder::even_ranks)
    /// drops them all to keep the ranks equal).
    #[error("{}", empty_share(*rank, *world_size, *windows, *even_ranks))]
    EmptyShare {
        /// The rank given.
        rank: u64,
        /// The world size given.
        world_size: u64,
        /// Windows in one epoch over all ranks, before `even_ranks` drops any.
        windows: u64,
        /// Whether `even_ranks` was set.
        even_ranks: bool,
    },
    /// A decoder's token type cannot hold the tokens a shard stores: `u16` output from a
    /// shard of `u32` tokens. Found up front by
    /// [`TokenShards::check_token_type`](crate::source::TokenShards::check_token_type).
    #[error(
        "{}: holds {format} tokens, which the decoder's {ty} cannot hold: decode it as i32 \
         or i64",
        path.display()
    )]
    TokenTypeTooNarrow {
        /// The first shard whose tokens do not fit.
        path: PathBuf,
        /// That shard's format.
        format: ShardFormat,
        /// The decoder's token type.
        ty: TokenType,
    },
    /// With a [`batch_size`](crate::source::SamplerBuilder::batch_size), an epoch has too few
    /// windows to give every rank a batch: fewer than `world_size × batch_size` with
    /// [`drop_last`](crate::source::SamplerBuilder::drop_last), fewer than `world_size` without.
    #[error("{}", too_few_for_batches(*windows, *world_size, *batch_size, *drop_last))]
    TooFewForBatches {
        /// Windows in one epoch over all ranks, before any is dropped.
        windows: u64,
        /// The world size given.
        world_size: u64,
        /// The batch size given.
        batch_size: u64,
        /// Whether `drop_last` was set.
        drop_last: bool,
    },
    /// A [`Checkpoint`](crate::source::Checkpoint) belongs to another run: another checkpoint
    /// version, dataset (format, file names or sizes), window, stride, order or seed — or,
    /// from [`Checkpoint::merge`](crate::source::Checkpoint::merge), ranks of different runs.
    /// Resuming from it would silently repeat or skip windows, so it is refused.
    #[error(
        "the checkpoint does not match: {what} is {saved} in the checkpoint but {here} \
        here; a checkpoint resumes only the same dataset, window, stride, order and seed \
        (the world size and batch size may change)"
    )]
    CheckpointMismatch {
        /// What differs.
        what: String,
        /// Its value in the checkpoint (with `merge`: in rank 0's).
        saved: String,
        /// Its value in this sampler (with `merge`: in the other rank's).
        here: String,
    },
    /// A [`Checkpoint`](crate::source::Checkpoint) says more windows of its epoch were consumed
    /// than the epoch has.
    #[error(
        "the checkpoint is past its epoch: it says {consumed} windows of epoch {epoch} were \
        consumed, but an epoch has {windows}"
    )]
    CheckpointPastEpoch {
        /// The checkpoint's epoch.
        epoch: u64,
        /// The checkpoint's consumed count.
        consumed: u64,
        /// Windows in one epoch's order.
        windows: u64,
    },
    /// The ranks' checkpoints given to [`Checkpoint::merge`](crate::source::Checkpoint::merge)
    /// stand at different places: the ranks consumed unequal counts, so no single global
    /// position describes them (resuming would repeat or skip windows).
    #[error("{}", unequal_ranks(positions))]
    UnequalRanks {
        /// Each rank's (epoch, consumed), indexed by rank.
        positions: Vec<(u64, u64)>,
    },
    /// A checkpoint's text form (or a field of it) could not be read.
    #[error("bad checkpoint text (line {line}): {why}")]
    BadCheckpointText {
        /// The line, from 1 (0: a field of a checkpoint value, not a line of text).
        line: usize,
        /// What is wrong.
        why: String,
    },
    /// A position to resume from lies past the end of its epoch.
    #[error("position index {index} is past the end of the epoch ({len} samples for this rank)")]
    BadPosition {
        /// The index given.
        index: u64,
        /// Samples per epoch for this rank.
        len: u64,
    },
}

/// What is wrong with one file. Carried by [`SourceError::File`], which names the file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileProblem {
    /// The system could not open, read, map or write it.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The path names a directory, not a file.
    #[error("is a directory, not a file: name the files in it, or a pattern such as `DIR/*.bin`")]
    IsDirectory,
    /// The path names something other than a regular file (a device, a pipe, a socket),
    /// which cannot be memory-mapped.
    #[error("not a regular file (a device, pipe or socket): sources memory-map plain files")]
    NotAFile,
    /// The file has no bytes at all.
    #[error("file is empty (0 bytes)")]
    Empty,
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
        /// The u16 format's magic, [`SHARD_MAGIC`](crate::source::SHARD_MAGIC) (the u32 format's
        /// is [`SHARD_MAGIC_U32`](crate::source::SHARD_MAGIC_U32)).
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
    /// The file's length is not a whole number of records.
    #[error("length {len} is not a multiple of the record size {record_bytes}")]
    PartialRecord {
        /// The file's length in bytes.
        len: u64,
        /// Bytes per record.
        record_bytes: u64,
    },
    /// The file does not fit in this process's address space.
    #[error("file of {len} bytes does not fit in the address space")]
    TooLarge {
        /// The file's length in bytes.
        len: u64,
    },
}

impl SourceError {
    /// A [`SourceError::File`] for `path`.
    pub(crate) fn file(path: impl Into<PathBuf>, problem: impl Into<FileProblem>) -> Self {
        SourceError::File {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// The file's problem, when this is a [`SourceError::File`].
    pub fn file_problem(&self) -> Option<&FileProblem> {
        match self {
            SourceError::File { problem, .. } => Some(problem),
            _ => None,
        }
    }
}

/// The rest of a [`SourceError::EmptyShare`] message.
fn empty_share(rank: u64, world_size: u64, windows: u64, even_ranks: bool) -> String {
    let fix = "use fewer ranks, shorter windows or more data";
    if even_ranks {
        format!(
            "every rank's share of the epoch is empty: the epoch has {windows} window(s) for \
             {world_size} ranks, and even_ranks drops them all to keep the ranks equal; {fix}"
        )
    } else {
        format!(
            "rank {rank}'s share of the epoch is empty: the epoch has {windows} window(s) for \
             {world_size} ranks, so ranks {windows} to {} get none; {fix}",
            world_size - 1
        )
    }
}

/// The message of [`SourceError::TooFewForBatches`].
fn too_few_for_batches(windows: u64, world_size: u64, batch_size: u64, drop_last: bool) -> String {
    if drop_last {
        format!(
            "an epoch has {windows} window(s), fewer than one full batch for each of \
            {world_size} rank(s) (world_size × batch_size = {world_size} × {batch_size}): use \
            fewer ranks, smaller batches, shorter windows, more data, or drop_last(false)"
        )
    } else {
        format!(
            "an epoch has {windows} window(s), fewer than one for each of {world_size} ranks: \
            use fewer ranks, shorter windows or more data"
        )
    }
}

/// The message of [`SourceError::UnequalRanks`].
fn unequal_ranks(positions: &[(u64, u64)]) -> String {
    let each: Vec<String> = positions
        .iter()
        .enumerate()
        .map(|(r, (e, c))| format!("rank {r} at epoch {e} consumed {c}"))
        .collect();
    format!(
        "the ranks' checkpoints differ ({}): every rank must have popped the same number of \
        samples when it saves (data-parallel training keeps the ranks in step), so that \
        one global position describes them all",
        each.join(", ")
    )
}

/// The format a [`FileProblem::BadVersion`]'s expected version belongs to.
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
    if count == 0 || data % count != 0 {
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

/// The token-width hint of a [`FileProblem::TrailingBytes`] message, or nothing.
fn width_hint_trailing(count: u64, extra: u64, token_bytes: u64) -> String {
    count
        .checked_mul(token_bytes)
        .and_then(|d| d.checked_add(extra))
        .and_then(|data| other_width(count, data, token_bytes))
        .map_or_else(String::new, |w| width_hint(w, token_bytes))
}

/// The token-width hint of a [`FileProblem::TokensBeyondFile`] message, or nothing.
fn width_hint_short(count: u64, needed: u64, len: u64) -> String {
    let header = crate::source::SHARD_HEADER_BYTES as u64;
    let (Some(tokens), Some(data)) = (needed.checked_sub(header), len.checked_sub(header)) else {
        return String::new();
    };
    if count == 0 || tokens % count != 0 || data == 0 {
        return String::new();
    }
    other_width(count, data, tokens / count)
        .map_or_else(String::new, |w| width_hint(w, tokens / count))
}
