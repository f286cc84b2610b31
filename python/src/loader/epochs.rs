//! `pinring.EpochIterator`, what `iter(loader)` returns: one epoch's batches, each a
//! [`Loader::pop_in_epoch`](pinring::Loader::pop_in_epoch) of the core loader.

use std::sync::OnceLock;

use pyo3::prelude::*;

use crate::batch::PyBatch;
use crate::errors::classes::{error, Kind};
use crate::loader::Loader;
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};

/// One epoch of a Loader: what `iter(loader)` returns. Yields the batches from the
/// loader's next one to the end of that batch's epoch (over a Documents source, an epoch of
/// the walk: it ends where the next step is of another epoch, and that step is kept for the
/// next iteration; over a Mixture, the mixture's run to its stop).
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", frozen)]
#[derive(Debug)]
pub struct EpochIterator {
    loader: Py<Loader>,
    /// The epoch it yields: known up front where the loader knows where its epochs end
    /// (windows, records), else the first batch's.
    epoch: OnceLock<u64>,
}

impl EpochIterator {
    /// An iterator of `loader`'s epoch `epoch` (`None`: the epoch of its next batch).
    pub(crate) fn new(loader: Py<Loader>, epoch: Option<u64>) -> Self {
        let known = OnceLock::new();
        if let Some(e) = epoch {
            let _ = known.set(e);
        }
        EpochIterator {
            loader,
            epoch: known,
        }
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl EpochIterator {
    /// The epoch this iterator yields (Documents: that of its first step; before it is
    /// popped, the loader's `epoch`).
    #[getter]
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        match self.epoch.get() {
            Some(&e) => Ok(e),
            None => self.loader.get().epoch(py),
        }
    }

    /// Returns the iterator itself.
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next batch of this epoch; StopIteration at its end.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyBatch>>> {
        let loader = self.loader.get();
        let batch = loader.pop_within(py, loader.pop_timeout, self.epoch.get().copied())?;
        if let Some(batch) = &batch {
            let _ = self.epoch.set(batch.get().epoch());
        }
        Ok(batch)
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl Loader {
    /// The batches from the next one to the end of its epoch; the next `iter()` goes on
    /// with the next epoch. For Documents, an epoch of the walk: it ends where the next
    /// step is of another epoch (that step is kept, undelivered, for the next `iter()` or
    /// `pop()`: nothing is lost). For a Mixture: the mixture's run to its stop.
    ///
    /// Raises:
    ///     StoppedError: every epoch of `epochs` was delivered.
    fn __iter__(slf: Bound<'_, Self>) -> PyResult<EpochIterator> {
        let py = slf.py();
        let (epoch, known, ended, epochs) = {
            let mut loader = slf.get().holder.lock_attached(py);
            let known = loader.epoch_batches().is_some();
            (loader.epoch(), known, loader.ended(), loader.epochs())
        };
        if let Some(epochs) = epochs {
            if ended || (known && epoch >= epochs) {
                return Err(error(
                    py,
                    Kind::Stopped,
                    format!(
                        "this loader delivered all {epochs} epoch(s) it was made for \
                         (epochs={epochs}): iterating it again yields nothing; make it with \
                         epochs=None (the default, no cap) or a larger epochs"
                    ),
                ));
            }
        }
        // Where epochs' ends are not known up front (Documents, mixtures), the epoch is
        // the first batch's.
        Ok(EpochIterator::new(slf.unbind(), known.then_some(epoch)))
    }
}
