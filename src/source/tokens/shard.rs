//! [`TokenShard`]: one file of tokens — an llm.c `.bin` shard, or a file of another
//! [`TokenFileFormat`](crate::source::TokenFileFormat) — checked when opened and read by
//! position, and [`TokenLayout`], where a format's opener found its tokens.
//!
//! Both of llm.c's formats ([`ShardFormat`]) read the same way; [`TokenShard::format`] says
//! which a file is. To write them: [`write_shard`](crate::source::write_shard) /
//! [`ShardWriter::create`](crate::source::ShardWriter::create) for `u16` tokens,
//! [`write_shard_u32`](crate::source::write_shard_u32) /
//! [`ShardWriter::create_u32`](crate::source::ShardWriter::create_u32) for `u32` tokens.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use super::document_index::DocumentIndex;
use super::format::{ShardFormat, SHARD_HEADER_BYTES, SHARD_MAGIC};
use super::problem::ShardProblem;
use crate::error::source::{FileProblem, SourceError};
use crate::error::Result;
use crate::source::files::content::content_of;
use crate::source::files::source_file::SourceFile;
use crate::source::sampling::file_set::open_set_file;
use crate::source::sampling::rng::mix64;
use crate::source::sampling::window::SegmentFile;

/// Where a file's tokens lie, as its format's opener found them: what a [`TokenShard`] is
/// made of, whatever the format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TokenLayout {
    /// The format as a checkpoint names it: `"u16"`, `"u32"` (llm.c), `"raw-u16"`, ...
    pub(crate) name: &'static str,
    /// The tokens' width.
    pub(crate) format: ShardFormat,
    /// The byte offset of the first token (the header's size).
    pub(crate) offset: u64,
    /// Tokens in the file (at least 1).
    pub(crate) tokens: usize,
}

/// One file of tokens, checked when opened: an llm.c shard of either width
/// ([`open`](Self::open)), or a file of another
/// [`TokenFileFormat`](crate::source::TokenFileFormat) such as
/// [`RawTokens`](crate::source::RawTokens) (its `open`). Every format's tokens are
/// little-endian `u16` or `u32` ([`format`](Self::format) says which), read alike.
///
/// Its tokens are read by position (`pread`; nothing is mapped, so no read can fault), and
/// the file is checked after the reads: a shard that shrinks, is rewritten or is replaced
/// while a loader reads it is a [`SourceError::Read`] naming it, and so is a read the file
/// system fails ([`ReadProblem::Io`](crate::source::ReadProblem::Io)); never a crash, never
/// a sample of bytes the file did not hold (see [`ReadProblem`](crate::source::ReadProblem)
/// for what is found).
pub struct TokenShard {
    file: SourceFile,
    layout: TokenLayout,
    /// The content fingerprint, sampled when opened (the index file's mixed in, where the
    /// format has one).
    content: u64,
    /// Where its documents start, as its format's own index file says (Megatron's `.idx`,
    /// datatrove's `.ds.index`); `None` for a format without one.
    index: Option<Arc<dyn DocumentIndex>>,
}

impl fmt::Debug for TokenShard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenShard")
            .field("path", &self.file.path())
            .field("format", &self.layout.name)
            .field("tokens", &self.layout.tokens)
            .field("content", &format_args!("{:#018x}", self.content))
            .field("index", &self.index.as_ref().map(|i| i.file().path()))
            .finish()
    }
}

