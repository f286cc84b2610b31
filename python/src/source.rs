//! The built-in sources: `TokenWindows` (llm.c token shards) and `FixedRecords` (files of
//! fixed-size records). Both are all Rust: files are opened and checked when the source is
//! made, and the pipeline's threads never call into Python.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use pinring::source::{
    self, Checkpoint, Order, Sampler, Segmented, TokenShards, TokenType, Tokens,
};

use crate::errors;

/// The element type of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
    /// `uint8` (record bytes).
    Uint8,
    /// `uint16` (tokens as stored).
    Uint16,
    /// `int32` (tokens widened).
    Int32,
    /// `int64` (tokens widened).
    Int64,
}

impl Dtype {
    /// The name numpy and torch use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Dtype::Uint8 => "uint8",
            Dtype::Uint16 => "uint16",
            Dtype::Int32 => "int32",
            Dtype::Int64 => "int64",
        }
    }

    /// Bytes per element.
    pub(crate) fn itemsize(self) -> usize {
        match self {
            Dtype::Uint8 => 1,
            Dtype::Uint16 => 2,
            Dtype::Int32 => 4,
            Dtype::Int64 => 8,
        }
    }

    /// The DLPack type.
    pub(crate) fn dlpack(self) -> dlpark::ffi::DLDataType {
        use dlpark::ffi::DLDataType;
        match self {
            Dtype::Uint8 => DLDataType::U8,
            Dtype::Uint16 => DLDataType::U16,
            Dtype::Int32 => DLDataType::I32,
            Dtype::Int64 => DLDataType::I64,
        }
    }
}

/// Sampling settings shared by both sources.
#[derive(Debug, Clone)]
pub(crate) struct Sampling {
    order: String,
    seed: u64,
    rank: u64,
    world_size: u64,
    even_ranks: bool,
}

impl Sampling {
    fn parse(
        py: Python<'_>,
        order: &str,
        seed: i128,
        rank: i128,
        world_size: i128,
        even_ranks: bool,
    ) -> PyResult<Self> {
        let seed = u64::try_from(seed)
            .map_err(|_| errors::config(py, format!("seed must be in 0..2**64, got {seed}")))?;
        let world = u64::try_from(world_size)
            .ok()
            .filter(|&w| w >= 1)
            .ok_or_else(|| {
                errors::config(
                    py,
                    format!("world_size must be at least 1, got {world_size}"),
                )
            })?;
        let rank_ok = u64::try_from(rank).ok().filter(|&r| r < world);
        let rank = rank_ok.ok_or_else(|| {
            errors::config(
                py,
                format!("rank must be in 0..world_size ({world}), got {rank}"),
            )
        })?;
        let order = order.trim().to_ascii_lowercase();
        if !matches!(order.as_str(), "sequential" | "shuffled" | "random") {
            return Err(errors::config(
                py,
                format!("order {order:?} is not one of \"sequential\", \"shuffled\", \"random\""),
            ));
        }
        Ok(Sampling {
            order,
            seed,
            rank,
            world_size: world,
            even_ranks,
        })
    }

    fn order(&self) -> Order {
        match self.order.as_str() {
            "shuffled" => Order::Shuffled { seed: self.seed },
            "random" => Order::Random { seed: self.seed },
            _ => Order::Sequential,
        }
    }

    fn apply<S: source::Segmented>(
        &self,
        builder: source::SamplerBuilder<S>,
    ) -> source::SamplerBuilder<S> {
        builder
            .order(self.order())
            .shard(self.rank, self.world_size)
            .even_ranks(self.even_ranks)
    }
}

