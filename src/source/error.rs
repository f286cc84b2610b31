//! What can go wrong opening a data source or setting up a sampler.

use std::path::PathBuf;

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
    /// No segment of the source is long enough for a single window, so an epoch is empty.
    #[error(
        "no window of {window} units fits: the longest file holds {longest} \
         (or each rank's share of the epoch is empty)"
    )]
    NoWindows {
        /// Units (tokens or records) per window.
        window: u64,
        /// Units in the longest segment.
        longest: u64,
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
    /// The header's magic number is not the format's.
    #[error("wrong magic number {found} (expected {expected}): not a token shard")]
    BadMagic {
        /// The magic found.
        found: i32,
        /// The magic the format has.
        expected: i32,
    },
    /// The header's version is not one this crate reads.
    #[error("unsupported version {found} (expected {expected})")]
    BadVersion {
        /// The version found.
        found: i32,
        /// The version this crate reads.
        expected: i32,
    },
    /// The header's token count is zero or negative (or, when writing, too large).
    #[error("bad token count {count} in the header: it must be in 1..=2147483647")]
    BadTokenCount {
        /// The count found (or asked for).
        count: i64,
    },
    /// The header promises more tokens than the file holds.
    #[error("token count {count} is beyond the file: it needs {needed} bytes, the file has {len}")]
    TokensBeyondFile {
        /// The header's token count.
        count: u64,
        /// Bytes header plus tokens take.
        needed: u64,
        /// The file's length in bytes.
        len: u64,
    },
    /// The file holds bytes past the tokens the header counts.
    #[error("{extra} trailing bytes after the {count} tokens the header counts")]
    TrailingBytes {
        /// The header's token count.
        count: u64,
        /// Bytes past the last token.
        extra: u64,
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
