//! How many batches' copies have completed: published by the one thread that learns it
//! (the cuda backend's completion thread, the cpu backend's copy stream, the model
//! device's steps), read by the copy thread, and waited on, parked, by
//! [`Batch::synchronize`](crate::Batch::synchronize).
//!
//! The count is a prefix: it passes batch `k` only once the copies of batches `0..=k` have
//! completed, so a host wait for batch `k` needs no event of `k`'s own. On cuda the count
//! moves when a run's COPIED record completes; COPIED is recorded on the in-order copy
//! stream after the run's copies and READY records, so a count past `k` means READY(k %
//! D) as recorded for batch `k` has completed too (ARCHITECTURE.md §7). That is what lets
//! READY events be plain (no blocking sync: a fifth of a microsecond to record, against
//! about 5 µs behind a queued copy) while `synchronize` still parks.
//!
//! # No lost wake-up
//!
//! A waiter's condition is `done() > seq` (or `failed()`), read with Acquire; the
//! publisher stores (Release) and then wakes the waiters' [`ParkSlot`], whose protocol
//! (`src/park.rs`) guarantees that a waiter about to park either sees the store or is
//! unparked. `fail` does the same with `failed`. Model 10 (`synchronize_parks`) checks it
//! under loom, with twins that wake nobody or that return before the copy ran.

use std::fmt;
use std::time::Duration;

use crate::park::{ParkSlot, Waited};
use crate::sync::{AtomicBool, AtomicU64, AtomicUsize, Instant, Ordering};

/// Batches copied so far, with the waits on it.
pub struct CopyCount {
    /// Batches, from the first, whose copies have completed; never decreases. Stored
    /// (Release) by the publisher once it saw them complete; loaded (Acquire) by the copy
    /// thread (to free host slots) and by [`wait_past`](Self::wait_past).
    done: AtomicU64,
    /// Set (Release) once the publisher can learn no more (a device error, its thread's
    /// end); loaded (Acquire) by `wait_past`, which then ends without the count.
    failed: AtomicBool,
    /// Threads inside `wait_past`: incremented (AcqRel) before they park, decremented
    /// after; loaded (Acquire) by the publisher, which stops napping while it is not zero.
    /// A latency hint only: no ordering rests on it.
    waiting: AtomicUsize,
    /// Where `wait_past` parks; woken by every publish and by `fail`.
    waiters: ParkSlot,
    /// Where the publisher naps between looks at the device ([`nap`](Self::nap)); woken by
    /// a waiter as it arrives, so that its wait is not as long as a nap.
    publisher: ParkSlot,
}

impl CopyCount {
    /// Nothing copied yet.
    pub fn new() -> Self {
        CopyCount {
            done: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            waiters: ParkSlot::new(),
            publisher: ParkSlot::new(),
        }
    }

    /// Batches whose copies have completed (Acquire: the copies before it are done, as far
    /// as the publisher could tell).
    #[inline]
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Acquire)
    }

    /// Whether the publisher failed (and the count will not move again).
    #[inline]
    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Publisher: the copies of batches before `done` have completed. Stores it (Release),
    /// then wakes the waiters. One publisher at a time, with a count that never decreases.
    #[inline]
    pub fn publish(&self, done: u64) {
        self.store(done);
        self.wake();
    }

    /// The store of [`publish`](Self::publish) alone, for a publisher that must store
    /// under a lock of its own and wake after it (the model device). Wake afterwards.
    #[inline]
    pub fn store(&self, done: u64) {
        self.done.store(done, Ordering::Release);
    }

    /// The wake-up of [`publish`](Self::publish) alone: after [`store`](Self::store).
    #[inline]
    pub fn wake(&self) {
        self.waiters.wake();
    }

    /// Publisher: it can learn no more. Every wait ends (Release store, then the wake).
    #[cfg_attr(not(any(feature = "cuda", pinring_loom)), allow(dead_code))]
    pub fn fail(&self) {
        self.failed.store(true, Ordering::Release);
        self.waiters.wake();
    }

    /// Blocks the calling thread, parked (no spin), until the count passes `seq` (true)
    /// or the publisher fails first (false).
    pub fn wait_past(&self, seq: u64) -> bool {
        if self.done() > seq {
            return true;
        }
        self.waiting.fetch_add(1, Ordering::AcqRel);
        self.publisher.wake();
        let waited =
            self.waiters
                .wait(Duration::ZERO, None, || self.done() > seq, || self.failed());
        self.waiting.fetch_sub(1, Ordering::AcqRel);
        waited == Waited::Ready
    }

    /// Publisher: whether a thread waits in [`wait_past`](Self::wait_past) now.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    #[inline]
    pub fn awaited(&self) -> bool {
        self.waiting.load(Ordering::Acquire) > 0
    }

    /// Publisher: pauses for up to `d`, returning early when a thread starts waiting (or
    /// is waiting already). For a publisher that looks at the device now and then.
    #[cfg_attr(not(feature = "cuda"), allow(dead_code))]
    pub fn nap(&self, d: Duration) {
        let deadline = Instant::now().checked_add(d);
        self.publisher
            .wait(Duration::ZERO, deadline, || self.awaited(), || false);
    }
}

impl Default for CopyCount {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CopyCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CopyCount")
            .field("done", &self.done.load(Ordering::Relaxed))
            .field("failed", &self.failed.load(Ordering::Relaxed))
            .finish()
    }
}

#[cfg(all(test, not(pinring_loom)))]
mod tests {
    use std::sync::{mpsc, Arc};
    use std::thread;

    use super::CopyCount;

    /// A waiter parked before the publish is woken by it; one arriving after returns at
    /// once; a count that only reaches the batch does not end the wait.
    #[test]
    fn a_wait_ends_when_the_count_passes_the_batch_and_not_before() {
        let count = Arc::new(CopyCount::new());
        let (parked, waiting) = mpsc::channel();
        let waiter = {
            let count = count.clone();
            thread::spawn(move || {
                parked.send(()).unwrap();
                count.wait_past(1)
            })
        };
        waiting.recv().unwrap();
        count.publish(1); // reaches batch 1, does not pass it: the wait cannot end
        assert!(!waiter.is_finished());
        count.publish(2);
        assert!(waiter.join().unwrap());
        assert!(count.wait_past(0) && count.wait_past(1));
    }

    /// A failure ends every wait with false.
    #[test]
    fn a_failure_ends_the_wait() {
        let count = Arc::new(CopyCount::new());
        let waiter = {
            let count = count.clone();
            thread::spawn(move || count.wait_past(5))
        };
        count.fail();
        assert!(!waiter.join().unwrap());
        assert!(!count.wait_past(5));
    }
}
