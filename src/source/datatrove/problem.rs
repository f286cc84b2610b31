//! [`DatatroveProblem`]: what is wrong with a `.ds` and its `.ds.index` as datatrove's.

use crate::error::source::FileProblem;

/// What is wrong with a `.ds` and its `.ds.index` as datatrove's tokenized files (the
/// description is [`Datatrove`](crate::source::Datatrove)'s). It rides in a
/// [`SourceError::File`](crate::source::SourceError::File) naming the file (the index, or
/// the `.ds` for [`TokenSize`](Self::TokenSize)), as [`FileProblem::Format`];
/// [`FileProblem::format_problem`] gives it back:
///
/// ```
/// use pinring::source::{Datatrove, DatatroveProblem, SourceError, TokenShards};
/// use pinring::Error;
/// # let dir = std::env::temp_dir().join(format!("pinring-datatrove-problem-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// std::fs::write(dir.join("a.ds"), [0u8; 10]).unwrap(); // 5 u16 tokens
/// std::fs::write(dir.join("a.ds.index"), 3u64.to_le_bytes()).unwrap(); // says 3 tokens
/// let err = TokenShards::open_as([dir.join("a.ds")], Datatrove).unwrap_err();
/// let Error::Source(SourceError::File { problem, .. }) = &err else { panic!("{err}") };
/// assert_eq!(
///     problem.format_problem::<DatatroveProblem>(),
///     Some(&DatatroveProblem::TokenSize { bytes: 10, tokens: 3 })
/// );
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DatatroveProblem {
    /// The index's size is not a whole number of `u64` ends.
    #[error("is {len} bytes: a .ds.index is u64 document ends, a multiple of 8 bytes")]
    PartialEnd {
        /// The index's length.
        len: u64,
    },
    /// The `.ds`'s size is neither 2 nor 4 bytes times the token count its index's last end
    /// says.
    #[error(
        "is {bytes} bytes, but its .ds.index ends the last document at token {tokens}: neither \
         2-byte nor 4-byte tokens (datatrove's token_size) make that size"
    )]
    TokenSize {
        /// The `.ds`'s length.
        bytes: u64,
        /// The index's last end.
        tokens: u64,
    },
    /// An end is below the one before it.
    #[error("document {document} ends at token {end}, before the one before it ({previous})")]
    Decreasing {
        /// The document.
        document: u64,
        /// Its end.
        end: u64,
        /// The end before it.
        previous: u64,
    },
    /// An end is past the token count (which the last end is).
    #[error("a document ends at token {end}, but the .ds holds {tokens} tokens")]
    PastEnd {
        /// The end.
        end: u64,
        /// Tokens in the `.ds`.
        tokens: u64,
    },
}

impl From<DatatroveProblem> for FileProblem {
    fn from(problem: DatatroveProblem) -> Self {
        FileProblem::Format(Box::new(problem))
    }
}