/// A path, a glob (`*`, `?` in the file name) or a list of either, as paths or patterns.
fn path_list(paths: &Bound<'_, PyAny>) -> PyResult<Vec<PathBuf>> {
    let py = paths.py();
    let one = |p: &Bound<'_, PyAny>| -> PyResult<PathBuf> {
        p.extract::<PathBuf>().map_err(|_| {
            errors::config(
                py,
                format!(
                    "a path must be a str or os.PathLike, got {}",
                    p.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ),
            )
        })
    };
    if paths.is_instance_of::<PyString>() || paths.hasattr("__fspath__")? {
        return Ok(vec![one(paths)?]);
    }
    if paths.is_instance_of::<PyList>() || paths.is_instance_of::<PyTuple>() {
        return paths.try_iter()?.map(|p| one(&p?)).collect();
    }
    Err(errors::config(
        py,
        format!(
            "paths must be a path, a glob or a list of them, got {}",
            paths.get_type().name()?
        ),
    ))
}

fn is_glob(p: &std::path::Path) -> bool {
    p.to_string_lossy().contains(['*', '?'])
}

/// A directory given where a file belongs: the error names it (the core would only say
/// that it could not map it).
fn not_a_directory(p: &std::path::Path) -> pinring::Result<()> {
    if p.is_dir() {
        let problem = std::io::Error::new(
            std::io::ErrorKind::IsADirectory,
            format!(
                "is a directory, not a file: give a file, a glob such as \"{}/*.bin\", or a list",
                p.display()
            ),
        );
        return Err(source::SourceError::File {
            path: p.to_owned(),
            problem: problem.into(),
        }
        .into());
    }
    Ok(())
}

fn positive(py: Python<'_>, name: &str, value: i128) -> PyResult<u64> {
    u64::try_from(value)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| errors::config(py, format!("{name} must be at least 1, got {value}")))
}

/// What a loader needs from a source.
#[derive(Debug, Clone)]
pub(crate) enum Spec {
    /// Token windows of `seq_len + 1` tokens.
    Tokens {
        /// The windows.
        sampler: Sampler<TokenShards>,
        /// Widens the tokens to the dtype.
        decoder: Tokens,
    },
    /// Single records.
    Records {
        /// The records.
        sampler: Sampler<source::FixedRecords>,
    },
}

/// Runs `$body` with `$s` bound to the spec's sampler, whichever source it samples.
macro_rules! with_sampler {
    ($spec:expr, $s:ident => $body:expr) => {
        match $spec {
            Spec::Tokens { sampler: $s, .. } => $body,
            Spec::Records { sampler: $s } => $body,
        }
    };
}

/// The sampler `s` again, cutting its epochs into batches of `batch` samples, so that
/// every rank gets the same number of batches (see `SamplerBuilder::batch_size`).
fn batched<S: Segmented + Clone>(
    s: &Sampler<S>,
    batch: u64,
    drop_last: bool,
) -> pinring::Result<Sampler<S>> {
    Sampler::builder(s.source().clone())
        .window(s.window())
        .stride(s.stride())
        .order(s.order())
        .shard(s.rank(), s.world_size())
        .batch_size(batch)
        .drop_last(drop_last)
        .build()
}

impl Spec {
    /// Samples per epoch for this rank.
    pub(crate) fn epoch_len(&self) -> u64 {
        with_sampler!(self, s => s.epoch_len())
    }

    /// The same source with its epochs cut into batches of `batch` samples on every rank
    /// (the last one of an epoch short unless `drop_last`).
    pub(crate) fn batched(&self, batch: u64, drop_last: bool) -> pinring::Result<Spec> {
        Ok(match self {
            Spec::Tokens { sampler, decoder } => Spec::Tokens {
                sampler: batched(sampler, batch, drop_last)?,
                decoder: *decoder,
            },
            Spec::Records { sampler } => Spec::Records {
                sampler: batched(sampler, batch, drop_last)?,
            },
        })
    }

    /// Batches per epoch for this rank (the same on every rank); `None` without a batch
    /// size.
    pub(crate) fn epoch_batches(&self) -> Option<u64> {
        with_sampler!(self, s => s.epoch_batches())
    }

