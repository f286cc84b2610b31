//! `pinring.FixedRecords`: files that are arrays of fixed-size records.

use std::path::PathBuf;

use pyo3::prelude::*;

use pinring::source::{self, AnySource, Sampler};
use pinring::Dtype;

use crate::args;
use crate::errors::classes::config;
use crate::errors::from_core::to_py;
use crate::source::base::PySampler;
use crate::source::dtype::Row;
use crate::source::given::{placement, Given};
use crate::source::paths::{file_names, is_glob, not_a_directory, path_list, PathsArg};
use crate::source::sampling::Sampling;
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};
use crate::topology::PyTopology;

/// Fixed-size records from one or more files: each sample is one record of `record_bytes`
/// bytes, delivered as `uint8`.
///
/// Args:
///     paths: a file's path, a glob with `*` / `?` in the file name, or a list of either
///         (str or os.PathLike); each file's length must be a multiple of `record_bytes`.
///     record_bytes: bytes per record (per sample).
///     order: "sequential"; "shuffled" (a fresh permutation each epoch, from `seed`);
///         "random" (records drawn at random, from `seed`).
///     seed: the seed of "shuffled" and "random".
///     rank: this process's rank: ranks take disjoint shares of every epoch.
///     world_size: how many ranks share the epoch.
///     even_ranks: drop the epoch's last `n % world_size` records so every rank has the
///         same count.
///     dtype: always "uint8".
///     topology: a `pinring.Topology`, instead of rank and world_size: its data-parallel
///         rank and size (`topo.dp_rank`, `topo.dp_size`).
///
/// Raises:
///     SourceError: a file is missing (SourceFileNotFoundError), a directory, or not a
///         whole number of records; `e.path` names it.
///     ConfigError: an argument is out of range.
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", extends = PySampler, frozen)]
#[derive(Debug)]
pub struct FixedRecords {
    /// Bytes per record (per sample).
    #[pyo3(get)]
    record_bytes: usize,
    /// The record files, in the order they are read.
    #[pyo3(get)]
    files: Vec<String>,
    /// Records in all files.
    #[pyo3(get)]
    records: u64,
}

/// The files `paths` name, each pattern expanded in order.
fn record_files(paths: &[PathBuf], record_bytes: usize) -> pinring::Result<Vec<PathBuf>> {
    let mut all = Vec::new();
    for p in paths {
        if is_glob(p) {
            let matched = source::FixedRecords::glob(p, record_bytes)?;
            all.extend(matched.files().iter().map(|f| f.path().to_owned()));
        } else {
            not_a_directory(p)?;
            all.push(p.clone());
        }
    }
    Ok(all)
}

#[gen_stub_pymethods]
#[pymethods]
impl FixedRecords {
    #[new]
    #[pyo3(signature = (paths, record_bytes, order = "sequential", seed = 0, rank = 0, world_size = 1, even_ranks = true, dtype = "uint8", *, topology = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        paths: PathsArg<'_>,
        record_bytes: i128,
        order: &str,
        seed: i128,
        rank: i128,
        world_size: i128,
        even_ranks: bool,
        dtype: &str,
        topology: Option<PyRef<'_, PyTopology>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let record_bytes = args::bytes(py, "record_bytes", record_bytes)?;
        if !dtype.trim().eq_ignore_ascii_case("uint8") {
            return Err(config(
                py,
                "dtype",
                format!("dtype {dtype:?}: FixedRecords delivers bytes, dtype must be \"uint8\""),
            ));
        }
        let sampling = Sampling::parse(py, order, seed, even_ranks)?;
        let place = placement(py, rank, world_size, topology.as_deref())?;
        let paths = path_list(&paths)?;
        let opened = py.detach(|| -> pinring::Result<_> {
            let records =
                source::FixedRecords::open(record_files(&paths, record_bytes)?, record_bytes)?;
            let files = file_names(records.files().iter().map(|f| f.path()));
            let count = records.records();
            let (sampler, epoch_len) = sampling.build(Sampler::builder(records), place)?;
            Ok((sampler, epoch_len, files, count))
        });
        let (sampler, epoch_len, files, records) = opened.map_err(|e| to_py(py, e))?;
        let given = Given {
            source: AnySource::FixedRecords(sampler),
            row: Row {
                cols: record_bytes,
                dtype: Dtype::U8,
            },
            place,
            class: "FixedRecords",
            layout: None,
        };
        Ok(
            PySampler::new(given, sampling, epoch_len).add_subclass(FixedRecords {
                record_bytes,
                files,
                records,
            }),
        )
    }

    fn __repr__(slf: PyRef<'_, Self>) -> String {
        format!(
            "FixedRecords({} file(s), {} records of {} bytes, {})",
            slf.files.len(),
            slf.records,
            slf.record_bytes,
            PySampler::describe(slf.as_super()),
        )
    }
}
