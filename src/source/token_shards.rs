//! Token shards: the `.bin` format of llm.c and the modded-nanogpt speedrun, memory-mapped.
//!
//! A shard is a header of 256 little-endian `i32` — [`SHARD_MAGIC`], [`SHARD_VERSION`],
//! the token count, then zeros — followed by exactly that many little-endian `u16` tokens.

use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use super::error::{FileProblem, SourceError};
use super::sampler::{Sampler, SamplerBuilder, Segmented};
use crate::error::Result;

/// The first header word of a token shard.
pub const SHARD_MAGIC: i32 = 20240520;
/// The header version this crate reads and writes.
pub const SHARD_VERSION: i32 = 1;
/// Bytes of a shard's header (256 `i32`).
pub const SHARD_HEADER_BYTES: usize = 256 * 4;

/// One memory-mapped token shard, checked when opened.
///
/// The file is mapped read-only and never written through the map. Like every mmap-based
/// reader, it relies on no other process truncating or rewriting the file while it is
/// open: a shrunk file makes reads of the lost pages fault.
pub struct TokenShard {
    path: PathBuf,
    map: Mmap,
    tokens: usize,
}

impl fmt::Debug for TokenShard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenShard")
            .field("path", &self.path)
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl TokenShard {
    /// Opens, checks and maps the shard at `path`.
    ///
    /// Every malformed file is a [`SourceError::File`] naming it, with the
    /// [`FileProblem`]: [`Empty`](FileProblem::Empty),
    /// [`TruncatedHeader`](FileProblem::TruncatedHeader),
    /// [`BadMagic`](FileProblem::BadMagic), [`BadVersion`](FileProblem::BadVersion),
    /// [`BadTokenCount`](FileProblem::BadTokenCount) (0 or negative),
    /// [`TokensBeyondFile`](FileProblem::TokensBeyondFile) or
    /// [`TrailingBytes`](FileProblem::TrailingBytes) (llm.c demands the exact size too).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let fail = |problem: FileProblem| SourceError::file(path, problem);
        let file = File::open(path).map_err(|e| fail(e.into()))?;
        let len = file.metadata().map_err(|e| fail(e.into()))?.len();
        if len == 0 {
            return Err(fail(FileProblem::Empty).into());
        }
        if len < SHARD_HEADER_BYTES as u64 {
            return Err(fail(FileProblem::TruncatedHeader {
                len,
                needed: SHARD_HEADER_BYTES as u64,
            })
            .into());
        }
        if usize::try_from(len).is_err() {
            return Err(fail(FileProblem::TooLarge { len }).into());
        }
        // SAFETY: the map is read-only and this crate never writes the file. Its bytes are
        // only read as plain `u8`s, which any contents are valid for; the one hazard left
        // — another process truncating the file while it is mapped — is the documented
        // caveat of `TokenShard` (and of every mmap reader), not something this code does.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| fail(e.into()))?;
        // The length may have changed between `metadata` and `map`: check the map itself.
        let word = |i: usize| {
            map.get(i * 4..i * 4 + 4)
                .and_then(|b| b.try_into().ok())
                .map(i32::from_le_bytes)
        };
        let (Some(magic), Some(version), Some(count)) = (word(0), word(1), word(2)) else {
            return Err(fail(FileProblem::TruncatedHeader {
                len: map.len() as u64,
                needed: SHARD_HEADER_BYTES as u64,
            })
            .into());
        };
        if magic != SHARD_MAGIC {
            return Err(fail(FileProblem::BadMagic {
                found: magic,
                expected: SHARD_MAGIC,
            })
            .into());
        }
        if version != SHARD_VERSION {
            return Err(fail(FileProblem::BadVersion {
                found: version,
                expected: SHARD_VERSION,
            })
            .into());
        }
        if count <= 0 {
            return Err(fail(FileProblem::BadTokenCount {
                count: i64::from(count),
            })
            .into());
        }
        let count = count as u64;
        let len = map.len() as u64;
        let needed = SHARD_HEADER_BYTES as u64 + 2 * count;
        if needed > len {
            return Err(fail(FileProblem::TokensBeyondFile { count, needed, len }).into());
        }
        if len > needed {
            return Err(fail(FileProblem::TrailingBytes {
                count,
                extra: len - needed,
            })
            .into());
        }
        Ok(TokenShard {
            path: path.to_owned(),
            map,
            tokens: count as usize,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tokens in the shard (at least 1).
    pub fn len(&self) -> usize {
        self.tokens
    }

    /// Always `false`: a shard with no tokens does not open.
    pub fn is_empty(&self) -> bool {
        self.tokens == 0
    }

    /// Every token, as the file's little-endian `u16` bytes.
    pub fn token_bytes(&self) -> &[u8] {
        self.map.get(SHARD_HEADER_BYTES..).unwrap_or(&[])
    }

    /// Token `i`, or `None` past the end.
    pub fn token(&self, i: usize) -> Option<u16> {
        let at = i.checked_mul(2)?;
        let b = self.token_bytes().get(at..at.checked_add(2)?)?;
        Some(u16::from_le_bytes([b[0], b[1]]))
    }
}

/// A window of tokens in a shard: the sample descriptor the sampler yields for
/// [`TokenShards`]. Cheap to make and move: a shared handle on the mapped shard and two
/// numbers. The [`decoders`](super::Tokens) copy its tokens into the batch.
#[derive(Clone)]
pub struct TokenWindow {
    shard: Arc<TokenShard>,
    start: usize,
    len: usize,
}

impl fmt::Debug for TokenWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenWindow")
            .field("shard", &self.shard.path)
            .field("start", &self.start)
            .field("len", &self.len)
            .finish()
    }
}

