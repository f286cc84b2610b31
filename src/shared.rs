//! State shared by the pipeline's threads, its consumer and its leased batches.

use std::time::Instant;

use crate::backend::Backend;
use crate::error::Error;
use crate::host_ring::HostRing;
use crate::park::{ParkSlot, Waited};
use crate::slot::{DeviceSlot, HostSlot};
use crate::stats::Counters;
use crate::sync::{native, AtomicBool, AtomicUsize, Mutex, Ordering, UnsafeCell};

/// What the copy thread hands the consumer through the ready ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Token {
    /// Batch `seq` is in device slot `slot` (its READY event recorded), `samples` samples.
    Batch {
        seq: u64,
        slot: usize,
        samples: usize,
    },
    /// The source ended; no batch follows.
    End,
    /// Building or copying the next batch failed; the error is in [`Shared::failure`].
    Failed,
}

/// Everything the threads share. Lives until the pipeline and every leased batch are gone.
pub(crate) struct Shared<B: Backend> {
    /// The device side. Declared before `ring` so that it drops first: a backend may
    /// hold the ring registered with the device until its own drop.
    pub(crate) backend: B,
    /// std's `Arc` in both builds: backends take it at the device boundary, which models
    /// replace with their own device model.
    pub(crate) ring: native::Arc<HostRing>,
    pub(crate) host: Box<[HostSlot]>,
    pub(crate) device: Box<[DeviceSlot<B::Captured>]>,
    pub(crate) samples_per_batch: usize,
    pub(crate) sample_bytes: usize,
    pub(crate) spin: u32,
    /// Set once (Release) when the pipeline stops; every wait loop reads it (Acquire)
    /// and ends. Paired with a wake of every park slot.
    pub(crate) stop: AtomicBool,
    /// Set once (Release) after a decode failure: the feeder stops pulling samples.
    /// Read (Acquire) by the feeder's waits. The decoder and copy thread do not read it:
    /// they still finish the batches before the failed one.
    pub(crate) halted: AtomicBool,
    /// The failure with the lowest sequence so far. Written before the FAILED stamp is
    /// published; taken by the consumer when it pops the `Failed` token.
    pub(crate) failure: Mutex<Option<(u64, Error)>>,
    pub(crate) feeder: ParkSlot,
    pub(crate) decoder: ParkSlot,
    /// std's `Arc` (as `ring`): shared with the backend's [`CopyWaker`](crate::backend::CopyWaker).
    pub(crate) copier: native::Arc<ParkSlot>,
    pub(crate) consumer: ParkSlot,
    /// Pipeline threads still running (feeder, copy thread, decode workers). Decremented
    /// (Release) as each ends, read (Acquire) by the dropping thread, which parks in
    /// `exits` until it reaches zero or the shutdown timeout passes.
    pub(crate) live: AtomicUsize,
    pub(crate) exits: ParkSlot,
    pub(crate) counters: Counters,
}

// SAFETY: the cells in `host` and `device` are only touched by the owner that the slot's
// stamp names (the slot protocol, ARCHITECTURE.md); everything else is atomics, a mutex
// or the backend, which is `Sync`. `B::Captured: Send` lets a fence move from the releasing
// thread to the copy thread.
unsafe impl<B: Backend> Sync for Shared<B> {}
// SAFETY: as above; all owned data is `Send`.
unsafe impl<B: Backend> Send for Shared<B> {}

impl<B: Backend> Shared<B> {
    /// Fresh state for a pipeline over `ring`: host slot `h` is FREE(h), device slot `d`
    /// is FREE(d), nothing is stopped and no thread is counted yet.
    pub(crate) fn new(
        backend: B,
        ring: native::Arc<HostRing>,
        copier: native::Arc<ParkSlot>,
        device_slots: usize,
        samples_per_batch: usize,
        sample_bytes: usize,
        spin: u32,
    ) -> Self {
        Shared {
            backend,
            host: (0..ring.slots()).map(HostSlot::new).collect(),
            ring,
            device: (0..device_slots).map(DeviceSlot::new).collect(),
            samples_per_batch,
            sample_bytes,
            spin,
            stop: AtomicBool::new(false),
            halted: AtomicBool::new(false),
            failure: Mutex::new(None),
            feeder: ParkSlot::new(),
            decoder: ParkSlot::new(),
            copier,
            consumer: ParkSlot::new(),
            live: AtomicUsize::new(0),
            exits: ParkSlot::new(),
            counters: Counters::new(),
        }
    }

