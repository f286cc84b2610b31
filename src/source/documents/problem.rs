//! [`DocumentProblem`]: what is wrong with a token shard as a source of documents.

use std::path::PathBuf;

use crate::error::source::FileProblem;
use crate::source::tokens::ShardFormat;

/// What is wrong with a token shard as a source of packed documents: it holds no document
/// start, it cannot hold the `bos` token at all, it holds more tokens than an index
/// places, or its index (a cached one, or one made before the shard changed) places a
/// document where none starts.
///
/// It rides in a [`SourceError::File`](crate::source::SourceError::File) that names the
/// shard, as [`FileProblem::Format`]; [`FileProblem::format_problem`] gives it back:
///
/// ```
/// use pinring::source::{write_shard, DocumentProblem, Documents, SourceError, TokenShards};
/// use pinring::Error;
/// # let dir = std::env::temp_dir().join(format!("pinring-docproblem-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// write_shard(dir.join("a.bin"), &[1, 2, 3, 4])?; // no 50256 anywhere
/// let shards = TokenShards::open([dir.join("a.bin")])?;
/// let err = Documents::builder(shards).tokens_per_batch(2).max_seq_len(2).build().unwrap_err();
/// let Error::Source(SourceError::File { problem, .. }) = &err else { panic!("{err}") };
/// assert_eq!(
///     problem.format_problem::<DocumentProblem>(),
///     Some(&DocumentProblem::NoBos { bos: 50256 })
/// );
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DocumentProblem {
    /// The shard holds no `bos` token, so no document: check the `bos` setting against
    /// the tokenizer the shards were made with (50256 is GPT-2's `<|endoftext|>`, 128000
    /// LLaMA-3's `<|begin_of_text|>`).
    #[error(
        "holds no bos token {bos}, so no document starts in it: is bos the token that starts \
         the documents of these shards? (GPT-2's is 50256, LLaMA-3's 128000)"
    )]
    NoBos {
        /// The `bos` token looked for.
        bos: u32,
    },
    /// The `bos` token is past the largest token the shard's format stores (65535 for
    /// `u16` shards), so it can never appear in the shard.
    #[error(
        "holds {format} tokens, which never reach bos {bos} (the largest is {}): is bos the \
         token that starts the documents of these shards? (GPT-2's is 50256, LLaMA-3's 128000)",
        largest(*format)
    )]
    BosOutOfRange {
        /// The `bos` token given.
        bos: u32,
        /// The shard's format.
        format: ShardFormat,
    },
    /// The file holds more tokens than a document index places: an index keeps each
    /// document start as a `u32` (llm.c's shards hold fewer than 2^31 tokens; a raw token
    /// file may hold more). Split the file into files of at most `most` tokens.
    #[error(
        "holds {tokens} tokens, more than the {most} a document index places: split it into \
         files of at most {most} tokens"
    )]
    TooManyTokens {
        /// The file's tokens.
        tokens: u64,
        /// The most a file of documents may hold (`u32::MAX`).
        most: u64,
    },
    /// The shard's index says a document starts at token `at`, but the token there is
    /// `found`, not `bos`: the index does not fit the shard as it is now, so none of its
    /// documents is trusted. Where the index came from the
    /// [`index_cache`](crate::source::DocumentsBuilder::index_cache), `cache` is that
    /// entry, removed from the cache before this was reported: build the source again and
    /// the shard is scanned anew. Otherwise the shard changed since this run indexed it, in
    /// a way its size and modification time do not show.
    #[error("{}", not_a_start(*at, *found, *bos, cache.as_deref()))]
    NotADocumentStart {
        /// The token the index says starts a document.
        at: u64,
        /// The token the shard holds there.
        found: u32,
        /// The `bos` token documents start with.
        bos: u32,
        /// The cache entry the index came from (removed from the cache now), if it came
        /// from one.
        cache: Option<PathBuf>,
    },

    /// Some files of the source keep an index of their documents (Megatron's `.idx`,
    /// datatrove's `.ds.index`) and this one does not: without a `bos` the others' documents
    /// come from their indexes, and this file's cannot. Give `bos` to scan every file for it.
    #[error(
        "keeps no index of its documents, while other files of the source do: give bos to \
         find every file's documents by a scan for it"
    )]
    NoDocumentIndex,
    /// `bos` is `u32::MAX`, what a state records for documents taken from the files' own
    /// indexes ([`FILE_INDEX_BOS`](crate::source::FILE_INDEX_BOS)): no tokenizer's `bos`.
    #[error("bos {bos} is reserved: a state records it for documents taken from the files' own indexes")]
    ReservedBos {
        /// The `bos` given.
        bos: u32,
    },
}

/// The message of [`DocumentProblem::NotADocumentStart`].
fn not_a_start(at: u64, found: u32, bos: u32, cache: Option<&std::path::Path>) -> String {
    let what = format!(
        "its index says a document starts at token {at}, but the token there is {found}, \
         not bos {bos}"
    );
    match cache {
        Some(entry) => format!(
            "{what}: the cached index {} does not fit the shard (stale or corrupt); it was \
             removed from the index cache, so building the source again scans the shard anew",
            entry.display()
        ),
        None => format!(
            "{what}: the shard changed since it was indexed, in a way its size and \
             modification time do not show; a file must not change while a loader reads it"
        ),
    }
}

/// The largest token a shard of `format` stores.
pub(super) const fn largest(format: ShardFormat) -> u64 {
    match format {
        ShardFormat::U16 => u16::MAX as u64,
        ShardFormat::U32 => u32::MAX as u64,
    }
}

impl From<DocumentProblem> for FileProblem {
    fn from(problem: DocumentProblem) -> Self {
        FileProblem::Format(Box::new(problem))
    }
}
