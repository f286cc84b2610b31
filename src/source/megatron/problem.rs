//! [`MegatronProblem`]: what is wrong with a `.bin`/`.idx` pair as Megatron-LM's indexed
//! dataset.

use crate::error::source::FileProblem;
use crate::source::tokens::ShardFormat;

/// What is wrong with a `.bin`/`.idx` pair as Megatron-LM's indexed dataset (the
/// description is [`Megatron`](crate::source::Megatron)'s). It rides in a
/// [`SourceError::File`](crate::source::SourceError::File) naming the file (the `.idx`, or
/// the `.bin` for [`BinSize`](Self::BinSize)), as [`FileProblem::Format`];
/// [`FileProblem::format_problem`] gives it back:
///
/// ```
/// use pinring::source::{Megatron, MegatronProblem, SourceError, TokenShards};
/// use pinring::Error;
/// # let dir = std::env::temp_dir().join(format!("pinring-megatron-problem-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// std::fs::write(dir.join("a.bin"), [1u8, 0, 2, 0]).unwrap();
/// std::fs::write(dir.join("a.idx"), b"TNTIDX\x00\x00\x00 and the rest of an older format").unwrap();
/// let err = TokenShards::open_as([dir.join("a.bin")], Megatron).unwrap_err();
/// let Error::Source(SourceError::File { problem, path }) = &err else { panic!("{err}") };
/// assert!(path.ends_with("a.idx"));
/// assert!(matches!(problem.format_problem::<MegatronProblem>(), Some(MegatronProblem::BadMagic { .. })));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MegatronProblem {
    /// The `.idx` is shorter than its 34-byte header.
    #[error("a Megatron .idx is at least 34 bytes (its header), this one is {len}")]
    TruncatedHeader {
        /// The `.idx`'s length in bytes.
        len: u64,
    },
    /// The `.idx` does not start with `MMIDIDX\x00\x00`.
    #[error("does not start with Megatron's index magic b\"MMIDIDX\\x00\\x00\" (found {})", shown(found))]
    BadMagic {
        /// The first 9 bytes.
        found: Vec<u8>,
    },
    /// The version is not 1, the one Megatron writes.
    #[error("index version {found}: Megatron's MMIDIDX index is version 1")]
    BadVersion {
        /// The version found.
        found: u64,
    },
    /// The dtype code is none of Megatron's (1 to 8).
    #[error("dtype code {code} is not one of Megatron's (1 to 8)")]
    UnknownDtype {
        /// The code found.
        code: u8,
    },
    /// The dtype is a float: not tokens.
    #[error("dtype code {code} is {name}: not tokens (token datasets are uint16 or int32)")]
    NotIntegerTokens {
        /// The code found.
        code: u8,
        /// The dtype's name.
        name: &'static str,
    },
    /// The dtype is an integer Megatron does not write tokens as (it writes `uint16`
    /// below 65,500 ids, `int32` above): only those two are read.
    #[error(
        "dtype code {code} is {name}: tokens are read as uint16 (code 8) or int32 (code 4), \
         the two Megatron writes them as"
    )]
    UnsupportedTokenType {
        /// The code found.
        code: u8,
        /// The dtype's name.
        name: &'static str,
    },
    /// The `.idx`'s size is not what its counts make, with or without a multimodal
    /// dataset's modes.
    #[error(
        "is {len} bytes, but {sequences} sequences and {documents} document indices make \
         {expected} (or {sequences} more with a multimodal dataset's modes)"
    )]
    IndexSize {
        /// The `.idx`'s length.
        len: u64,
        /// What the counts make without modes (`u64::MAX` if they overflow).
        expected: u64,
        /// The sequence count.
        sequences: u64,
        /// The document count.
        documents: u64,
    },
    /// The document count is 0: Megatron's document indices always start with a 0.
    #[error("has no document indices (Megatron's start with 0)")]
    NoDocumentIndices,
    /// A multimodal dataset's sequence is not text (mode 0).
    #[error("sequence {sequence} has mode {mode}, not text (0): its bytes are not tokens")]
    NotText {
        /// The sequence.
        sequence: u64,
        /// Its mode.
        mode: i8,
    },
    /// The `.bin`'s size is not where the `.idx`'s last sequence ends.
    #[error("is {len} bytes, but its .idx's last sequence ends at byte {expected} ({width} tokens)")]
    BinSize {
        /// The `.bin`'s length.
        len: u64,
        /// Where the last sequence ends.
        expected: u64,
        /// The tokens' width.
        width: ShardFormat,
    },
    /// A sequence's byte offset is not the lengths before it (what `_IndexWriter` writes).
    #[error("sequence {sequence}'s byte offset is {found}, but the lengths before it make {expected}")]
    Pointer {
        /// The sequence.
        sequence: u64,
        /// The offset found.
        found: i64,
        /// The lengths before it, in bytes.
        expected: i64,
    },
    /// A sequence's length is negative.
    #[error("sequence {sequence}'s length is {length}")]
    NegativeLength {
        /// The sequence.
        sequence: u64,
        /// The length found.
        length: i32,
    },
    /// A document index is not what Megatron writes: the first is 0, each at least the one
    /// before, the last the sequence count.
    #[error(
        "document index {document} is {index}: Megatron's document indices start at 0 and \
         rise to the sequence count {sequences}"
    )]
    DocumentIndex {
        /// Which document index.
        document: u64,
        /// Its value.
        index: i64,
        /// The sequence count.
        sequences: u64,
    },
}

impl From<MegatronProblem> for FileProblem {
    fn from(problem: MegatronProblem) -> Self {
        FileProblem::Format(Box::new(problem))
    }
}

/// Bytes as Python writes them (`b"..."`).
fn shown(bytes: &[u8]) -> String {
    let escaped: String = bytes.iter().flat_map(|&b| std::ascii::escape_default(b)).map(char::from).collect();
    format!("b\"{escaped}\"")
}
