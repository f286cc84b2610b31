//! The consumer's release fences, and how each one feeds the backend's capture
//! operations ([`Ops`](super::contract::Ops)`::capture_*`).

use std::fmt;

use super::bound::BoundStreams;
use super::contract::Backend;
use super::cpu::Cpu;
use crate::error::{Error, Result};
use crate::slot::index::DeviceIdx;

/// What the device must finish before a released batch's slot is reused.
///
/// Reuse always waits stream-side (the copy stream waits on the fence); the host never
/// blocks on it. Fences are per slot: a late fence on one slot never holds up another.
///
/// A batch bound to streams with [`Batch::wait_on`](crate::Batch::wait_on) is fenced on
/// each of them too, whatever the fence given here (a stream the fence names is fenced
/// once); only [`Fence::Sync`] covers them all, by the caller's promise.
pub enum Fence<'a, B: Backend = Cpu> {
    /// The caller promises the device no longer reads the slot, on any stream (for
    /// example, it has synchronized). Cheapest; wrong if the promise is false.
    Sync,
    /// Reuse waits for this event as it stands now (its latest record at release time;
    /// recording it again later does not move the fence).
    Event(&'a B::Event),
    /// Records a fence on this stream now; reuse waits for it.
    Stream(&'a B::Stream),
    /// Reuse waits for every stream the batch is bound to: each stream given to
    /// [`Batch::wait_on`](crate::Batch::wait_on), and the pipeline's consumer stream
    /// ([`ConfigBuilder::consumer_stream`](crate::ConfigBuilder::consumer_stream)), which
    /// every `pop` binds. With a declared consumer stream a training loop releases with
    /// this and never names a stream. Fenced as a bound batch's drop is (one bound stream:
    /// as [`Fence::Stream`] on it); a batch bound to no stream is refused with
    /// [`Error::Fence`](crate::Error::Fence), the batch handed back.
    Bound,
}

impl<B: Backend> Fence<'_, B> {
    /// Captures this fence for slot `d`, with every stream in `bound` it does not cover.
    pub(crate) fn capture(
        self,
        backend: &B,
        d: DeviceIdx,
        bound: &BoundStreams<B::Binding>,
    ) -> Result<B::Captured> {
        match self {
            Fence::Sync => Ok(backend.capture_sync(d)),
            Fence::Event(event) => backend.capture_event(d, event, bound),
            Fence::Stream(stream) => backend.capture_stream(d, stream, bound),
            Fence::Bound if bound.is_empty() => Err(Error::Fence(
                "Fence::Bound: the batch is bound to no stream. Bind it with wait_on, declare \
                 the consumer's stream with ConfigBuilder::consumer_stream, or release with \
                 another fence"
                    .into(),
            )),
            Fence::Bound => Ok(backend.capture_bound(d, bound)),
        }
    }
}

impl<B: Backend> fmt::Debug for Fence<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fence::Sync => "Fence::Sync",
            Fence::Event(_) => "Fence::Event",
            Fence::Stream(_) => "Fence::Stream",
            Fence::Bound => "Fence::Bound",
        })
    }
}