impl TokenWindow {
    /// The `len` tokens from `start` of `shard`, or `None` if they do not all lie in it.
    pub fn new(shard: Arc<TokenShard>, start: usize, len: usize) -> Option<Self> {
        (start.checked_add(len)? <= shard.len()).then_some(TokenWindow { shard, start, len })
    }

    /// The shard the window lies in.
    pub fn shard(&self) -> &Arc<TokenShard> {
        &self.shard
    }

    /// The first token's index in the shard.
    pub fn start(&self) -> usize {
        self.start
    }

    /// Tokens in the window.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the window has no tokens.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The window's tokens as little-endian `u16` bytes, straight from the map.
    pub fn bytes(&self) -> &[u8] {
        self.shard
            .token_bytes()
            .get(self.start * 2..(self.start + self.len) * 2)
            .unwrap_or(&[])
    }

    /// The window's tokens.
    pub fn tokens(&self) -> impl ExactSizeIterator<Item = u16> + '_ {
        self.bytes()
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
    }

    /// The window's tokens, copied out.
    pub fn to_vec(&self) -> Vec<u16> {
        self.tokens().collect()
    }
}

/// One or more token shards, in order: the token source for a [`Sampler`].
///
/// ```
/// use pinring::source::{write_shard, Order, TokenShards};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-shards-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// write_shard(dir.join("train_000.bin"), &[1, 2, 3, 4, 5])?;
/// write_shard(dir.join("train_001.bin"), &[6, 7, 8, 9, 10, 11])?;
/// let shards = TokenShards::glob(dir.join("train_*.bin"))?;
/// assert_eq!(shards.tokens(), 11);
///
/// // Windows of 3 tokens (T = 2), stride 2, within each shard.
/// let sampler = shards.windows(3).build()?;
/// let epoch: Vec<Vec<u16>> = sampler.epoch(0).map(|w| w.to_vec()).collect();
/// assert_eq!(epoch, [vec![1, 2, 3], vec![3, 4, 5], vec![6, 7, 8], vec![8, 9, 10]]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct TokenShards {
    shards: Vec<Arc<TokenShard>>,
}

impl TokenShards {
    /// Opens and checks every file in `paths`, in the order given. The first malformed
    /// file is the error; no files is [`SourceError::NoFiles`].
    pub fn open<P: AsRef<Path>>(paths: impl IntoIterator<Item = P>) -> Result<Self> {
        let shards = paths
            .into_iter()
            .map(|p| TokenShard::open(p).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        Self::from_shards(shards)
    }

    /// Opens every file a pattern names, sorted by name: `*` and `?` in the file name
    /// (`data/fineweb_train_*.bin`). A pattern that matches nothing is
    /// [`SourceError::NoMatch`].
    pub fn glob(pattern: impl AsRef<Path>) -> Result<Self> {
        Self::open(super::glob::expand(pattern.as_ref())?)
    }

    /// Shards already opened.
    pub fn from_shards(shards: impl IntoIterator<Item = Arc<TokenShard>>) -> Result<Self> {
        let shards: Vec<_> = shards.into_iter().collect();
        if shards.is_empty() {
            return Err(SourceError::NoFiles.into());
        }
        Ok(TokenShards { shards })
    }

    /// The shards, in order.
    pub fn shards(&self) -> &[Arc<TokenShard>] {
        &self.shards
    }

    /// Tokens in all shards.
    pub fn tokens(&self) -> u64 {
        self.shards.iter().map(|s| s.len() as u64).sum()
    }

    /// A sampler builder for windows of `tokens` tokens (`T + 1` for next-token
    /// training) at a stride of `tokens - 1`, so consecutive windows share one token and
    /// every token but a shard's first is a target exactly once per epoch.
    pub fn windows(self, tokens: u64) -> SamplerBuilder<Self> {
        Sampler::builder(self)
            .window(tokens)
            .stride(tokens.saturating_sub(1).max(1))
    }
}

impl Segmented for TokenShards {
    type Window = TokenWindow;

