//! The running pipeline, shared by the loader and every batch popped from it (and every
//! view of those), with the source it runs and the position it has delivered up to.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use pyo3::prelude::*;
use pyo3::sync::MutexExt;

use pinring::Locate;

use crate::dispatch::{AnyBatch, AnyPipeline};
use crate::gil::{drop_detached, drop_object};
use crate::position::Position;
use crate::source::spec::Spec;
use crate::state::SourceState;

/// The pipeline, its source and its position, changed together under one lock: a `pop`
/// counts its batch under the lock it popped it with, and `load_state_dict` swaps
/// pipeline, source (a mixture's new weights) and position in one step, so neither sees
/// the other half done.
#[derive(Debug)]
pub(crate) struct Running {
    /// The pipeline; `None` once dropped by `close()`.
    pub(crate) pipeline: Option<AnyPipeline>,
    /// The source it runs (batched as the loader cuts it).
    pub(crate) spec: Spec,
    /// What it has delivered.
    pub(crate) position: Position,
    /// A batch popped from the pipeline but not delivered: the first of the next epoch,
    /// which ended an epoch's loop over a source whose epochs' ends are only seen when the
    /// next batch is (Documents). The next pop delivers it; it is not counted in
    /// `position` until then.
    pub(crate) pending: Option<AnyBatch>,
}

/// The pipeline, shared by the loader and by every batch popped from it (and every view of
/// those): it is dropped, its threads joined and its memory freed, when the last of them
/// goes; `close()` stops it at once and drops it then if nothing else holds it. The drop
/// happens with the GIL released, wherever the last holder goes.
#[derive(Debug)]
pub(crate) struct PipelineHolder {
    running: Mutex<Running>,
    /// What places the batches' rows in their files (the same whatever the weights).
    locator: Arc<dyn Locate>,
    /// The object of the Loader's `stream=`, which keeps the declared stream alive while
    /// the pipeline waits on it and batches bound to it record their fences on it (a cupy
    /// stream is destroyed with its object). Released after the pipeline, and after every
    /// batch, whose cells hold this holder; with the GIL, or later (`gil::drop_object`).
    stream: Option<Py<PyAny>>,
}

impl PipelineHolder {
    /// A holder of `pipeline`, running `spec` from `from`, whose declared stream (if any)
    /// the object `stream` keeps alive.
    pub(crate) fn new(
        pipeline: AnyPipeline,
        spec: Spec,
        from: Option<SourceState>,
        stream: Option<Py<PyAny>>,
    ) -> Self {
        PipelineHolder {
            locator: spec.locator(),
            running: Mutex::new(Running {
                pipeline: Some(pipeline),
                spec,
                position: Position {
                    from,
                    ..Position::default()
                },
                pending: None,
            }),
            stream,
        }
    }

    /// The lock if it is free now (a `pop` that finds its batch ready takes it this way,
    /// without releasing the GIL); `None` when another thread holds it.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, Running>> {
        match self.running.try_lock() {
            Ok(guard) => Some(guard),
            Err(TryLockError::Poisoned(e)) => Some(e.into_inner()),
            Err(TryLockError::WouldBlock) => None,
        }
    }

    /// What places the batches' rows in their files.
    pub(crate) fn locator(&self) -> &Arc<dyn Locate> {
        &self.locator
    }

    /// The lock, for a thread detached from the interpreter (inside `py.detach`).
    pub(crate) fn lock(&self) -> MutexGuard<'_, Running> {
        self.running.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lock, waited for with the GIL released (a `pop` in another thread holds it for
    /// up to one wait slice).
    pub(crate) fn lock_attached(&self, py: Python<'_>) -> MutexGuard<'_, Running> {
        self.running
            .lock_py_attached(py)
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for PipelineHolder {
    fn drop(&mut self) {
        let running = self.running.get_mut().unwrap_or_else(|e| e.into_inner());
        // Releases a batch kept for the next pop, then joins the pipeline's threads (and,
        // on cuda, frees its memory): without the GIL.
        drop_detached(running.pending.take());
        drop_detached(running.pipeline.take());
        // The last holder may be a DLPack deleter run where C code let the GIL go.
        if let Some(stream) = self.stream.take() {
            drop_object(stream);
        }
    }
}
