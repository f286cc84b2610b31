//! [`RawTokens`]: the raw headerless token format, and how a file of it is checked and
//! opened.

use std::path::Path;

use super::problem::RawProblem;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::files::source_file::SourceFile;
use crate::source::sampling::file_set::open_set_file;
use crate::source::tokens::{
    ShardFormat, TokenFileFormat, TokenLayout, TokenShard, SHARD_HEADER_BYTES,
};

/// numpy's `.npy` magic, which a raw token file does not start with.
const NPY_MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Raw headerless token files of one token type: the tokens, little-endian, and nothing
/// else (numpy's `arr.astype(np.uint16).tofile(path)`). A [`TokenFileFormat`]: open the
/// files with [`TokenShards::open_as`](crate::source::TokenShards::open_as) (or
/// [`glob_as`](crate::source::TokenShards::glob_as)), and their windows,
/// [`Documents`](crate::source::Documents) and mixtures read them as they read llm.c
/// shards. A checkpoint names their format `"raw-u16"` or `"raw-u32"`.
///
/// A file opens if its size is a whole number of tokens of the type said (else
/// [`RawProblem::PartialToken`]); one that starts with an llm.c shard's or a `.npy`
/// array's header is refused ([`RawProblem::LlmcHeader`], [`RawProblem::NpyHeader`]):
/// its header would be read as tokens.
///
/// ```
/// use pinring::source::{Documents, RawTokens, TokenShards};
/// use pinring::{Fence, Loader};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-raw-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// // llama2.c's layout: u16 tokens, each document starting with bos (1).
/// let tokens: Vec<u16> = (0..400).map(|i| if i % 50 == 0 { 1 } else { 100 + i }).collect();
/// let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
/// std::fs::write(dir.join("data00.bin"), &bytes).unwrap();
///
/// let shards = TokenShards::glob_as(dir.join("data*.bin"), RawTokens::U16)?;
/// let documents = Documents::builder(shards).bos(1).tokens_per_batch(63).max_seq_len(64).build()?;
/// let mut loader = Loader::builder(documents).build()?;
/// let batch = loader.pop()?.expect("a step");
/// let cu: Vec<i32> = batch.field_bytes("cu_seqlens").unwrap()
///     .chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
/// assert_eq!(cu[..3], [0, 50, 63]); // documents start at the bos tokens, 50 apart
/// batch.release(Fence::Sync).expect("a Sync fence always captures");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RawTokens {
    /// Little-endian `u16` tokens (llama2.c's and candle's pretokenized `.bin`, nanoGPT's
    /// `train.bin`).
    U16,
    /// Little-endian `u32` tokens (OLMo-core's and MaxText's token arrays).
    U32,
}

impl RawTokens {
    /// The tokens' width.
    pub const fn width(self) -> ShardFormat {
        match self {
            RawTokens::U16 => ShardFormat::U16,
            RawTokens::U32 => ShardFormat::U32,
        }
    }

    /// The format as a checkpoint names it: `"raw-u16"` or `"raw-u32"`.
    pub const fn name(self) -> &'static str {
        match self {
            RawTokens::U16 => "raw-u16",
            RawTokens::U32 => "raw-u32",
        }
    }
}

impl TokenFileFormat for RawTokens {
    /// Opens the file at `path` as raw tokens of this type. Besides a file that does not
    /// open ([`FileProblem`](crate::source::FileProblem): a directory, an empty file, ...),
    /// a [`SourceError::File`] naming it with a [`RawProblem`] is: a size that is not a
    /// whole number of tokens, or an llm.c or `.npy` header at its start.
    fn open(&self, path: &Path) -> Result<TokenShard> {
        let file = open_set_file(path)?;
        let len = file.len();
        let format = self.width();
        let width = format.token_bytes() as u64;
        if len % width != 0 {
            return Err(SourceError::file(path, RawProblem::PartialToken { len, format }).into());
        }
        if let Some(problem) = header_at_start(&file)? {
            return Err(SourceError::file(path, problem).into());
        }
        let layout = TokenLayout {
            name: self.name(),
            format,
            offset: 0,
            tokens: (len / width) as usize,
        };
        TokenShard::with_layout(file, layout)
    }
}

/// The header another format's file starts with, if `file` starts with one whole: an
/// llm.c shard's (its magic, the version that goes with it, and a token count that fits the
/// file's size exactly) or a `.npy` array's (its magic and a major version 1 to 3).
fn header_at_start(file: &SourceFile) -> Result<Option<RawProblem>, SourceError> {
    let len = file.len();
    let mut head = [0u8; 12];
    let n = head.len().min(len as usize);
    file.read_exact_at(0, &mut head[..n])?;
    if n >= 7 && head[..6] == NPY_MAGIC[..] && (1..=3).contains(&head[6]) {
        return Ok(Some(RawProblem::NpyHeader { major: head[6] }));
    }
    if len < SHARD_HEADER_BYTES as u64 {
        return Ok(None);
    }
    let word = |i: usize| i32::from_le_bytes([head[i], head[i + 1], head[i + 2], head[i + 3]]);
    let Some(format) = ShardFormat::from_magic(word(0)) else {
        return Ok(None);
    };
    let count = word(8);
    let fits = count > 0
        && word(4) == format.version()
        && SHARD_HEADER_BYTES as u64 + count as u64 * format.token_bytes() as u64 == len;
    Ok(fits.then_some(RawProblem::LlmcHeader {
        format,
        tokens: count as u64,
    }))
}
