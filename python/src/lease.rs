//! A batch's lease, shared (through an `Arc`) by the Python `Batch` object and by every
//! DLPack capsule or tensor made from it: the slot stays leased until the last of them
//! goes, unless the caller releases it explicitly first.

use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::prelude::*;
use pyo3::sync::MutexExt;

use crate::dispatch::AnyBatch;
use crate::gil::drop_detached;
use crate::holder::PipelineHolder;

/// Streams the core keeps per batch (`MAX_BOUND_STREAMS` in the core's
/// `src/backend/bound.rs`); a batch bound to more is fenced conservatively (a host block).
const CORE_KEEPS: u8 = 4;

/// What the Python layer knows of the streams a leased batch was bound to (the declared
/// consumer stream and every stream a `__dlpack__` call declared): enough to tell a
/// release that only records events (done with the GIL held) from one that may block the
/// host (done with the GIL released).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StreamsBound {
    /// Bindings made, counted per call (not deduplicated: an over-count only sends a
    /// release down the GIL-released path), saturating.
    count: u8,
    /// A stream named relative to the thread or context (null, legacy, per-thread) was
    /// bound: fencing on it may have to synchronize the context.
    relative: bool,
}

impl StreamsBound {
    /// Counts a binding to `raw`, a `CUstream` (null, 1 and 2 name streams relative to the
    /// calling thread).
    pub(crate) fn bind(&mut self, raw: usize) {
        self.count = self.count.saturating_add(1);
        self.relative |= matches!(raw, 0..=2);
    }

    /// Whether releasing with a fence that names nothing (`release()`: fenced on the bound
    /// streams) or one that names a stream or event (`named`) may block the host: an
    /// unbound batch's release synchronizes, and so may a fence on a relative stream or
    /// on more streams than the core keeps.
    pub(crate) fn release_may_block(&self, named: bool) -> bool {
        self.relative || self.count > CORE_KEEPS || (!named && self.count == 0)
    }
}

/// A batch still leased, and the streams it was bound to.
#[derive(Debug)]
pub(crate) struct Leased {
    /// The batch.
    pub(crate) batch: AnyBatch,
    /// Its bindings, as far as the Python layer made them.
    pub(crate) streams: StreamsBound,
}

/// What the Python object and every DLPack export of it share.
#[derive(Debug)]
pub(crate) struct BatchCell {
    /// The batch while it is leased; `None` once released. A lock rather than an atomic
    /// hand-off: an export binds the batch to a stream (`&mut`) while a release on another
    /// thread may take it, and both are rare next to the lock's uncontended cost (one
    /// compare-and-swap).
    lease: Mutex<Option<Leased>>,
    /// Keeps the pipeline, and with it the slot's memory, alive while any view of the slot
    /// exists. Declared after `lease`, so the batch is released first.
    pipeline: Arc<PipelineHolder>,
}

impl BatchCell {
    /// A cell leasing `batch` (bound to the streams `streams` counts) from the pipeline
    /// `pipeline` holds.
    pub(crate) fn new(
        batch: AnyBatch,
        streams: StreamsBound,
        pipeline: Arc<PipelineHolder>,
    ) -> Self {
        BatchCell {
            lease: Mutex::new(Some(Leased { batch, streams })),
            pipeline,
        }
    }

    /// The lease, for a thread detached from the interpreter (inside `py.detach`).
    /// What keeps the pipeline, and the slot's memory, alive.
    pub(crate) fn pipeline(&self) -> &Arc<PipelineHolder> {
        &self.pipeline
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, Option<Leased>> {
        self.lease.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lease, waited for with the GIL released (another thread may hold it while it
    /// waits for the batch's copy).
    pub(crate) fn lock_attached(&self, py: Python<'_>) -> MutexGuard<'_, Option<Leased>> {
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
        let leased = self
            .lease
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(leased) = leased {
            drop_detached(leased.batch);
        }
    }
}