    fn segments(&self) -> usize {
        self.shards.len()
    }

    fn units(&self, segment: usize) -> u64 {
        self.shards.get(segment).map_or(0, |s| s.len() as u64)
    }

    fn window(&self, segment: usize, start: u64, len: u64) -> TokenWindow {
        // The sampler asks only for windows inside the segment; should a caller ask
        // otherwise, the window is clamped into the shard rather than panicking.
        let shard = self.shards[segment.min(self.shards.len() - 1)].clone();
        let n = shard.len();
        let len = (len as usize).min(n);
        let start = (start as usize).min(n - len);
        TokenWindow { shard, start, len }
    }
}

/// Writes a token shard incrementally: [`create`](Self::create), [`write`](Self::write)
/// tokens, then [`finish`](Self::finish), which fills in the header's count. A writer
/// dropped unfinished leaves a file whose count is 0, which [`TokenShard::open`] rejects.
#[derive(Debug)]
pub struct ShardWriter {
    path: PathBuf,
    file: BufWriter<File>,
    count: u64,
}

impl ShardWriter {
    /// Creates (or truncates) the file at `path` and writes a provisional header.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_owned();
        let file = File::create(&path).map_err(|e| SourceError::file(&path, e))?;
        let mut writer = ShardWriter {
            path,
            file: BufWriter::with_capacity(1 << 20, file),
            count: 0,
        };
        writer.write_header(0)?;
        Ok(writer)
    }

    fn write_header(&mut self, count: i32) -> Result<()> {
        let mut header = [0u8; SHARD_HEADER_BYTES];
        for (i, word) in [SHARD_MAGIC, SHARD_VERSION, count].into_iter().enumerate() {
            header[i * 4..i * 4 + 4].copy_from_slice(&word.to_le_bytes());
        }
        self.file
            .write_all(&header)
            .map_err(|e| SourceError::file(&self.path, e).into())
    }

    /// Appends `tokens`. More than `i32::MAX` tokens in all is
    /// [`FileProblem::BadTokenCount`].
    pub fn write(&mut self, tokens: &[u16]) -> Result<()> {
        let count = self.count + tokens.len() as u64;
        if count > i32::MAX as u64 {
            return Err(SourceError::file(
                &self.path,
                FileProblem::BadTokenCount {
                    count: count as i64,
                },
            )
            .into());
        }
        let mut buf = [0u8; 8192];
        for chunk in tokens.chunks(buf.len() / 2) {
            for (out, t) in buf.chunks_exact_mut(2).zip(chunk) {
                out.copy_from_slice(&t.to_le_bytes());
            }
            self.file
                .write_all(&buf[..chunk.len() * 2])
                .map_err(|e| SourceError::file(&self.path, e))?;
        }
        self.count = count;
        Ok(())
    }

    /// Tokens written so far.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Writes the header's count and flushes; returns the token count. A shard of no
    /// tokens is [`FileProblem::BadTokenCount`] (the reader would refuse it).
    pub fn finish(mut self) -> Result<u64> {
        if self.count == 0 {
            return Err(
                SourceError::file(&self.path, FileProblem::BadTokenCount { count: 0 }).into(),
            );
        }
        let io = |path: &Path, e| SourceError::file(path, FileProblem::Io(e));
        self.file.flush().map_err(|e| io(&self.path, e))?;
        self.file
            .seek(SeekFrom::Start(0))
            .map_err(|e| io(&self.path, e))?;
        self.write_header(self.count as i32)?;
        self.file.flush().map_err(|e| io(&self.path, e))?;
        Ok(self.count)
    }
}

/// Writes `tokens` as a token shard at `path` (see [`ShardWriter`]).
///
/// ```
/// # let path = std::env::temp_dir().join(format!("pinring-write-doc-{}.bin", std::process::id()));
/// pinring::source::write_shard(&path, &[50256, 1, 2])?;
/// let shard = pinring::source::TokenShard::open(&path)?;
/// assert_eq!((shard.len(), shard.token(0)), (3, Some(50256)));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
pub fn write_shard(path: impl AsRef<Path>, tokens: &[u16]) -> Result<()> {
    let mut writer = ShardWriter::create(path)?;
    writer.write(tokens)?;
    writer.finish().map(drop)
}
