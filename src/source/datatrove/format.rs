//! [`Datatrove`]: datatrove's `.ds` with its `.ds.index` as a token format, and the index
//! as a [`DocumentIndex`].

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::problem::DatatroveProblem;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::files::source_file::SourceFile;
use crate::source::sampling::file_set::open_set_file;
use crate::source::tokens::document_index::{starts_of_ends, DocumentIndex, EndsProblem};
use crate::source::tokens::{ShardFormat, TokenFileFormat, TokenLayout, TokenShard};

/// datatrove's tokenized files, as `datatrove/pipeline/tokens/tokenizer.py`'s
/// `TokenizedFile` writes them: `<name>.ds` holds the tokens, little-endian `u16`
/// (`token_size` 2, `"<H"`) or `u32` (`token_size` 4, `"<I"`, for vocabularies above
/// 65,536), one document after another; `<name>.ds.index` holds each document's end,
/// exclusive, in tokens, as `u64` (`"<Q"`), the last one the token count. The token size is
/// written in neither file: the index's last end and the `.ds`'s size say it (the size is
/// the count times 2 or times 4). A checkpoint names the format `"datatrove-u16"` or
/// `"datatrove-u32"`; the content fingerprint covers both files.
///
/// Opening checks the index's size (a whole number of `u64`) and that its last end and the
/// `.ds`'s size make a token size of 2 or 4; every end (non-decreasing, the last the token
/// count) is checked when [`Documents`](crate::source::Documents) read them. Anything
/// wrong is a [`SourceError::File`](crate::source::SourceError::File) naming the file,
/// with a [`DatatroveProblem`](crate::source::DatatroveProblem).
///
/// ```
/// use pinring::source::{Datatrove, TokenShards};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-datatrove-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// // Two documents of u16 tokens, each ending with eos (0), as datatrove writes them.
/// let tokens: [u16; 7] = [5, 6, 7, 0, 8, 9, 0];
/// std::fs::write(dir.join("00000_unshuffled.ds"), tokens.map(u16::to_le_bytes).concat()).unwrap();
/// std::fs::write(dir.join("00000_unshuffled.ds.index"), [4u64, 7].map(u64::to_le_bytes).concat()).unwrap();
/// let shards = TokenShards::glob_as(dir.join("*.ds"), Datatrove)?;
/// assert_eq!((shards.tokens(), shards.shards()[0].format().name()), (7, "u16"));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Datatrove;

impl Datatrove {
    /// The index of the `.ds` at `path`: `PATH.index`.
    pub fn index_path(path: &Path) -> PathBuf {
        let mut p = path.as_os_str().to_owned();
        p.push(".index");
        PathBuf::from(p)
    }
}

impl TokenFileFormat for Datatrove {
    /// Opens the `.ds` at `path` with its `.ds.index` and checks them; see [`Datatrove`].
    fn open(&self, path: &Path) -> Result<TokenShard> {
        let ds = open_set_file(path)?;
        let index = open_set_file(&Datatrove::index_path(path))?;
        let fail = |problem: DatatroveProblem| SourceError::file(index.path(), problem);
        let len = index.len();
        if len % 8 != 0 {
            return Err(fail(DatatroveProblem::PartialEnd { len }).into());
        }
        let mut last = [0u8; 8];
        index.read_exact_at(len - 8, &mut last)?;
        let tokens = u64::from_le_bytes(last);
        let format = match (ds.len(), tokens) {
            (bytes, t) if t > 0 && Some(bytes) == t.checked_mul(2) => ShardFormat::U16,
            (bytes, t) if t > 0 && Some(bytes) == t.checked_mul(4) => ShardFormat::U32,
            (bytes, _) => {
                return Err(SourceError::file(
                    ds.path(),
                    DatatroveProblem::TokenSize { bytes, tokens },
                )
                .into());
            }
        };
        let layout = TokenLayout {
            name: match format {
                ShardFormat::U16 => "datatrove-u16",
                ShardFormat::U32 => "datatrove-u32",
            },
            format,
            offset: 0,
            tokens: tokens as usize,
        };
        let index = DatatroveIndex { file: index, tokens };
        TokenShard::with_index(ds, layout, Arc::new(index))
    }
}

/// A `.ds.index`: the documents' ends.
#[derive(Debug)]
struct DatatroveIndex {
    file: SourceFile,
    /// Tokens in the `.ds`.
    tokens: u64,
}

impl DocumentIndex for DatatroveIndex {
    fn file(&self) -> &SourceFile {
        &self.file
    }

    fn starts(&self) -> Result<Vec<u32>, SourceError> {
        let mut bytes = vec![0u8; self.file.len() as usize];
        self.file.read_exact_at(0, &mut bytes)?;
        let ends = bytes.chunks_exact(8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
        starts_of_ends(ends, self.tokens).map_err(|problem| {
            let problem = match problem {
                EndsProblem::Decreasing { document, end, previous } => {
                    DatatroveProblem::Decreasing { document, end, previous }
                }
                EndsProblem::LastNotTokens { last, tokens } => {
                    DatatroveProblem::PastEnd { end: last, tokens }
                }
            };
            SourceError::file(self.file.path(), problem)
        })
    }
}
