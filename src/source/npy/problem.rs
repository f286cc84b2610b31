//! [`NpyProblem`]: what is wrong with a file as a `.npy` array of tokens.

use crate::error::source::FileProblem;
use crate::source::tokens::ShardFormat;

/// What is wrong with a file as a `.npy` array of tokens (the description is
/// [`Npy`](crate::source::Npy)'s). It rides in a
/// [`SourceError::File`](crate::source::SourceError::File) naming the file, as
/// [`FileProblem::Format`]; [`FileProblem::format_problem`] gives it back:
///
/// ```
/// use pinring::source::{Npy, NpyProblem, SourceError, TokenShards};
/// use pinring::Error;
/// # let path = std::env::temp_dir().join(format!("pinring-npy-problem-doc-{}.npy", std::process::id()));
/// let header = format!("{:<117}\n", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }");
/// let mut file = b"\x93NUMPY\x01\x00".to_vec();
/// file.extend((header.len() as u16).to_le_bytes());
/// file.extend(header.as_bytes());
/// file.extend([0u8; 8]);
/// std::fs::write(&path, file).unwrap();
/// let err = TokenShards::open_as([&path], Npy).unwrap_err();
/// let Error::Source(SourceError::File { problem, .. }) = &err else { panic!("{err}") };
/// assert_eq!(
///     problem.format_problem::<NpyProblem>(),
///     Some(&NpyProblem::NotIntegerTokens { descr: "<f4".into() })
/// );
/// # std::fs::remove_file(&path).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NpyProblem {
    /// The file does not start with `\x93NUMPY` and two version bytes.
    #[error("does not start with numpy's .npy magic \\x93NUMPY (found {found:?})")]
    BadMagic {
        /// Its first bytes (up to 6).
        found: Vec<u8>,
    },
    /// The format version is not 1.0, 2.0 or 3.0.
    #[error(".npy format version {major}.{minor}: numpy writes 1.0, 2.0 and 3.0")]
    BadVersion {
        /// The major version byte.
        major: u8,
        /// The minor version byte.
        minor: u8,
    },
    /// The file ends inside its header.
    #[error("is {len} bytes, but its header runs to byte {needed}")]
    TruncatedHeader {
        /// The file's length.
        len: u64,
        /// Where the header ends.
        needed: u64,
    },
    /// The header is not the dict numpy writes.
    #[error("its header is not the dict numpy writes ({why})")]
    BadHeader {
        /// What is wrong, with the header.
        why: String,
    },
    /// The dtype is structured (a list of fields): not tokens.
    #[error("holds a structured dtype (a list of fields), not tokens")]
    StructuredDtype,
    /// The dtype is big-endian.
    #[error("dtype {descr:?} is big-endian: save the tokens as little-endian ('<u2', '<u4', '<i4')")]
    BigEndian {
        /// The dtype string.
        descr: String,
    },
    /// The dtype is not an integer type.
    #[error("dtype {descr:?} is not integer tokens (tokens are '<u2', '<u4' or '<i4')")]
    NotIntegerTokens {
        /// The dtype string.
        descr: String,
    },
    /// The dtype is an integer type of another width.
    #[error(
        "dtype {descr:?} is not a token type read here: tokens are uint16 ('<u2'), uint32 \
         ('<u4') or int32 ('<i4'); convert with arr.astype(np.uint32)"
    )]
    UnsupportedTokenType {
        /// The dtype string.
        descr: String,
    },
    /// The array is not 1-D.
    #[error("holds an array of shape {shape:?}: tokens are a 1-D array (shape (n,))")]
    NotOneDimensional {
        /// The shape.
        shape: Vec<u64>,
    },
    /// The array has no elements.
    #[error("holds an empty array")]
    NoTokens,
    /// The bytes after the header are not the shape's tokens.
    #[error("holds {data} bytes after its header, but its shape says {tokens} {width} tokens")]
    DataSize {
        /// Bytes after the header.
        data: u64,
        /// The shape's length.
        tokens: u64,
        /// The tokens' width.
        width: ShardFormat,
    },
}

impl NpyProblem {
    /// The problem with a dtype string this does not read.
    pub(super) fn for_descr(descr: String) -> Self {
        let kind = descr.chars().nth(1);
        if descr.starts_with('>') && matches!(kind, Some('u' | 'i')) {
            NpyProblem::BigEndian { descr }
        } else if matches!(kind, Some('u' | 'i')) {
            NpyProblem::UnsupportedTokenType { descr }
        } else {
            NpyProblem::NotIntegerTokens { descr }
        }
    }
}

impl From<NpyProblem> for FileProblem {
    fn from(problem: NpyProblem) -> Self {
        FileProblem::Format(Box::new(problem))
    }
}
