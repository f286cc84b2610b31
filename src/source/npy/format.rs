//! [`Npy`]: numpy's `.npy` arrays of tokens as a token format.

use std::path::Path;

use super::header::{read_header, NpyHeader};
use super::problem::NpyProblem;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::sampling::file_set::open_set_file;
use crate::source::tokens::{ShardFormat, TokenFileFormat, TokenLayout, TokenShard};

/// numpy's `.npy` files holding one 1-D array of tokens, as `np.save` writes it (numpy's
/// format description, `numpy.lib.format`): the magic `\x93NUMPY`, the format version
/// (1.0, 2.0 or 3.0), the header's length (`u16` in 1.0, `u32` in 2.0 and 3.0), the header
/// — a Python dict literal of `'descr'`, `'fortran_order'` and `'shape'`, padded with
/// spaces and ended by a newline — then the array's bytes.
///
/// The array must be 1-D (`shape` `(n,)`, `n` at least 1) of little-endian `uint16`
/// (`'<u2'`), `uint32` (`'<u4'`) or `int32` (`'<i4'`: its bits read as `u32`; token ids
/// are never negative) and its bytes exactly `n` tokens. (`fortran_order` may be either:
/// a 1-D array's bytes are the same.) A checkpoint names the format `"npy-u2"`, `"npy-u4"`
/// or `"npy-i4"`. Anything else is a
/// [`SourceError::File`](crate::source::SourceError::File) naming the file, with an
/// [`NpyProblem`](crate::source::NpyProblem).
///
/// ```
/// use pinring::source::{Npy, TokenShards};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-npy-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// // What `np.save("part-0.npy", np.arange(6, dtype=np.uint32))` writes.
/// let header = "{'descr': '<u4', 'fortran_order': False, 'shape': (6,), }";
/// let mut file = b"\x93NUMPY\x01\x00".to_vec();
/// let padded = format!("{header:<117}\n"); // 10 + 118 = 128 bytes, a multiple of 64
/// file.extend((padded.len() as u16).to_le_bytes());
/// file.extend(padded.as_bytes());
/// file.extend((0..6u32).flat_map(u32::to_le_bytes));
/// std::fs::write(dir.join("part-0.npy"), file).unwrap();
/// let shards = TokenShards::open_as([dir.join("part-0.npy")], Npy)?;
/// let sampler = shards.windows(3).build()?;
/// assert_eq!(sampler.epoch(0).next().unwrap().to_vec()?, [0, 1, 2]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Npy;

impl TokenFileFormat for Npy {
    /// Opens the file at `path` as a `.npy` array of tokens and checks it; see [`Npy`].
    fn open(&self, path: &Path) -> Result<TokenShard> {
        let file = open_set_file(path)?;
        let fail = |problem: NpyProblem| SourceError::file(path, problem);
        let NpyHeader { data_at, descr, shape } = read_header(&file)?;
        let (format, name) = match descr.as_str() {
            "<u2" => (ShardFormat::U16, "npy-u2"),
            "<u4" => (ShardFormat::U32, "npy-u4"),
            "<i4" => (ShardFormat::U32, "npy-i4"),
            _ => return Err(fail(NpyProblem::for_descr(descr)).into()),
        };
        let &[n] = shape.as_slice() else {
            return Err(fail(NpyProblem::NotOneDimensional { shape }).into());
        };
        if n == 0 {
            return Err(fail(NpyProblem::NoTokens).into());
        }
        let width = format.token_bytes() as u64;
        let data = file.len() - data_at;
        if n.checked_mul(width) != Some(data) {
            return Err(fail(NpyProblem::DataSize { data, tokens: n, width: format }).into());
        }
        let layout = TokenLayout { name, format, offset: data_at, tokens: n as usize };
        TokenShard::with_layout(file, layout)
    }
}
