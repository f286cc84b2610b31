//! `pinring.TokenWindows`: windows of llm.c / modded-nanogpt token shards.

use pyo3::prelude::*;

use pinring::source::{AnySource, TokenShards};

use crate::errors::classes::{config, new_error, obj, Kind};
use crate::errors::from_core::to_py;
use crate::source::base::PySampler;
use crate::source::dtype::Row;
use crate::source::given::{placement, Given};
use crate::source::paths::{file_names, path_list, PathsArg};
use crate::source::sampling::Sampling;
use crate::source::shards::{dtype_arg, open_error, FormatArg};
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};
use crate::topology::PyTopology;

/// Most tokens a shard holds (its header counts them in an i32).
const MAX_SHARD_TOKENS: u64 = i32::MAX as u64;

/// Windows of `seq_len + 1` tokens from llm.c / modded-nanogpt token shards.
///
/// Each sample is `seq_len + 1` consecutive tokens (inputs `x[:, :-1]`, targets
/// `x[:, 1:]`), decoded to `dtype`. Windows start `seq_len` tokens apart, so consecutive
/// windows share one token and every token but a shard's first is a target exactly once per
/// epoch (as llm.c does); windows never cross a shard's end. Files are opened, checked and
/// memory-mapped here; errors name the file.
///
/// Args:
///     paths: a file's path, a glob with `*` / `?` in the file name, or a list of either
///         (str or os.PathLike), of the `format` given. llm.c shards of u16 tokens (GPT-2)
///         and of u32 tokens (LLaMA-3) are read.
///     seq_len: tokens of input per sample; each sample holds `seq_len + 1` tokens.
///     dtype: the batches' element type: "uint16" (16-bit tokens only), "uint32" (what
///         candle's index_select takes), "int32" or "int64".
///     order: "sequential"; "shuffled" (a fresh permutation of the windows each epoch, from
///         `seed`); "random" (windows drawn at any offset, from `seed`).
///     seed: the seed of "shuffled" and "random".
///     rank: this process's rank: ranks take disjoint shares of every epoch.
///     world_size: how many ranks share the epoch.
///     even_ranks: drop the epoch's last `n % world_size` windows so every rank has the
///         same count (a Loader always gives every rank the same number of batches).
///     topology: a `pinring.Topology`, instead of rank and world_size: its data-parallel
///         rank and size (`topo.dp_rank`, `topo.dp_size`).
///     format: the files' format: "llmc" (llm.c / modded-nanogpt `.bin` shards), "megatron"
///         (Megatron-LM's and NeMo's `.bin` + `.idx`: a path names the pair by its `.bin`,
///         its `.idx` or its prefix), "datatrove" (datatrove's `.ds` + `.ds.index`), "npy"
///         (numpy's `.npy`, one 1-D array of '<u2', '<u4' or '<i4') or "raw" (headerless
///         little-endian tokens, as numpy's `tofile` writes them: llama2.c's, candle's,
///         OLMo's, MaxText's).
///     token_type: the files' token type: "uint16" or "uint32" ("int32" for 4-byte signed
///         tokens, read as their bits). Required for format="raw" (nothing in the file says
///         it); for the others the files say it, and a value given is checked against them.
///
/// Raises:
///     SourceError: a file is missing (SourceFileNotFoundError), a directory, not what its
///         format says (its header, its index, its size), or shorter than one window;
///         `e.path` names it.
///     ConfigError: an argument is out of range, `dtype` cannot hold a file's tokens, or a
///         file's tokens are not the `token_type` said.
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", extends = PySampler, frozen)]
#[derive(Debug)]
pub struct TokenWindows {
    /// Tokens of inputs per sample; each sample holds `seq_len + 1` tokens.
    #[pyo3(get)]
    seq_len: u64,
    /// The shard files, in the order they are read.
    #[pyo3(get)]
    files: Vec<String>,
    /// Tokens in all shards.
    #[pyo3(get)]
    tokens: u64,
    /// The files' format, as `format` names it.
    format: &'static str,
}

