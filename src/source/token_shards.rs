//! Token shards: the `.bin` format of llm.c and the modded-nanogpt speedrun, memory-mapped.
//!
//! A shard is a header of 256 little-endian `i32` — a magic number, a version, the token
//! count, then zeros — followed by exactly that many little-endian tokens. llm.c has two
//! formats, told apart by the header ([`ShardFormat`]):
//!
//! | format | magic | version | tokens | llm.c's name |
//! | --- | --- | --- | --- | --- |
//! | [`ShardFormat::U16`] | [`SHARD_MAGIC`] (20240520) | [`SHARD_VERSION`] (1) | `u16` | GPT-2 |
//! | [`ShardFormat::U32`] | [`SHARD_MAGIC_U32`] (20240801) | [`SHARD_VERSION_U32`] (7) | `u32` | LLaMA-3 |
//!
//! Both read the same way; [`TokenShard::format`] says which a file is. To write them:
//! [`write_shard`] / [`ShardWriter::create`] for `u16` tokens, [`write_shard_u32`] /
//! [`ShardWriter::create_u32`] for `u32` tokens (or [`ShardWriter::create_as`], generic
//! over the token type).

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use super::checkpoint::Fingerprint;
use super::decoders::TokenType;
use super::sampler::Sampler;
use super::sampler_builder::SamplerBuilder;
use super::segmented::{Identified, Segmented, WindowSpec};
#[cfg(doc)]
use super::shard_writer::{write_shard, write_shard_u32, ShardWriter};
use crate::error::source::{FileProblem, SourceError};
use crate::error::Result;

/// The first header word of a shard of `u16` tokens (llm.c's GPT-2 format).
pub const SHARD_MAGIC: i32 = 20240520;
/// The header version of a shard of `u16` tokens.
pub const SHARD_VERSION: i32 = 1;
/// The first header word of a shard of `u32` tokens (llm.c's LLaMA-3 format).
pub const SHARD_MAGIC_U32: i32 = 20240801;
/// The header version of a shard of `u32` tokens.
pub const SHARD_VERSION_U32: i32 = 7;
/// Bytes of a shard's header (256 `i32`), in both formats.
pub const SHARD_HEADER_BYTES: usize = 256 * 4;

/// Which of llm.c's two shard formats a file is: the header's magic and version, and the
/// width of its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShardFormat {
    /// `u16` tokens: magic [`SHARD_MAGIC`], version [`SHARD_VERSION`] (llm.c's GPT-2
    /// shards, and modded-nanogpt's).
    U16,
    /// `u32` tokens: magic [`SHARD_MAGIC_U32`], version [`SHARD_VERSION_U32`] (llm.c's
    /// LLaMA-3 shards).
    U32,
}

impl ShardFormat {
    /// The format whose magic number is `magic`, if any.
    pub const fn from_magic(magic: i32) -> Option<Self> {
        match magic {
            SHARD_MAGIC => Some(ShardFormat::U16),
            SHARD_MAGIC_U32 => Some(ShardFormat::U32),
            _ => None,
        }
    }

    /// The header's first word.
    pub const fn magic(self) -> i32 {
        match self {
            ShardFormat::U16 => SHARD_MAGIC,
            ShardFormat::U32 => SHARD_MAGIC_U32,
        }
    }

    /// The header's second word.
    pub const fn version(self) -> i32 {
        match self {
            ShardFormat::U16 => SHARD_VERSION,
            ShardFormat::U32 => SHARD_VERSION_U32,
        }
    }

    /// Bytes per token: 2 or 4.
    pub const fn token_bytes(self) -> usize {
        match self {
            ShardFormat::U16 => 2,
            ShardFormat::U32 => 4,
        }
    }

    /// The token type's name, as in Rust: `u16` or `u32`.
    pub const fn name(self) -> &'static str {
        match self {
            ShardFormat::U16 => "u16",
            ShardFormat::U32 => "u32",
        }
    }

    /// The name with llm.c's: `u16 (llm.c GPT-2)` or `u32 (llm.c LLaMA-3)`.
    pub const fn describe(self) -> &'static str {
        match self {
            ShardFormat::U16 => "u16 (llm.c GPT-2)",
            ShardFormat::U32 => "u32 (llm.c LLaMA-3)",
        }
    }
}