    /// The rank-agnostic state after this rank consumed `consumed` samples since `from`
    /// (the start of epoch 0 when `None`).
    pub(crate) fn checkpoint(
        &self,
        from: Option<&Checkpoint>,
        consumed: u64,
    ) -> pinring::Result<Checkpoint> {
        with_sampler!(self, s => match from {
            None => Ok(s.checkpoint(0, consumed)),
            Some(from) => s.checkpoint_after(from, consumed),
        })
    }

    /// Checks that this source can resume from `state`.
    pub(crate) fn check(&self, state: &Checkpoint) -> pinring::Result<()> {
        with_sampler!(self, s => s.check_checkpoint(state))
    }

    /// Batches this rank delivers from `from` (the start when `None`) to the end of epoch
    /// `epochs - 1`; `None` when endless or without a batch size.
    pub(crate) fn batches_until(
        &self,
        from: Option<&Checkpoint>,
        epochs: Option<u64>,
    ) -> pinring::Result<Option<u64>> {
        let (Some(epochs), Some(per_epoch)) = (epochs, self.epoch_batches()) else {
            return Ok(None);
        };
        let (epoch, first) = match from {
            None => (0, per_epoch),
            Some(state) => (
                state.epoch,
                with_sampler!(self, s => s.batches_left(state))?.unwrap_or(0),
            ),
        };
        if epoch >= epochs {
            return Ok(Some(0));
        }
        let whole = u128::from(epochs - epoch - 1) * u128::from(per_epoch) + u128::from(first);
        Ok(Some(u64::try_from(whole).unwrap_or(u64::MAX)))
    }
}

/// Shape and type of one sample: a row of `cols` elements of `dtype`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row {
    /// Elements per sample.
    pub(crate) cols: usize,
    /// Element type.
    pub(crate) dtype: Dtype,
}

impl Row {
    /// Bytes per sample.
    pub(crate) fn bytes(self) -> usize {
        self.cols * self.dtype.itemsize()
    }
}

/// Windows of `seq_len + 1` tokens from llm.c / modded-nanogpt token shards.
///
/// Each sample is `seq_len + 1` consecutive tokens (inputs `x[:, :-1]`, targets `x[:, 1:]`),
/// decoded to `dtype`. Windows start `seq_len` tokens apart, so consecutive windows share
/// one token and every token but a shard's first is a target exactly once per epoch (as
/// llm.c does); windows never cross a shard's end.
#[pyclass(module = "pinring", frozen)]
#[derive(Debug)]
pub struct TokenWindows {
    spec: Spec,
    row: Row,
    seq_len: u64,
    files: Vec<String>,
    tokens: u64,
    sampling: Sampling,
}

