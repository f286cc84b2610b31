//! [`DocumentIndex`]: where a token file's documents start, as its format's own index
//! says (Megatron's `.idx`, datatrove's `.ds.index`), read when a source of documents asks
//! for it; and [`starts_of_ends`], the one rule every such index's document ends become
//! document starts by.

use std::fmt;

use crate::error::source::SourceError;
use crate::source::files::source_file::SourceFile;

/// A token file's own index of its documents, beside it on disk. A format whose files
/// have one opens it with the token file ([`TokenShard::with_index`](super::TokenShard));
/// [`Documents`](crate::source::Documents) built without a `bos` take their boundaries
/// from it instead of scanning for a `bos` token.
pub(crate) trait DocumentIndex: fmt::Debug + Send + Sync {
    /// The index file, as opened with the token file (its content joins the token file's
    /// fingerprint, so that a checkpoint saved over another index is refused).
    fn file(&self) -> &SourceFile;

    /// The token positions where the file's documents start: strictly increasing, the
    /// first 0, each below the file's token count (a document of no tokens has no start).
    /// Reads the index and checks it against its format's description; anything wrong is
    /// a [`SourceError::File`] naming the index file, a read that fails or finds the file
    /// changed the [`SourceError::Read`].
    fn starts(&self) -> Result<Vec<u32>, SourceError>;
}

/// What is wrong with an index's document ends: the first end that is smaller than the
/// one before it (its number and value, and the one before), or a last end that is not the
/// file's token count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EndsProblem {
    /// End `document` is `end`, below the previous end `previous`.
    Decreasing { document: u64, end: u64, previous: u64 },
    /// The last end (`last`; 0 for no documents) is not the file's `tokens`.
    LastNotTokens { last: u64, tokens: u64 },
}

/// The document starts of a file of `tokens` tokens whose documents end (exclusive, in
/// tokens, non-decreasing) at `ends`, the last at `tokens`: `0` and every end but the last,
/// documents of no tokens dropped. Positions are `u32`: the caller checked that `tokens`
/// fits one.
pub(crate) fn starts_of_ends(
    ends: impl IntoIterator<Item = u64>,
    tokens: u64,
) -> Result<Vec<u32>, EndsProblem> {
    let mut starts = Vec::new();
    let mut previous = 0u64;
    for (document, end) in ends.into_iter().enumerate() {
        if end < previous {
            let document = document as u64;
            return Err(EndsProblem::Decreasing { document, end, previous });
        }
        if end > previous {
            // A document of at least one token starts where the one before ended.
            if end > tokens {
                return Err(EndsProblem::LastNotTokens { last: end, tokens });
            }
            starts.push(previous as u32);
        }
        previous = end;
    }
    if previous != tokens {
        return Err(EndsProblem::LastNotTokens { last: previous, tokens });
    }
    Ok(starts)
}

#[cfg(test)]
mod tests {
    use super::{starts_of_ends, EndsProblem};

    #[test]
    fn ends_become_starts_and_empty_documents_drop() {
        assert_eq!(starts_of_ends([3, 3, 7, 10], 10).unwrap(), [0, 3, 7]);
        assert_eq!(starts_of_ends([0, 10], 10).unwrap(), [0]);
        assert_eq!(
            starts_of_ends([3, 2, 10], 10).unwrap_err(),
            EndsProblem::Decreasing { document: 1, end: 2, previous: 3 }
        );
        assert_eq!(
            starts_of_ends([3, 9], 10).unwrap_err(),
            EndsProblem::LastNotTokens { last: 9, tokens: 10 }
        );
        assert_eq!(
            starts_of_ends([3, 11], 10).unwrap_err(),
            EndsProblem::LastNotTokens { last: 11, tokens: 10 }
        );
        assert_eq!(
            starts_of_ends([], 10).unwrap_err(),
            EndsProblem::LastNotTokens { last: 0, tokens: 10 }
        );
    }
}
