//! The running loader, shared by the Python `Loader` and every batch popped from it (and
//! every view of those), so that its pipeline's memory lives as long as any of them.

use std::sync::{Arc, Mutex, MutexGuard, TryLockError};

use pyo3::prelude::*;
use pyo3::sync::MutexExt;

use pinring::Locate;

use crate::dispatch::AnyLoader;
use crate::gil::{detached, drop_object};

/// The core loader, shared by the Python loader and by every batch popped from it (and
/// every view of those): its pipeline is dropped, its threads joined and its memory freed,
/// when the last of them goes; `close()` stops it at once and drops it then if nothing
/// else holds it. The drop happens with the GIL released, wherever the last holder goes.
/// One lock: a `pop` counts its batch under the lock it popped it with, and
/// `load_state_dict` restarts the run under it, so neither sees the other half done.
#[derive(Debug)]
pub(crate) struct PipelineHolder {
    loader: Mutex<AnyLoader>,
    /// What places the batches' rows in their files (the same whatever the weights).
    locator: Arc<dyn Locate>,
    /// The object of the Loader's `stream=`, which keeps the declared stream alive while
    /// the pipeline waits on it and batches bound to it record their fences on it (a cupy
    /// stream is destroyed with its object). Released after the pipeline, and after every
    /// batch, whose cells hold this holder; with the GIL, or later (`gil::drop_object`).
    stream: Option<Py<PyAny>>,
}

impl PipelineHolder {
    /// A holder of `loader`, whose declared stream (if any) the object `stream` keeps
    /// alive.
    pub(crate) fn new(loader: AnyLoader, stream: Option<Py<PyAny>>) -> Self {
        use pinring::source::Source;
        PipelineHolder {
            locator: loader.source().locator(),
            loader: Mutex::new(loader),
            stream,
        }
    }

    /// The lock if it is free now (a `pop` that finds its batch ready takes it this way,
    /// without releasing the GIL); `None` when another thread holds it.
    pub(crate) fn try_lock(&self) -> Option<MutexGuard<'_, AnyLoader>> {
        match self.loader.try_lock() {
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
    pub(crate) fn lock(&self) -> MutexGuard<'_, AnyLoader> {
        self.loader.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lock, waited for with the GIL released (a `pop` in another thread holds it for
    /// up to one wait slice).
    pub(crate) fn lock_attached(&self, py: Python<'_>) -> MutexGuard<'_, AnyLoader> {
        self.loader
            .lock_py_attached(py)
            .unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for PipelineHolder {
    fn drop(&mut self) {
        let loader = self.loader.get_mut().unwrap_or_else(|e| e.into_inner());
        // Releases a batch kept for the next pop, then joins the pipeline's threads (and,
        // on cuda, frees its memory): without the GIL.
        detached(|| loader.close());
        // The last holder may be a DLPack deleter run where C code let the GIL go.
        if let Some(stream) = self.stream.take() {
            drop_object(stream);
        }
    }
}