impl fmt::Display for ShardFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Reads token `i` of little-endian tokens `bytes` of `width` (2 or 4) bytes each.
pub(crate) fn read_token(bytes: &[u8], width: usize, i: usize) -> Option<u32> {
    let at = i.checked_mul(width)?;
    let b = bytes.get(at..at.checked_add(width)?)?;
    Some(match *b {
        [b0, b1] => u32::from(u16::from_le_bytes([b0, b1])),
        [b0, b1, b2, b3] => u32::from_le_bytes([b0, b1, b2, b3]),
        _ => return None,
    })
}

/// One memory-mapped token shard of either format, checked when opened.
///
/// The file is mapped read-only and never written through the map. Like every mmap-based
/// reader, it relies on no other process truncating or rewriting the file while it is
/// open: a shrunk file makes reads of the lost pages fault.
pub struct TokenShard {
    path: PathBuf,
    map: Mmap,
    format: ShardFormat,
    tokens: usize,
}

impl fmt::Debug for TokenShard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenShard")
            .field("path", &self.path)
            .field("format", &self.format)
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl TokenShard {
    /// Opens, checks and maps the shard at `path`, of either [`ShardFormat`].
    ///
    /// Every malformed file is a [`SourceError::File`] naming it, with the
    /// [`FileProblem`]: [`IsDirectory`](FileProblem::IsDirectory),
    /// [`NotAFile`](FileProblem::NotAFile), [`Empty`](FileProblem::Empty),
    /// [`TruncatedHeader`](FileProblem::TruncatedHeader),
    /// [`BadMagic`](FileProblem::BadMagic) (neither format's),
    /// [`BadVersion`](FileProblem::BadVersion) (not the version that goes with the
    /// magic), [`BadTokenCount`](FileProblem::BadTokenCount) (0 or negative),
    /// [`TokensBeyondFile`](FileProblem::TokensBeyondFile) or
    /// [`TrailingBytes`](FileProblem::TrailingBytes) (llm.c demands the exact size too;
    /// both say so when the file's size fits the counted tokens at another width).
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let fail = |problem: FileProblem| SourceError::file(path, problem);
        let (file, len) = super::fs::open_regular(path).map_err(fail)?;
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
        let Some(format) = ShardFormat::from_magic(magic) else {
            return Err(fail(FileProblem::BadMagic {
                found: magic,
                expected: SHARD_MAGIC,
            })
            .into());
        };
        if version != format.version() {
            return Err(fail(FileProblem::BadVersion {
                found: version,
                expected: format.version(),
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
        let width = format.token_bytes() as u64;
        // At most 1024 + 4 × (2^31 - 1): no overflow.
        let needed = SHARD_HEADER_BYTES as u64 + width * count;
        if needed > len {
            return Err(fail(FileProblem::TokensBeyondFile { count, needed, len }).into());
        }
        if len > needed {
            return Err(fail(FileProblem::TrailingBytes {
                count,
                extra: len - needed,
                token_bytes: width,
            })
            .into());
        }
        Ok(TokenShard {
            path: path.to_owned(),
            map,
            format,
            tokens: count as usize,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's format: the width of its tokens.
    pub fn format(&self) -> ShardFormat {
        self.format
    }

    /// Tokens in the shard (at least 1).
    pub fn len(&self) -> usize {
        self.tokens
    }

    /// Always `false`: a shard with no tokens does not open.
    pub fn is_empty(&self) -> bool {
        self.tokens == 0
    }

    /// Every token, as the file's little-endian bytes:
    /// [`format().token_bytes()`](ShardFormat::token_bytes) per token.
    pub fn token_bytes(&self) -> &[u8] {
        self.map.get(SHARD_HEADER_BYTES..).unwrap_or(&[])
    }

    /// Token `i` (a `u16` shard's widened to `u32`), or `None` past the end.
    pub fn token(&self, i: usize) -> Option<u32> {
        read_token(self.token_bytes(), self.format.token_bytes(), i)
    }
}

/// A window of tokens in a shard: the sample descriptor the sampler yields for
/// [`TokenShards`]. Cheap to make and move: a shared handle on the mapped shard and two
/// numbers, [`start`](Self::start) and [`len`](Self::len), counted in tokens (as
/// [`RecordWindow`](super::RecordWindow)'s are in records), and its stable
/// [`id`](Self::id) and the [`epoch`](Self::epoch) it was drawn for. The
/// [`decoders`](super::Tokens) copy its tokens into the batch.
#[derive(Clone)]
pub struct TokenWindow {
    shard: Arc<TokenShard>,
    start: usize,
    len: usize,
    id: u64,
    epoch: u64,
}

impl fmt::Debug for TokenWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenWindow")
            .field("shard", &self.shard.path)
            .field("start", &self.start)
            .field("len", &self.len)
            .field("id", &self.id)
            .field("epoch", &self.epoch)
            .finish()
    }
}

impl TokenWindow {
    /// The `len` tokens from `start` of `shard`, or `None` if they do not all lie in it.
    /// Its id and epoch are 0 until set with [`with_id`](Self::with_id) and
    /// [`with_epoch`](Self::with_epoch) (the sampler sets both).
    pub fn new(shard: Arc<TokenShard>, start: usize, len: usize) -> Option<Self> {
        (start.checked_add(len)? <= shard.len()).then_some(TokenWindow {
            shard,
            start,
            len,
            id: 0,
            epoch: 0,
        })
    }

    /// The window with id `id`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pinring::source::{write_shard, TokenShard, TokenWindow};
    /// # let path = std::env::temp_dir().join(format!("pinring-withid-doc-{}.bin", std::process::id()));
    /// write_shard(&path, &[1, 2, 3, 4])?;
    /// let w = TokenWindow::new(Arc::new(TokenShard::open(&path)?), 1, 2).unwrap();
    /// assert_eq!((w.id(), w.epoch()), (0, 0));
    /// let w = w.with_id(7).with_epoch(2);
    /// assert_eq!((w.id(), w.epoch(), w.to_vec()), (7, 2, vec![2, 3]));
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn with_id(mut self, id: u64) -> Self {
        self.id = id;
        self
    }

    /// The window with epoch `epoch`.
    pub fn with_epoch(mut self, epoch: u64) -> Self {
        self.epoch = epoch;
        self
    }

    /// The window's stable id: its index in the dataset's fixed enumeration, the same
    /// whatever the seed, epoch, rank and world size. For the grid orders
    /// ([`Order::Sequential`](super::Order::Sequential),
    /// [`Order::Shuffled`](super::Order::Shuffled)) it is the grid index: window `g` of
    /// the shards' grids in shard order. For [`Order::Random`](super::Order::Random) it
    /// numbers window *starts*: the index of its start among every possible start of
    /// every shard, in shard order (see [`WindowSpec::id`];
    /// [`Sampler::by_id`](super::Sampler::by_id) maps an id back to its window).
    ///
    /// ```
    /// use pinring::source::{write_shard, Order, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-id-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 41])?; // windows of 11 at stride 10: 4
    /// write_shard(dir.join("b.bin"), &[0; 21])?; // 2 more: ids 4 and 5
    /// let shards = TokenShards::glob(dir.join("*.bin"))?;
    /// let sampler = shards.clone().windows(11).order(Order::Shuffled { seed: 9 }).build()?;
    /// let mut ids: Vec<u64> = sampler.epoch(5).map(|w| w.id()).collect();
    /// ids.sort();
    /// assert_eq!(ids, [0, 1, 2, 3, 4, 5]);
    /// let w = sampler.by_id(4).unwrap();
    /// assert_eq!((w.shard().path().ends_with("b.bin"), w.start()), (true, 0));
    /// // Random order: 31 + 11 possible starts; id 35 is b.bin's start 4.
    /// let random = shards.windows(11).order(Order::Random { seed: 9 }).build()?;
    /// assert_eq!(random.id_count(), 42);
    /// assert_eq!(random.by_id(35).unwrap().start(), 4);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The epoch the sampler drew the window for.
    pub fn epoch(&self) -> u64 {
        self.epoch
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

    /// The shard's format: the width of the tokens [`bytes`](Self::bytes) holds.
    pub fn format(&self) -> ShardFormat {
        self.shard.format
    }

    /// The window's tokens as the file's little-endian bytes
    /// ([`format().token_bytes()`](ShardFormat::token_bytes) per token), straight from
    /// the map.
    pub fn bytes(&self) -> &[u8] {
        let width = self.shard.format.token_bytes();
        self.shard
            .token_bytes()
            .get(self.start * width..(self.start + self.len) * width)
            .unwrap_or(&[])
    }

    /// The window's tokens, as `u32` whichever the shard's width.
    pub fn tokens(&self) -> impl ExactSizeIterator<Item = u32> + '_ {
        let width = self.shard.format.token_bytes();
        self.bytes()
            .chunks_exact(width)
            .map(move |b| read_token(b, width, 0).unwrap_or(0))
    }

    /// The window's tokens, copied out as `u32`.
    pub fn to_vec(&self) -> Vec<u32> {
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
/// let epoch: Vec<Vec<u32>> = sampler.epoch(0).map(|w| w.to_vec()).collect();
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

    /// The widest format among the shards ([`ShardFormat::U32`] if any shard holds
    /// `u32` tokens). Shards of both formats may be mixed; a window never crosses a
    /// shard.
    pub fn format(&self) -> ShardFormat {
        self.shards
            .iter()
            .map(|s| s.format())
            .max()
            .unwrap_or(ShardFormat::U16)
    }

    /// Checks up front that decoders writing tokens as `ty` can hold every shard's
    /// tokens: [`TokenType::U16`] cannot hold a `u32` shard's, which is
    /// [`SourceError::TokenTypeTooNarrow`] naming the first such shard. (Without the
    /// check, each window of such a shard is a [`DecodeError`](crate::DecodeError).)
    ///
    /// [`TokenType::I32`] passes: llm.c's vocabularies are far below `i32::MAX`, and a
    /// `u32` token above it is found while decoding, as a `DecodeError` naming the token
    /// (it is never wrapped into a negative id).
    pub fn check_token_type(&self, ty: TokenType) -> Result<()> {
        match self.shards.iter().find(|s| !ty.holds(s.format())) {
            Some(s) => Err(SourceError::TokenTypeTooNarrow {
                path: s.path().to_owned(),
                format: s.format(),
                ty,
            }
            .into()),
            None => Ok(()),
        }
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

impl Identified for TokenWindow {
    fn id(&self) -> u64 {
        self.id
    }

    fn epoch(&self) -> u64 {
        self.epoch
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

    fn window(&self, spec: WindowSpec) -> TokenWindow {
        // The sampler asks only for windows inside the segment; should a caller ask
        // otherwise, the window is clamped into the shard rather than panicking.
        let shard = self.shards[spec.segment.min(self.shards.len() - 1)].clone();
        let n = shard.len();
        let len = usize::try_from(spec.len).unwrap_or(n).min(n);
        let start = usize::try_from(spec.start).unwrap_or(n).min(n - len);
        TokenWindow {
            shard,
            start,
            len,
            id: spec.id,
            epoch: spec.epoch,
        }
    }

    /// Format `"u16"` or `"u32"` (`"u16+u32"` when the shards mix both), each shard's
    /// file name and its size in bytes (header and tokens).
    fn fingerprint(&self) -> Fingerprint {
        let has = |f| self.shards.iter().any(|s| s.format() == f);
        let format = match (has(ShardFormat::U16), has(ShardFormat::U32)) {
            (true, true) => "u16+u32",
            (false, true) => "u32",
            _ => "u16",
        };
        let mut print = Fingerprint::new(format, 0);
        for s in &self.shards {
            print.push_file(s.path(), s.map.len() as u64);
        }
        print
    }
}
