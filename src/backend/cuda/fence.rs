//! What the cuda backend keeps of a release and of a bound stream: [`CudaFence`], whether
//! FENCE(d) was recorded (and where, when straight on a stream), [`CudaBinding`], a stream
//! a batch was bound to with `wait_on`, [`FenceOrder`], which of those records the copy
//! stream already has behind it, and [`CheckedStream`], the stream a release last found to
//! be of the pipeline's context.

use crossbeam_utils::CachePadded;
use cudarc::driver::sys;

use super::handles::CuStream;
use crate::sync::native::{AtomicU64, Mutex, Ordering, ThreadId};

/// A release fence as the cuda backend captured it: whether FENCE(d) was recorded.
#[derive(Debug)]
pub struct CudaFence {
    pub(super) recorded: bool,
    /// Where, when the release recorded FENCE(d) straight on the stream it was given.
    pub(super) on: Option<RecordedOn>,
}

impl CudaFence {
    /// Nothing recorded (`Fence::Sync`, a conservative fence).
    pub(super) const NONE: CudaFence = CudaFence {
        recorded: false,
        on: None,
    };
    /// FENCE(d) recorded on slot d's fence stream, after the waits it joins.
    pub(super) const LINKED: CudaFence = CudaFence {
        recorded: true,
        on: None,
    };

    /// [`LINKED`](Self::LINKED) if `recorded`, else [`NONE`](Self::NONE).
    pub(super) fn linked_if(recorded: bool) -> CudaFence {
        if recorded {
            CudaFence::LINKED
        } else {
            CudaFence::NONE
        }
    }

    /// FENCE(d) recorded straight on a stream, at `on` where its place is known.
    pub(super) fn at(on: Option<RecordedOn>) -> CudaFence {
        CudaFence { recorded: true, on }
    }
}

/// A record of FENCE(d) straight on a stream: the stream (its `cuStreamGetId`, unique for
/// the process's life, not its handle, which a stream made after one destroyed may reuse
/// while the old one's work still runs), the releasing thread, and the record's place in
/// [`FenceOrder`]'s count. Two records of one thread on one stream are in the stream in the
/// order of their places: the later one's completion implies the other's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct RecordedOn {
    stream: u64,
    thread: ThreadId,
    place: u64,
}

impl RecordedOn {
    /// Whether this record's completion implies `other`'s: the same thread, the same stream,
    /// and `other` no later.
    fn implies(&self, other: &RecordedOn) -> bool {
        self.stream == other.stream && self.thread == other.thread && self.place >= other.place
    }
}

/// The places of direct fence records, and the latest of them the copy stream is known to
/// be behind (completed, or waited on stream-side): the copy thread then skips every
/// earlier record of that thread on that stream without touching its event.
#[derive(Debug, Default)]
pub(super) struct FenceOrder {
    /// Relaxed: a place is compared only with places the same thread took (one thread's
    /// RMWs on one atomic come in its program order); it orders nothing else. Taken by
    /// every direct release: on a cache line of its own, away from `covered`.
    next: CachePadded<AtomicU64>,
    /// Touched by the copy thread (and by the teardown's hand-over of pending fences, after
    /// it): never contended.
    covered: CachePadded<Mutex<Option<RecordedOn>>>,
}

impl FenceOrder {
    /// The place of a record thread `here` (the caller) just made on stream `id`, or `None`
    /// where the stream's id could not be had (the fence is then queried on its own).
    pub(super) fn recorded(&self, id: Option<u64>, here: ThreadId) -> Option<RecordedOn> {
        id.map(|id| self.place(id, here))
    }

    fn place(&self, stream: u64, thread: ThreadId) -> RecordedOn {
        RecordedOn {
            stream,
            thread,
            place: self.next.fetch_add(1, Ordering::Relaxed),
        }
    }