#[pymethods]
impl TokenWindows {
    #[new]
    #[pyo3(signature = (paths, seq_len, dtype = "int32", order = "sequential", seed = 0, rank = 0, world_size = 1, even_ranks = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        paths: &Bound<'_, PyAny>,
        seq_len: i128,
        dtype: &str,
        order: &str,
        seed: i128,
        rank: i128,
        world_size: i128,
        even_ranks: bool,
    ) -> PyResult<Self> {
        let seq_len = positive(py, "seq_len", seq_len)?;
        let window = seq_len
            .checked_add(1)
            .ok_or_else(|| errors::config(py, "seq_len is too large"))?;
        let (ty, dtype) = match dtype.trim().to_ascii_lowercase().as_str() {
            "uint16" | "u16" => (TokenType::U16, Dtype::Uint16),
            "int32" | "i32" => (TokenType::I32, Dtype::Int32),
            "int64" | "i64" => (TokenType::I64, Dtype::Int64),
            _ => {
                return Err(errors::config(
                    py,
                    format!("dtype {dtype:?} is not one of \"uint16\", \"int32\", \"int64\""),
                ))
            }
        };
        let cols = usize::try_from(window)
            .ok()
            .filter(|c| c.checked_mul(dtype.itemsize()).is_some())
            .ok_or_else(|| errors::config(py, "seq_len is too large"))?;
        let sampling = Sampling::parse(py, order, seed, rank, world_size, even_ranks)?;
        let paths = path_list(paths)?;
        let opened = py.detach(|| -> pinring::Result<_> {
            let mut shards = Vec::new();
            for p in &paths {
                if is_glob(p) {
                    shards.extend(TokenShards::glob(p)?.shards().iter().cloned());
                } else {
                    not_a_directory(p)?;
                    shards.extend(TokenShards::open([p])?.shards().iter().cloned());
                }
            }
            let shards = TokenShards::from_shards(shards)?;
            let files = shards
                .shards()
                .iter()
                .map(|s| s.path().to_string_lossy().into_owned())
                .collect::<Vec<_>>();
            let tokens = shards.tokens();
            let sampler = sampling.apply(shards.windows(window)).build()?;
            Ok((sampler, files, tokens))
        });
        let (sampler, files, tokens) = opened.map_err(|e| errors::to_py(py, e))?;
        Ok(TokenWindows {
            spec: Spec::Tokens {
                sampler,
                decoder: Tokens::new(ty),
            },
            row: Row { cols, dtype },
            seq_len,
            files,
            tokens,
            sampling,
        })
    }

    /// Tokens of inputs per sample; each sample holds `seq_len + 1` tokens.
    #[getter]
    fn seq_len(&self) -> u64 {
        self.seq_len
    }

    /// The decoded element type: "uint16", "int32" or "int64".
    #[getter]
    fn dtype(&self) -> &'static str {
        self.row.dtype.name()
    }

    /// The shard files, in the order they are read.
    #[getter]
    fn files(&self) -> Vec<String> {
        self.files.clone()
    }

    /// Tokens in all shards.
    #[getter]
    fn tokens(&self) -> u64 {
        self.tokens
    }

    /// "sequential", "shuffled" or "random".
    #[getter]
    fn order(&self) -> &str {
        &self.sampling.order
    }

    /// The seed of "shuffled" and "random".
    #[getter]
    fn seed(&self) -> u64 {
        self.sampling.seed
    }

    /// This process's rank.
    #[getter]
    fn rank(&self) -> u64 {
        self.sampling.rank
    }

    /// Ranks the epoch is split over.
    #[getter]
    fn world_size(&self) -> u64 {
        self.sampling.world_size
    }

    /// Whether this source's `epoch_len` is the same on every rank. (A Loader always
    /// gives every rank the same number of batches, whatever this says.)
    #[getter]
    fn even_ranks(&self) -> bool {
        self.sampling.even_ranks
    }

    /// Samples per epoch for this rank.
    #[getter]
    fn epoch_len(&self) -> u64 {
        self.spec.epoch_len()
    }

    fn __len__(&self) -> usize {
        usize::try_from(self.spec.epoch_len()).unwrap_or(usize::MAX)
    }

    fn __repr__(&self) -> String {
        format!(
            "TokenWindows({} file(s), {} tokens, seq_len={}, dtype='{}', order='{}', rank={}/{}, epoch_len={})",
            self.files.len(),
            self.tokens,
            self.seq_len,
            self.row.dtype.name(),
            self.sampling.order,
            self.sampling.rank,
            self.sampling.world_size,
            self.spec.epoch_len()
        )
    }
}

/// Fixed-size records from one or more files: each sample is one record of `record_bytes`
/// bytes, delivered as `uint8`.
#[pyclass(module = "pinring", frozen)]
#[derive(Debug)]
pub struct FixedRecords {
    spec: Spec,
    row: Row,
    files: Vec<String>,
    records: u64,
    sampling: Sampling,
}

