//! What the cuda backend keeps of a release and of a bound stream: [`CudaFence`], whether
//! FENCE(d) was recorded, and [`CudaBinding`], a stream a batch was bound to with `wait_on`.

use super::handles::CuStream;
use crate::sync::native::ThreadId;

/// A release fence as the cuda backend captured it: whether FENCE(d) was recorded.
#[derive(Debug)]
pub struct CudaFence {
    pub(super) recorded: bool,
}

/// What a batch bound with `wait_on` remembers of one stream.
#[derive(Debug)]
pub struct CudaBinding {
    pub(super) stream: CuStream,
    /// For the per-thread default stream: the thread whose stream it is.
    pub(super) thread: Option<ThreadId>,
}

impl PartialEq for CudaBinding {
    /// The same stream: the same handle, and for the per-thread default stream the same
    /// thread's.
    fn eq(&self, other: &Self) -> bool {
        self.stream.raw() == other.stream.raw() && self.thread == other.thread
    }
}

impl CudaBinding {
    /// Whether a record on `stream`, made by the current thread, is a record on this
    /// binding's stream.
    pub(super) fn is(&self, stream: &CuStream, here: ThreadId) -> bool {
        self.stream.raw() == stream.raw() && self.recordable_by(here)
    }

    /// Whether thread `here` can record on this binding's stream (not on another thread's
    /// per-thread default stream).
    pub(super) fn recordable_by(&self, here: ThreadId) -> bool {
        self.thread.is_none_or(|t| t == here)
    }
}
