//! Writing token shards: [`ShardWriter`], [`write_shard`] and [`write_shard_u32`], and the
//! [`ShardToken`] types they write.

use std::fmt;
use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use super::format::{ShardFormat, SHARD_HEADER_BYTES};
use super::problem::ShardProblem;
use crate::error::source::{FileProblem, SourceError};
use crate::error::Result;

mod sealed {
    pub trait Sealed {}
    impl Sealed for u16 {}
    impl Sealed for u32 {}
}

/// A token type a shard stores: `u16` ([`ShardFormat::U16`]) or `u32`
/// ([`ShardFormat::U32`]). Sealed; it picks the format a [`ShardWriter`] writes.
pub trait ShardToken: Copy + fmt::Debug + Send + Sync + 'static + sealed::Sealed {
    /// The shard format that stores this type.
    const FORMAT: ShardFormat;

    /// Writes the token little-endian into `out`, which is exactly
    /// `FORMAT.token_bytes()` long.
    fn write_le(self, out: &mut [u8]);
}

impl ShardToken for u16 {
    const FORMAT: ShardFormat = ShardFormat::U16;

    fn write_le(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
}

impl ShardToken for u32 {
    const FORMAT: ShardFormat = ShardFormat::U32;

    fn write_le(self, out: &mut [u8]) {
        out.copy_from_slice(&self.to_le_bytes());
    }
}

/// Writes a token shard incrementally: create, [`write`](Self::write) tokens, then
/// [`finish`](Self::finish), which fills in the header's count. The token type `T` picks
/// the format: [`create`](ShardWriter::create) makes a `ShardWriter<u16>`
/// ([`ShardFormat::U16`]), [`create_u32`](ShardWriter::create_u32) a `ShardWriter<u32>`
/// ([`ShardFormat::U32`]), and [`create_as`](Self::create_as) either, by type.
///
/// The file is written in place: a writer dropped unfinished leaves a file whose count is
/// 0, which [`TokenShard::open`](crate::source::TokenShard::open) rejects. To never leave a partial file at the final
/// name, write to a temporary name in the same directory and rename it after `finish`
/// (as the `make_shard` example does).
///
/// ```
/// use pinring::source::{ShardFormat, ShardWriter, TokenShard};
///
/// # let path = std::env::temp_dir().join(format!("pinring-writer-doc-{}.bin", std::process::id()));
/// let mut writer = ShardWriter::create_u32(&path)?;
/// writer.write(&[128_000, 1, 2])?;
/// writer.write(&[70_000])?;
/// assert_eq!(writer.finish()?, 4);
/// let shard = TokenShard::open(&path)?;
/// assert_eq!((shard.format(), shard.len(), shard.token(3)?), (ShardFormat::U32, 4, Some(70_000)));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug)]
pub struct ShardWriter<T: ShardToken = u16> {
    path: PathBuf,
    file: BufWriter<File>,
    count: u64,
    token: PhantomData<fn(T)>,
}

impl ShardWriter<u16> {
    /// Creates (or truncates) the file at `path` for a shard of `u16` tokens
    /// ([`ShardFormat::U16`]) and writes a provisional header.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        Self::create_as(path)
    }
}

impl ShardWriter<u32> {
    /// Creates (or truncates) the file at `path` for a shard of `u32` tokens
    /// ([`ShardFormat::U32`], llm.c's LLaMA-3 format) and writes a provisional header.
    pub fn create_u32(path: impl AsRef<Path>) -> Result<Self> {
        Self::create_as(path)
    }
}

impl<T: ShardToken> ShardWriter<T> {
    /// Creates (or truncates) the file at `path` for a shard of `T` tokens
    /// ([`T::FORMAT`](ShardToken::FORMAT)) and writes a provisional header:
    /// `ShardWriter::<u32>::create_as(path)`.
    pub fn create_as(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_owned();
        let file = File::create(&path).map_err(|e| SourceError::file(&path, e))?;
        let mut writer = ShardWriter {
            path,
            file: BufWriter::with_capacity(1 << 20, file),
            count: 0,
            token: PhantomData,
        };
        writer.write_header(0)?;
        Ok(writer)
    }

    /// The format being written.
    pub fn format(&self) -> ShardFormat {
        T::FORMAT
    }

    fn write_header(&mut self, count: i32) -> Result<()> {
        let mut header = [0u8; SHARD_HEADER_BYTES];
        let words = [T::FORMAT.magic(), T::FORMAT.version(), count];
        for (i, word) in words.into_iter().enumerate() {
            header[i * 4..i * 4 + 4].copy_from_slice(&word.to_le_bytes());
        }
        self.file
            .write_all(&header)
            .map_err(|e| SourceError::file(&self.path, e).into())
    }

    /// Appends `tokens`. More than `i32::MAX` tokens in all is
    /// [`ShardProblem::BadTokenCount`], and writes nothing.
    pub fn write(&mut self, tokens: &[T]) -> Result<()> {
        let count = self.count + tokens.len() as u64;
        if count > i32::MAX as u64 {
            return Err(SourceError::file(
                &self.path,
                ShardProblem::BadTokenCount {
                    count: count as i64,
                },
            )
            .into());
        }
        let width = T::FORMAT.token_bytes();
        let mut buf = [0u8; 8192];
        for chunk in tokens.chunks(buf.len() / width) {
            for (out, &t) in buf.chunks_exact_mut(width).zip(chunk) {
                t.write_le(out);
            }
            self.file
                .write_all(&buf[..chunk.len() * width])
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
    /// tokens is [`ShardProblem::BadTokenCount`] (the reader would refuse it).
    pub fn finish(mut self) -> Result<u64> {
        if self.count == 0 {
            return Err(
                SourceError::file(&self.path, ShardProblem::BadTokenCount { count: 0 }).into(),
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

/// Writes `tokens` as a shard of `u16` tokens ([`ShardFormat::U16`]) at `path` (see
/// [`ShardWriter`]).
///
/// ```
/// # let path = std::env::temp_dir().join(format!("pinring-write-doc-{}.bin", std::process::id()));
/// pinring::source::write_shard(&path, &[50256, 1, 2])?;
/// let shard = pinring::source::TokenShard::open(&path)?;
/// assert_eq!((shard.len(), shard.token(0)?), (3, Some(50256)));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
pub fn write_shard(path: impl AsRef<Path>, tokens: &[u16]) -> Result<()> {
    write_tokens(path, tokens)
}

/// Writes `tokens` as a shard of `u32` tokens ([`ShardFormat::U32`], llm.c's LLaMA-3
/// format) at `path` (see [`ShardWriter`]).
///
/// ```
/// use pinring::source::{write_shard_u32, ShardFormat, TokenShard};
/// # let path = std::env::temp_dir().join(format!("pinring-write32-doc-{}.bin", std::process::id()));
/// write_shard_u32(&path, &[128_000, 1, 2])?;
/// let shard = TokenShard::open(&path)?;
/// assert_eq!((shard.format(), shard.token(0)?), (ShardFormat::U32, Some(128_000)));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
pub fn write_shard_u32(path: impl AsRef<Path>, tokens: &[u32]) -> Result<()> {
    write_tokens(path, tokens)
}

fn write_tokens<T: ShardToken>(path: impl AsRef<Path>, tokens: &[T]) -> Result<()> {
    let mut writer = ShardWriter::<T>::create_as(path)?;
    writer.write(tokens)?;
    writer.finish().map(drop)
}