    pub(crate) fn host_slots(&self) -> usize {
        self.host.len()
    }

    pub(crate) fn device_slots(&self) -> usize {
        self.device.len()
    }

    /// Whether the pipeline is stopping (Acquire; pairs with [`stop`](Self::stop)).
    #[inline]
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Whether the feeder must stop (Acquire; pairs with the Release in `fail`).
    #[inline]
    pub(crate) fn halted(&self) -> bool {
        self.halted.load(Ordering::Acquire) || self.stopped()
    }

    /// Stops every stage and wakes every waiter.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        #[cfg(pinring_loom)]
        if crate::loom_api::mutated(crate::loom_api::Mutation::StopWithoutWake) {
            return; // Seeded bug (models only): nobody parked is woken.
        }
        self.wake_all();
    }

    pub(crate) fn wake_all(&self) {
        self.feeder.wake();
        self.decoder.wake();
        self.copier.wake();
        self.consumer.wake();
        self.exits.wake();
    }

    /// Records `error` as the failure of batch `seq` unless an earlier batch failed first.
    pub(crate) fn record_failure(&self, seq: u64, error: Error) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if failure.as_ref().is_none_or(|(s, _)| seq < *s) {
            *failure = Some((seq, error));
        }
    }

    /// Stops the feeder after a decode failure.
    pub(crate) fn halt(&self) {
        self.halted.store(true, Ordering::Release);
        self.feeder.wake();
    }

    /// Spin-then-park on `park` until `ready()`, or the pipeline stops.
    #[inline]
    pub(crate) fn wait(&self, park: &ParkSlot, ready: impl FnMut() -> bool) -> Waited {
        park.wait(self.spin, None, ready, || self.stopped())
    }

    /// As [`wait`](Self::wait), for the feeder: a decode failure also ends the wait.
    #[inline]
    pub(crate) fn wait_unless_halted(
        &self,
        park: &ParkSlot,
        ready: impl FnMut() -> bool,
    ) -> Waited {
        park.wait(self.spin, None, ready, || self.halted())
    }

    /// Called by each pipeline thread as it ends.
    pub(crate) fn thread_exited(&self) {
        self.live.fetch_sub(1, Ordering::Release);
        self.exits.wake();
    }

    /// Waits until every pipeline thread has ended or `deadline` (if any) passes; true if
    /// all ended.
    pub(crate) fn wait_for_exits(&self, deadline: Option<Instant>) -> bool {
        let done = || self.live.load(Ordering::Acquire) == 0;
        self.exits.wait(0, deadline, done, || false) == Waited::Ready
    }
}

/// The samples gathered for each host slot, owned as the slot's stamp says: by the
/// feeder while FILLING, by the decode dispatcher while DECODING.
pub(crate) struct SampleBuffers<S> {
    bufs: Box<[UnsafeCell<Vec<Option<S>>>]>,
}

// SAFETY: buffer `h` is touched only by host slot `h`'s owner under the slot protocol;
// `S: Send` lets samples move from the feeder to the decode workers.
unsafe impl<S: Send> Sync for SampleBuffers<S> {}
// SAFETY: as above.
unsafe impl<S: Send> Send for SampleBuffers<S> {}

impl<S> SampleBuffers<S> {
    pub(crate) fn new(slots: usize, samples_per_batch: usize) -> Self {
        SampleBuffers {
            bufs: (0..slots)
                .map(|_| UnsafeCell::new(Vec::with_capacity(samples_per_batch)))
                .collect(),
        }
    }

    /// Runs `f` on buffer `h`.
    ///
    /// # Safety
    /// The caller owns host slot `h` (its stamp is FILLING for the feeder, DECODING for
    /// the decode dispatcher) for the whole call.
    pub(crate) unsafe fn with_mut<R>(
        &self,
        h: usize,
        f: impl FnOnce(&mut Vec<Option<S>>) -> R,
    ) -> R {
        self.bufs[h].with_mut(|p| {
            // SAFETY: the caller owns slot h, so no other reference to buffer h exists.
            f(unsafe { &mut *p })
        })
    }
}
