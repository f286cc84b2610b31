//! A cpu stream's failure, and how it reaches every wait on the stream.
//!
//! A closure enqueued on a [`CpuStream`](crate::CpuStream) that panics is an error on that
//! stream, sticky as a CUDA kernel fault is: the stream goes on running the rest of its
//! queue (so that nothing waiting on it hangs), but every record it makes from then on
//! carries the failure. A stream that waits on such a record fails too, and so does the
//! pipeline whose copy stream waits on it (a slot released fenced on the failed stream).
//! Each op has an index in its stream's queue; a record made at op `i` is failed when its
//! stream failed at an op before `i`.

use crate::sync::native::{Arc, OnceLock};

/// The first failure of one stream: the index of the op that failed, and why.
#[derive(Debug, Default)]
pub(crate) struct StreamFailure(OnceLock<(u64, String)>);

impl StreamFailure {
    /// Records a failure at op `op` (the first one wins).
    pub(crate) fn fail(&self, op: u64, why: String) {
        let _ = self.0.set((op, why));
    }

    /// Why the stream failed, if it failed at an op before `op`.
    pub(crate) fn before(&self, op: u64) -> Option<&str> {
        self.0
            .get()
            .filter(|(at, _)| *at < op)
            .map(|(_, why)| why.as_str())
    }

    /// Why the stream failed, if it did.
    pub(crate) fn why(&self) -> Option<&str> {
        self.0.get().map(|(_, why)| why.as_str())
    }
}

/// Where a record was made: its stream's failure cell and the index of its op there.
#[derive(Debug, Clone)]
pub(crate) struct Origin {
    pub(crate) failure: Arc<StreamFailure>,
    pub(crate) op: u64,
}

impl Origin {
    /// Why the record is failed (its stream failed before it), if it is.
    pub(crate) fn failed(&self) -> Option<&str> {
        self.failure.before(self.op)
    }
}
