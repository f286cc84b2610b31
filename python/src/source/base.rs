//! The base classes of the sources: `pinring.Source`, what every source object holds for
//! a loader (its core source, rank, world size and element type), and `pinring.Sampler`,
//! what the sampled sources (`TokenWindows`, `FixedRecords`) add: an order over their
//! samples and an epoch's length. Written once here, as tokenizers' `PyModel` is the base
//! of its models; a source class adds only what it has of its own.

use pyo3::prelude::*;

use pinring::Dtype;

use crate::source::given::Given;
use crate::source::sampling::Sampling;
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};

/// What every source (TokenWindows, FixedRecords, Documents, Mixture) is: a base class,
/// made only through them.
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", name = "Source", subclass, frozen)]
#[derive(Debug)]
pub struct PySource {
    /// What a loader takes.
    pub(crate) given: Given,
    /// The samples' element type (for Documents, their tokens').
    pub(crate) dtype: Dtype,
}

#[gen_stub_pymethods]
#[pymethods]
impl PySource {
    /// This process's rank.
    #[getter]
    fn rank(&self) -> u64 {
        self.given.place.0
    }

    /// Ranks the source's samples (or steps) are sharded over.
    #[getter]
    fn world_size(&self) -> u64 {
        self.given.place.1
    }

    /// The samples' element type ("uint8" for FixedRecords; for Documents, the tokens').
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.name()
    }
}

impl PySource {
    /// A source holding `given`, of element type `dtype`.
    pub(crate) fn new(given: Given, dtype: Dtype) -> PyClassInitializer<Self> {
        PyClassInitializer::from(PySource { given, dtype })
    }

    /// `rank=r/w`, for a source's repr.
    pub(crate) fn place(&self) -> String {
        format!("rank={}/{}", self.given.place.0, self.given.place.1)
    }
}

/// What TokenWindows and FixedRecords are: samples drawn from files in an order, an epoch
/// of them split over the ranks. A base class, made only through them.
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", name = "Sampler", extends = PySource, subclass, frozen)]
#[derive(Debug)]
pub struct PySampler {
    sampling: Sampling,
    /// Samples per epoch for this rank.
    epoch_len: u64,
}

#[gen_stub_pymethods]
#[pymethods]
impl PySampler {
    /// "sequential", "shuffled" or "random".
    #[getter]
    fn order(&self) -> &'static str {
        self.sampling.order.name()
    }

    /// The seed of "shuffled" and "random".
    #[getter]
    fn seed(&self) -> u64 {
        self.sampling.seed
    }

    /// Whether this source's `epoch_len` is the same on every rank. (A Loader always gives
    /// every rank the same number of batches, whatever this says.)
    #[getter]
    fn even_ranks(&self) -> bool {
        self.sampling.even_ranks
    }

    /// Samples per epoch for this rank.
    #[getter]
    fn epoch_len(&self) -> u64 {
        self.epoch_len
    }

    /// Samples per epoch for this rank (as `epoch_len`).
    fn __len__(&self) -> usize {
        usize::try_from(self.epoch_len).unwrap_or(usize::MAX)
    }
}

impl PySampler {
    /// A sampled source holding `given` (its element type the rows'), sampled by
    /// `sampling`, `epoch_len` samples an epoch on this rank.
    pub(crate) fn new(
        given: Given,
        sampling: Sampling,
        epoch_len: u64,
    ) -> PyClassInitializer<Self> {
        let dtype = given.row.dtype;
        PySource::new(given, dtype).add_subclass(PySampler {
            sampling,
            epoch_len,
        })
    }

    /// `order='...', rank=r/w, epoch_len=n`, for a sampled source's repr.
    pub(crate) fn describe(slf: &PyRef<'_, Self>) -> String {
        let source = slf.as_super();
        format!(
            "{}, epoch_len={}",
            slf.sampling.describe(source.given.place),
            slf.epoch_len
        )
    }
}
