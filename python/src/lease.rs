//! A batch's lease, shared (through an `Arc`) by the Python `Batch` object and by every
//! DLPack capsule or tensor made from it: the slot stays leased until the last of them
//! goes, unless the caller releases it explicitly first.

use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::sync::MutexExt;

use crate::dispatch::AnyBatch;
use crate::gil::drop_detached;
use crate::holder::PipelineHolder;

/// What the Python object and every DLPack export of it share.
#[derive(Debug)]
pub(crate) struct BatchCell {
    /// The batch while it is leased; `None` once released.
    lease: Mutex<Option<AnyBatch>>,
    /// Keeps the pipeline, and with it the slot's memory, alive while any view of the slot
    /// exists. Declared after `lease`, so the batch is released first.
    _pipeline: Arc<PipelineHolder>,
}

impl BatchCell {
    /// A cell leasing `batch` from the pipeline `pipeline` holds.
    pub(crate) fn new(batch: AnyBatch, pipeline: Arc<PipelineHolder>) -> Self {
        BatchCell {
            lease: Mutex::new(Some(batch)),
            _pipeline: pipeline,
        }
    }

    /// The lease, for a thread detached from the interpreter (inside `py.detach`).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<AnyBatch>> {
        self.lease.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lease, waited for with the GIL released (another thread may hold it while it
    /// waits for the batch's copy).
    pub(crate) fn lock_attached(&self, py: Python<'_>) -> MutexGuard<'_, Option<AnyBatch>> {
        self.lease
            .lock_py_attached(py)
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for BatchCell {
    /// The last holder went (the Python object, a capsule, or a tensor's DLPack deleter):
    /// the batch still leased is dropped, which fences its slot on every stream it was
    /// bound to, or conservatively (cuda: a context synchronize) when unbound, with the
    /// GIL released whichever thread this runs on.
    fn drop(&mut self) {
        let batch = self
            .lease
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if batch.is_some() {
            drop_detached(batch);
        }
    }
}