impl TokenShard {
    /// Opens and checks the shard at `path`, of either [`ShardFormat`].
    ///
    /// Every malformed file is a [`SourceError::File`] naming it: with the
    /// [`FileProblem`] [`IsDirectory`](FileProblem::IsDirectory),
    /// [`NotAFile`](FileProblem::NotAFile) or [`Empty`](FileProblem::Empty), or a
    /// [`FileProblem::Format`] holding the [`ShardProblem`]:
    /// [`TruncatedHeader`](ShardProblem::TruncatedHeader),
    /// [`BadMagic`](ShardProblem::BadMagic) (neither format's),
    /// [`BadVersion`](ShardProblem::BadVersion) (not the version that goes with the
    /// magic), [`BadTokenCount`](ShardProblem::BadTokenCount) (0 or negative),
    /// [`TokensBeyondFile`](ShardProblem::TokensBeyondFile) or
    /// [`TrailingBytes`](ShardProblem::TrailingBytes) (llm.c demands the exact size too;
    /// both say so when the file's size fits the counted tokens at another width).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let fail = |problem: FileProblem| SourceError::file(path, problem);
        let file = open_set_file(path)?;
        let len = file.len();
        let header = SHARD_HEADER_BYTES as u64;
        if len < header {
            return Err(fail(ShardProblem::TruncatedHeader {
                len,
                needed: header,
            }
            .into())
            .into());
        }
        let mut words = [0u8; 12];
        file.read_exact_at(0, &mut words)?;
        let word = |i: usize| i32::from_le_bytes([words[i], words[i + 1], words[i + 2], words[i + 3]]);
        let (magic, version, count) = (word(0), word(4), word(8));
        let Some(format) = ShardFormat::from_magic(magic) else {
            return Err(fail(
                ShardProblem::BadMagic {
                    found: magic,
                    expected: SHARD_MAGIC,
                }
                .into(),
            )
            .into());
        };
        if version != format.version() {
            return Err(fail(
                ShardProblem::BadVersion {
                    found: version,
                    expected: format.version(),
                }
                .into(),
            )
            .into());
        }
        if count <= 0 {
            return Err(fail(
                ShardProblem::BadTokenCount {
                    count: i64::from(count),
                }
                .into(),
            )
            .into());
        }
        let count = count as u64;
        let width = format.token_bytes() as u64;
        // At most 1024 + 4 × (2^31 - 1): no overflow.
        let needed = header + width * count;
        if needed > len {
            return Err(fail(ShardProblem::TokensBeyondFile { count, needed, len }.into()).into());
        }
        if len > needed {
            return Err(fail(
                ShardProblem::TrailingBytes {
                    count,
                    extra: len - needed,
                    token_bytes: width,
                }
                .into(),
            )
            .into());
        }
        let layout = TokenLayout {
            name: format.name(),
            format,
            offset: header,
            tokens: count as usize,
        };
        Self::with_layout(file, layout)
    }

    /// The file `file`, whose tokens lie as `layout` says (its format's opener checked
    /// that they do), with its content fingerprint sampled now.
    pub(crate) fn with_layout(file: SourceFile, layout: TokenLayout) -> Result<Self> {
        let content = content_of(&file)?;
        Ok(TokenShard {
            file,
            layout,
            content,
            index: None,
        })
    }

    /// The file `file`, whose tokens lie as `layout` says, with its format's document
    /// index `index` (checked by the opener against the token file as far as its header
    /// goes; [`DocumentIndex::starts`] checks the rest when documents ask for it). The
    /// content fingerprint is the token file's and the index file's together.
    pub(crate) fn with_index(
        file: SourceFile,
        layout: TokenLayout,
        index: Arc<dyn DocumentIndex>,
    ) -> Result<Self> {
        let content = mix64(content_of(&file)? ^ mix64(content_of(index.file())?));
        Ok(TokenShard {
            file,
            layout,
            content,
            index: Some(index),
        })
    }

    /// Whether the file's format keeps an index of its documents beside it (Megatron's
    /// `.idx`, datatrove's `.ds.index`): then [`Documents`](crate::source::Documents) built
    /// without a `bos` take the documents from it.
    pub fn has_document_index(&self) -> bool {
        self.index.is_some()
    }

    /// The path of the file's document index, where its format has one.
    pub fn index_path(&self) -> Option<&Path> {
        self.index.as_ref().map(|i| i.file().path())
    }

    /// Where the file's documents start, as its own index says (read and checked now);
    /// `None` for a format without an index.
    pub(crate) fn document_starts(&self) -> Option<Result<Vec<u32>, SourceError>> {
        self.index.as_ref().map(|i| i.starts())
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// The width of its tokens (for an llm.c shard, which of llm.c's two formats it is).
    pub fn format(&self) -> ShardFormat {
        self.layout.format
    }

    /// Tokens in the shard (at least 1).
    pub fn len(&self) -> usize {
        self.layout.tokens
    }

    /// Always `false`: a shard with no tokens does not open.
    pub fn is_empty(&self) -> bool {
        self.layout.tokens == 0
    }

    /// The file's size in bytes (header, if its format has one, and tokens), as opened.
    pub fn file_bytes(&self) -> u64 {
        self.file.len()
    }

    /// The file's content fingerprint, sampled when it was opened: a hash of its size, its
    /// first KiB (an llm.c shard's header) and 32 eight-byte words spread evenly to its end (what a checkpoint
    /// records as [`Fingerprint::contents`](crate::source::Fingerprint::contents), so that a
    /// state saved on other tokens of the same count is refused).
    ///
    /// ```
    /// use pinring::source::{write_shard, TokenShard};
    /// # let dir = std::env::temp_dir().join(format!("pinring-content-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let tokens: Vec<u16> = (0..5000).collect();
    /// write_shard(dir.join("a.bin"), &tokens)?;
    /// let reversed: Vec<u16> = tokens.iter().rev().copied().collect();
    /// write_shard(dir.join("b.bin"), &reversed)?;
    /// let (a, b) = (TokenShard::open(dir.join("a.bin"))?, TokenShard::open(dir.join("b.bin"))?);
    /// assert_eq!(a.file_bytes(), b.file_bytes());
    /// assert_ne!(a.content(), b.content());
    /// // The same bytes elsewhere: the same content.
    /// std::fs::copy(dir.join("a.bin"), dir.join("c.bin")).unwrap();
    /// assert_eq!(TokenShard::open(dir.join("c.bin"))?.content(), a.content());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn content(&self) -> u64 {
        self.content
    }

    /// The file's modification time when it was opened, where the system gives one (what
    /// an index cached across runs is checked against).
    pub(crate) fn modified(&self) -> Option<std::time::SystemTime> {
        self.file.modified()
    }

    /// Token `i` (a `u16` shard's widened to `u32`), read from the file; `None` past the
    /// end. A file that changed since it was opened is [`SourceError::Read`].
    ///
    /// ```
    /// use pinring::source::{write_shard, TokenShard};
    /// # let path = std::env::temp_dir().join(format!("pinring-token-doc-{}.bin", std::process::id()));
    /// write_shard(&path, &[50256, 1, 2])?;
    /// let shard = TokenShard::open(&path)?;
    /// assert_eq!((shard.token(0)?, shard.token(3)?), (Some(50256), None));
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn token(&self, i: usize) -> Result<Option<u32>, SourceError> {
        if i >= self.layout.tokens {
            return Ok(None);
        }
        let mut bytes = [0u8; 4];
        let width = self.format().token_bytes();
        self.read_tokens(i, &mut bytes[..width])?;
        Ok(Some(u32::from_le_bytes(bytes)))
    }

    /// Reads the little-endian bytes of tokens from `first` on into `out` (a whole number
    /// of tokens, inside the shard: the callers check), then checks that the file did not
    /// change (see [`SourceFile::read_exact_at`]).
    pub(crate) fn read_tokens(&self, first: usize, out: &mut [u8]) -> Result<(), SourceError> {
        self.file.read_exact_at(self.offset_of(first), out)
    }

    /// The little-endian bytes of `count` tokens from `first`, a piece at a time through
    /// this thread's chunk (see [`SourceFile::read_chunked`]): `each(tokens before the
    /// piece, piece)`, each piece a whole number of tokens, then one check of the file.
    pub(crate) fn read_tokens_chunked(
        &self,
        first: usize,
        count: usize,
        mut each: impl FnMut(usize, &[u8]),
    ) -> Result<(), SourceError> {
        let width = self.format().token_bytes();
        self.file
            .read_chunked(self.offset_of(first), count * width, |done, piece| {
                each(done / width, piece)
            })
    }

    /// The little-endian bytes of `count` tokens from `first`, a piece at a time through
    /// `stage` (see [`SourceFile::read_staged`]): `each(tokens before the piece, piece)`,
    /// each piece a whole number of tokens, then one check of the file.
    pub(crate) fn read_tokens_staged(
        &self,
        first: usize,
        count: usize,
        stage: &mut [u8],
        mut each: impl FnMut(usize, &[u8]),
    ) -> Result<(), SourceError> {
        let width = self.format().token_bytes();
        let stage_len = stage.len() - stage.len() % width;
        self.file.read_staged(
            self.offset_of(first),
            count * width,
            &mut stage[..stage_len],
            |done, piece| each(done / width, piece),
        )
    }

    /// The byte offset of token `i` in the file.
    pub(crate) fn offset_of(&self, i: usize) -> u64 {
        self.layout.offset + i as u64 * self.format().token_bytes() as u64
    }
}

impl SegmentFile for TokenShard {
    fn units(&self) -> u64 {
        self.layout.tokens as u64
    }

    fn path(&self) -> &Path {
        self.file.path()
    }

    fn unit_bytes(&self) -> usize {
        self.format().token_bytes()
    }

    fn read_units(&self, first: usize, out: &mut [u8]) -> Result<(), SourceError> {
        self.read_tokens(first, out)
    }

    fn file_bytes(&self) -> u64 {
        self.file.len()
    }

    fn content(&self) -> u64 {
        self.content
    }

    fn unit_name(&self) -> &'static str {
        "tokens"
    }

    /// `"u16"` or `"u32"` for an llm.c shard, the format's own name (`"raw-u32"`, ...)
    /// otherwise; no record size.
    fn fingerprint_format(&self) -> (&'static str, u64) {
        (self.layout.name, 0)
    }
}
