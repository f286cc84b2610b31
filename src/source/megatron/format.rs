//! [`Megatron`]: Megatron-LM's `.bin`/`.idx` pair as a token format, and where the two
//! files of a path are.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::index::MegatronIndex;
use crate::error::Result;
use crate::source::sampling::file_set::open_set_file;
use crate::source::tokens::{TokenFileFormat, TokenLayout, TokenShard};

/// Megatron-LM's indexed datasets, as `megatron/core/datasets/indexed_dataset.py` writes
/// and reads them: a `.bin` holding every sequence's tokens one after another, and a
/// `.idx` beside it:
///
/// | bytes | what |
/// | --- | --- |
/// | 9 | `b"MMIDIDX\x00\x00"` |
/// | 8 | version, `u64` 1 |
/// | 1 | dtype code: 1 `u8`, 2 `i8`, 3 `i16`, 4 `i32`, 5 `i64`, 6 `f64`, 7 `f32`, 8 `u16` |
/// | 8 | sequence count `S`, `u64` |
/// | 8 | document count `D`, `u64` (the document indices: one more than the documents) |
/// | 4 `S` | each sequence's length in tokens, `i32` |
/// | 8 `S` | each sequence's byte offset in the `.bin`, `i64` |
/// | 8 `D` | the document indices, `i64`: `0`, then the sequence each document ends before |
/// | `S` | a multimodal dataset's mode of each sequence, `i8` (0 text); absent otherwise |
///
/// (all little-endian). Megatron writes tokens as `u16` (code 8) for vocabularies below
/// 65,500 and `i32` (code 4) above; those are the two this reads (an `i32` token's bits
/// read as `u32`: ids are never negative). A path names the pair by its `.bin`, its `.idx`
/// or the prefix Megatron's `--data-path` takes (`corpus_text_document` for
/// `corpus_text_document.bin` and `.idx`); name each pair once (a glob of the `.bin`s,
/// `data/*_text_document.bin`: a pattern that matches both files of a pair opens the pair
/// twice). A checkpoint names the format `"megatron-u16"`
/// or `"megatron-i32"`; the content fingerprint covers both files.
///
/// Opening checks the `.idx` header against that description (magic, version, dtype
/// code, counts), its size against the counts (with or without the modes, which must all be
/// text), and the `.bin`'s size against the last sequence's offset and length; the rest
/// (every offset, the document indices) is checked when [`Documents`](crate::source::Documents)
/// read the documents. Anything wrong is a [`SourceError::File`](crate::source::SourceError::File)
/// naming the file, with a [`MegatronProblem`](crate::source::MegatronProblem).
///
/// ```
/// use pinring::source::{Documents, Megatron, TokenShards};
/// use pinring::{Fence, Loader};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-megatron-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// // Three documents of 5, 3 and 8 u16 tokens, one sequence each, as Megatron writes them.
/// let docs: [&[u16]; 3] = [&[10, 11, 12, 13, 14], &[20, 21, 22], &[30, 31, 32, 33, 34, 35, 36, 37]];
/// let bin: Vec<u8> = docs.concat().iter().flat_map(|t| t.to_le_bytes()).collect();
/// std::fs::write(dir.join("corpus.bin"), bin).unwrap();
/// let mut idx = b"MMIDIDX\x00\x00".to_vec();
/// idx.extend(1u64.to_le_bytes());
/// idx.push(8); // u16
/// idx.extend(3u64.to_le_bytes()); // sequences
/// idx.extend(4u64.to_le_bytes()); // document indices
/// for d in docs { idx.extend((d.len() as i32).to_le_bytes()) }
/// for p in [0i64, 10, 16] { idx.extend(p.to_le_bytes()) } // byte offsets
/// for i in [0i64, 1, 2, 3] { idx.extend(i.to_le_bytes()) }
/// std::fs::write(dir.join("corpus.idx"), idx).unwrap();
///
/// let shards = TokenShards::open_as([dir.join("corpus")], Megatron)?;
/// assert_eq!(shards.tokens(), 16);
/// // No bos: the documents are the .idx's.
/// let documents = Documents::builder(shards).tokens_per_batch(15).max_seq_len(16).build()?;
/// let mut loader = Loader::builder(documents).build()?;
/// let batch = loader.pop()?.expect("a step");
/// assert_eq!(batch.field_as::<i32>("cu_seqlens")?[..4], [0, 5, 8, 15]);
/// batch.release(Fence::Sync).expect("a Sync fence always captures");
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Megatron;

impl Megatron {
    /// The `.bin` and `.idx` a path names: its own `.bin` or `.idx` and the other beside
    /// it, or, for any other name, the prefix's (`PATH.bin`, `PATH.idx`).
    pub fn paths(path: &Path) -> (PathBuf, PathBuf) {
        match path.extension().and_then(|e| e.to_str()) {
            Some("bin") | Some("idx") => (path.with_extension("bin"), path.with_extension("idx")),
            _ => {
                let with = |ext: &str| {
                    let mut p = path.as_os_str().to_owned();
                    p.push(ext);
                    PathBuf::from(p)
                };
                (with(".bin"), with(".idx"))
            }
        }
    }
}

impl TokenFileFormat for Megatron {
    /// Opens the pair `path` names (see [`Megatron::paths`]) and checks it; see
    /// [`Megatron`] for what is checked.
    fn open(&self, path: &Path) -> Result<TokenShard> {
        let (bin_path, idx_path) = Megatron::paths(path);
        let bin = open_set_file(&bin_path)?;
        let idx = open_set_file(&idx_path)?;
        let index = MegatronIndex::open(idx, &bin)?;
        let layout = TokenLayout {
            name: index.name(),
            format: index.width(),
            offset: 0,
            tokens: index.tokens() as usize,
        };
        TokenShard::with_index(bin, layout, Arc::new(index))
    }
}