#[pymethods]
impl FixedRecords {
    #[new]
    #[pyo3(signature = (paths, record_bytes, order = "sequential", seed = 0, rank = 0, world_size = 1, even_ranks = true, dtype = "uint8"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        paths: &Bound<'_, PyAny>,
        record_bytes: i128,
        order: &str,
        seed: i128,
        rank: i128,
        world_size: i128,
        even_ranks: bool,
        dtype: &str,
    ) -> PyResult<Self> {
        let record_bytes = usize::try_from(positive(py, "record_bytes", record_bytes)?)
            .map_err(|_| errors::config(py, "record_bytes is too large"))?;
        if !dtype.trim().eq_ignore_ascii_case("uint8") {
            return Err(errors::config(
                py,
                format!("dtype {dtype:?}: FixedRecords delivers bytes, dtype must be \"uint8\""),
            ));
        }
        let sampling = Sampling::parse(py, order, seed, rank, world_size, even_ranks)?;
        let paths = path_list(paths)?;
        let opened = py.detach(|| -> pinring::Result<_> {
            let mut all = Vec::new();
            for p in &paths {
                if is_glob(p) {
                    let matched = source::FixedRecords::glob(p, record_bytes)?;
                    all.extend(matched.files().iter().map(|f| f.path().to_owned()));
                } else {
                    not_a_directory(p)?;
                    all.push(p.clone());
                }
            }
            let records = source::FixedRecords::open(&all, record_bytes)?;
            let files = records
                .files()
                .iter()
                .map(|f| f.path().to_string_lossy().into_owned())
                .collect::<Vec<_>>();
            let count = records.records();
            let sampler = sampling.apply(Sampler::builder(records)).build()?;
            Ok((sampler, files, count))
        });
        let (sampler, files, records) = opened.map_err(|e| errors::to_py(py, e))?;
        Ok(FixedRecords {
            spec: Spec::Records { sampler },
            row: Row {
                cols: record_bytes,
                dtype: Dtype::Uint8,
            },
            files,
            records,
            sampling,
        })
    }

    /// Bytes per record (per sample).
    #[getter]
    fn record_bytes(&self) -> usize {
        self.row.cols
    }

    /// Always "uint8".
    #[getter]
    fn dtype(&self) -> &'static str {
        self.row.dtype.name()
    }

    /// The record files, in the order they are read.
    #[getter]
    fn files(&self) -> Vec<String> {
        self.files.clone()
    }

    /// Records in all files.
    #[getter]
    fn records(&self) -> u64 {
        self.records
    }

    /// "sequential", "shuffled" or "random".
    #[getter]
    fn order(&self) -> &str {
        &self.sampling.order
    }

    /// The seed of "shuffled" and "random".
    #[getter]
    fn seed(&self) -> u64 {
        self.sampling.seed
    }

    /// This process's rank.
    #[getter]
    fn rank(&self) -> u64 {
        self.sampling.rank
    }

    /// Ranks the epoch is split over.
    #[getter]
    fn world_size(&self) -> u64 {
        self.sampling.world_size
    }

    /// Whether this source's `epoch_len` is the same on every rank. (A Loader always
    /// gives every rank the same number of batches, whatever this says.)
    #[getter]
    fn even_ranks(&self) -> bool {
        self.sampling.even_ranks
    }

    /// Samples per epoch for this rank.
    #[getter]
    fn epoch_len(&self) -> u64 {
        self.spec.epoch_len()
    }

    fn __len__(&self) -> usize {
        usize::try_from(self.spec.epoch_len()).unwrap_or(usize::MAX)
    }

    fn __repr__(&self) -> String {
        format!(
            "FixedRecords({} file(s), {} records of {} bytes, order='{}', rank={}/{}, epoch_len={})",
            self.files.len(),
            self.records,
            self.row.cols,
            self.sampling.order,
            self.sampling.rank,
            self.sampling.world_size,
            self.spec.epoch_len()
        )
    }
}

/// The spec and row shape of a source object, or a TypeError.
pub(crate) fn spec_of(src: &Bound<'_, PyAny>) -> PyResult<(Spec, Row)> {
    if let Ok(t) = src.cast::<TokenWindows>() {
        let t = t.get();
        return Ok((t.spec.clone(), t.row));
    }
    if let Ok(r) = src.cast::<FixedRecords>() {
        let r = r.get();
        return Ok((r.spec.clone(), r.row));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "src must be a pinring.TokenWindows or pinring.FixedRecords, got {}",
        src.get_type().name()?
    )))
}