    /// Copy thread: whether the copy stream is already behind `on`.
    pub(super) fn covers(&self, on: RecordedOn) -> bool {
        self.lock().is_some_and(|c| c.implies(&on))
    }

    /// Copy thread: the copy stream is behind `on` (its record completed, or the copy
    /// stream waits for it).
    pub(super) fn cover(&self, on: RecordedOn) {
        let mut covered = self.lock();
        if !covered.is_some_and(|c| c.implies(&on)) {
            *covered = Some(on);
        }
    }

    fn lock(&self) -> crate::sync::native::MutexGuard<'_, Option<RecordedOn>> {
        self.covered.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// `stream`'s id (`cuStreamGetId`: unique for the process's life), or `None` where the
/// driver gives none. The pipeline's context must be bound: it decides which stream a
/// relative handle (null, legacy, per-thread) names.
pub(super) fn stream_id(stream: sys::CUstream) -> Option<u64> {
    let mut id = 0u64;
    // SAFETY: writes one id; `stream` is live (the caller's, by CuStream's contract).
    let got = unsafe { sys::cuStreamGetId(stream, &mut id) }.result();
    got.ok().map(|()| id)
}

/// The stream (by id) that the last checked direct release found to be of the pipeline's
/// context, so that releases on it skip `cuStreamGetCtx`: the id plus one, 0 for none.
/// Relaxed: a stream's context never changes and its id is never reused, so any value read
/// is true.
#[derive(Debug, Default)]
pub(super) struct CheckedStream(AtomicU64);

impl CheckedStream {
    /// Whether stream `id` is the one kept.
    pub(super) fn is(&self, id: Option<u64>) -> bool {
        let kept = id.and_then(|id| id.checked_add(1));
        kept.is_some_and(|kept| self.0.load(Ordering::Relaxed) == kept)
    }

    /// Stream `id` was found to be of the pipeline's context (an id of `u64::MAX`, which
    /// the word cannot hold beside its "none", is not kept).
    pub(super) fn keep(&self, id: Option<u64>) {
        if let Some(kept) = id.and_then(|id| id.checked_add(1)) {
            self.0.store(kept, Ordering::Relaxed);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::native::current_thread_id;

    #[test]
    fn the_checked_stream_is_only_the_one_kept_and_never_u64_max() {
        let checked = CheckedStream::default();
        assert!(
            !checked.is(Some(0)) && !checked.is(None),
            "nothing kept yet"
        );
        checked.keep(Some(5));
        assert!(checked.is(Some(5)));
        assert!(!checked.is(Some(6)) && !checked.is(None));
        checked.keep(None);
        assert!(
            checked.is(Some(5)),
            "an id the driver did not give keeps nothing"
        );
        let fresh = CheckedStream::default();
        fresh.keep(Some(u64::MAX));
        assert!(
            !fresh.is(Some(u64::MAX)),
            "u64::MAX cannot be kept beside the none"
        );
    }

    #[test]
    fn a_covered_record_covers_the_older_records_of_its_thread_on_its_stream_only() {
        let order = FenceOrder::default();
        let me = current_thread_id();
        let (a, b, c) = (order.place(1, me), order.place(1, me), order.place(1, me));
        let other_stream = order.place(2, me);
        let other_thread = std::thread::scope(|s| {
            s.spawn(|| order.place(1, current_thread_id()))
                .join()
                .unwrap()
        });
        assert!(!order.covers(a), "nothing covered yet");
        order.cover(b);
        assert!(
            order.covers(a) && order.covers(b),
            "b and what came before it on stream 1"
        );
        assert!(!order.covers(c), "c came after b");
        assert!(!order.covers(other_stream), "another stream");
        assert!(
            !order.covers(other_thread),
            "another thread's record on the same stream"
        );
        order.cover(a);
        assert!(order.covers(b), "an older cover does not undo a newer one");
        order.cover(other_stream);
        assert!(
            order.covers(other_stream) && !order.covers(a),
            "one stream remembered"
        );
    }
}
