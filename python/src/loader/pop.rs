//! How a `pinring.Loader` pops: a batch that is ready is taken with the GIL held (no
//! release and reacquire of it); otherwise it waits with the GIL released, in slices of
//! 30 ms with a signal check between them (Ctrl-C raises at once). The popped batch is
//! wrapped as a `pinring.Batch`, with its slot's fixed views, bound to the declared stream.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pyo3::prelude::*;

use crate::batch::PyBatch;
use crate::dispatch::{AnyBatch, Popped};
use crate::errors::from_core::to_py;
use crate::fixed_views::BatchShape;
use crate::gil::drop_detached;
use crate::lease::StreamsBound;
use crate::loader::Loader;

/// A blocked `pop` waits in slices this long, checking for signals (Ctrl-C) in between.
const SLICE: Duration = Duration::from_millis(30);

/// What one wait slice of `pop` found.
enum Slice {
    Closed,
    Got(pinring::Result<Popped>),
}

impl Loader {
    /// The Python batch of a batch just popped: with its slot's fixed views (made now, at
    /// the slot's first use), bound to the declared stream (the core's pop did that).
    fn wrap(&self, py: Python<'_>, batch: AnyBatch) -> PyResult<Py<PyBatch>> {
        let shape = self.shape.get_or_init(|| BatchShape {
            row: self.given.row,
            batch_size: self.batch_size,
            device: self.device,
            layout: batch.fields().map(Arc::new),
        });
        let views = match &self.fixed {
            None => None,
            Some(fixed) => {
                let (slot, ptr) = batch.slot_and_ptr();
                match fixed.of_slot(py, slot, &self.holder, || shape.fixed_views(ptr)) {
                    Ok(views) => Some(views),
                    Err(e) => {
                        // Released as a drop does, without the GIL (it may synchronize).
                        drop_detached(batch);
                        return Err(e);
                    }
                }
            }
        };
        let mut streams = StreamsBound::default();
        if let Some(raw) = self.consumer_stream {
            streams.bind(raw);
        }
        Py::new(
            py,
            PyBatch::new(batch, streams, shape, self.holder.clone(), views),
        )
    }

    /// The Python answer to what a pop found.
    fn answer(
        &self,
        py: Python<'_>,
        popped: pinring::Result<Popped>,
    ) -> Option<PyResult<Option<Py<PyBatch>>>> {
        match popped {
            Ok(Popped::NotReady) => None,
            Ok(Popped::End) => Some(Ok(None)),
            Ok(Popped::Batch(batch)) => Some(self.wrap(py, batch).map(Some)),
            Err(pinring::Error::Stopped) if self.closed.load(Ordering::Acquire) => {
                Some(Err(self.closed_error(py)))
            }
            Err(e) => Some(Err(to_py(py, e))),
        }
    }

    /// A pop that never waits, with the GIL held: the ready batch (the common case, a
    /// pipeline ahead of its consumer), the end (or, with `epoch`, the end of that epoch),
    /// or an error; `None` when the caller must wait (no batch ready, or another thread
    /// holds the loader).
    fn pop_ready(
        &self,
        py: Python<'_>,
        epoch: Option<u64>,
    ) -> Option<PyResult<Option<Py<PyBatch>>>> {
        let popped = {
            let mut loader = self.holder.try_lock()?;
            if self.closed.load(Ordering::Acquire) {
                return Some(Err(self.closed_error(py)));
            }
            loader.try_pop(epoch)
        };
        // Wrapped without the lock (making a slot's fixed views calls Python).
        self.answer(py, popped)
    }

    /// `pop` waiting at most `limit` (`None`: no limit); with `epoch`, a batch of another
    /// epoch is kept for the next pop and `None` says that epoch ended.
    pub(crate) fn pop_within(
        &self,
        py: Python<'_>,
        limit: Option<Duration>,
        epoch: Option<u64>,
    ) -> PyResult<Option<Py<PyBatch>>> {
        if let Some(popped) = self.pop_ready(py, epoch) {
            return popped;
        }
        let start = Instant::now();
        loop {
            let slice = limit.map_or(SLICE, |l| l.saturating_sub(start.elapsed()).min(SLICE));
            let popped = py.detach(|| {
                let mut loader = self.holder.lock();
                if self.closed.load(Ordering::Acquire) {
                    return Slice::Closed;
                }
                Slice::Got(loader.pop_for(epoch, slice))
            });
            let popped = match popped {
                Slice::Closed => return Err(self.closed_error(py)),
                Slice::Got(Err(pinring::Error::PopTimeout { behind, .. })) => {
                    let waited = start.elapsed();
                    if limit.is_some_and(|l| waited >= l) {
                        return Err(to_py(py, pinring::Error::PopTimeout { waited, behind }));
                    }
                    None
                }
                Slice::Got(popped) => self.answer(py, popped),
            };
            if let Some(answer) = popped {
                return answer;
            }
            py.check_signals()?;
        }
    }
}