/// The `seq_len` argument: at least 1, and a window of `seq_len + 1` tokens must fit in a
/// shard.
fn seq_len_arg(py: Python<'_>, seq_len: i128) -> PyResult<u64> {
    if seq_len < 1 {
        return Err(config(
            py,
            "seq_len",
            format!("seq_len must be at least 1, got {seq_len}"),
        ));
    }
    u64::try_from(seq_len)
        .ok()
        .filter(|&s| s < MAX_SHARD_TOKENS)
        .ok_or_else(|| {
            config(
                py,
                "seq_len",
                format!(
                    "seq_len={seq_len} is too large: a token shard holds at most \
                     {MAX_SHARD_TOKENS} tokens, so seq_len is at most {}",
                    MAX_SHARD_TOKENS - 1
                ),
            )
        })
}

/// The error for a `seq_len` longer than every shard: a SourceError naming the longest.
fn too_long(py: Python<'_>, shards: &TokenShards, seq_len: u64) -> PyErr {
    let longest = shards.shards().iter().max_by_key(|s| s.len());
    let (path, tokens) = longest.map_or((String::new(), 0), |s| {
        (s.path().to_string_lossy().into_owned(), s.len())
    });
    new_error(
        py,
        Kind::Source,
        format!(
            "seq_len={seq_len} is too long: a sample takes seq_len + 1 = {} tokens, but the \
             longest shard, {path}, holds {tokens}; use seq_len={} or less",
            seq_len + 1,
            tokens.saturating_sub(1)
        ),
        &[("path", obj(py, path))],
    )
}

#[gen_stub_pymethods]
#[pymethods]
impl TokenWindows {
    #[new]
    #[pyo3(signature = (paths, seq_len, dtype = "int32", order = "sequential", seed = 0, rank = 0, world_size = 1, even_ranks = true, *, topology = None, format = "llmc", token_type = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        paths: PathsArg<'_>,
        seq_len: i128,
        dtype: &str,
        order: &str,
        seed: i128,
        rank: i128,
        world_size: i128,
        even_ranks: bool,
        topology: Option<PyRef<'_, PyTopology>>,
        format: &str,
        token_type: Option<&str>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let format = FormatArg::parse(py, format, token_type)?;
        let seq_len = seq_len_arg(py, seq_len)?;
        let window = seq_len + 1;
        let (ty, dtype) = dtype_arg(py, dtype)?;
        let cols = usize::try_from(window)
            .ok()
            .filter(|c| c.checked_mul(dtype.size()).is_some())
            .ok_or_else(|| config(py, "seq_len", format!("seq_len={seq_len} is too large")))?;
        let sampling = Sampling::parse(py, order, seed, even_ranks)?;
        let place = placement(py, rank, world_size, topology.as_deref())?;
        let paths = path_list(&paths)?;
        let shards = format
            .open(py, &paths)?
            .and_then(|shards| {
                shards.check_token_type(ty)?;
                Ok(shards)
            })
            .map_err(|e| open_error(py, e, dtype))?;
        let files = file_names(shards.shards().iter().map(|s| s.path()));
        let tokens = shards.tokens();
        if !shards.shards().iter().any(|s| s.len() as u64 >= window) {
            return Err(too_long(py, &shards, seq_len));
        }
        let (sampler, epoch_len) = py
            .detach(|| sampling.build(shards.decode_as(ty).windows(window), place))
            .map_err(|e| to_py(py, e))?;
        let given = Given {
            source: AnySource::TokenWindows(sampler),
            row: Row { cols, dtype },
            place,
            class: "TokenWindows",
            layout: None,
        };
        Ok(
            PySampler::new(given, sampling, epoch_len).add_subclass(TokenWindows {
                seq_len,
                files,
                tokens,
                format: format.name,
            }),
        )
    }

    /// The files' format: "llmc", "megatron", "datatrove", "npy" or "raw".
    #[getter]
    fn format(&self) -> &'static str {
        self.format
    }

    fn __repr__(slf: PyRef<'_, Self>) -> String {
        let dtype = slf.as_super().as_super().dtype.name();
        format!(
            "TokenWindows({} file(s), {} tokens, seq_len={}, dtype='{dtype}', {})",
            slf.files.len(),
            slf.tokens,
            slf.seq_len,
            PySampler::describe(slf.as_super()),
        )
    }
}
