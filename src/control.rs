//! What every stage shares besides the slots: stop and failure, the park slots, thread
//! accounting and the statistics.

use std::time::Duration;

use crate::error::Error;
use crate::park::{ParkSlot, Waited};
use crate::stats::Counters;
use crate::sync::{native, AtomicBool, AtomicU64, AtomicUsize, Instant, Mutex, Ordering};
use crate::trace::{Kind, Trace, Track};

/// Stop, failure, wake-ups and thread accounting of one pipeline. Lives as long as any
/// stage, the pipeline or a leased batch.
#[derive(Debug)]
pub(crate) struct Control {
    /// Set once (Release) when the pipeline stops; every wait loop reads it (Acquire) and
    /// ends. Paired with a wake of every park slot.
    stop: AtomicBool,
    /// The first batch that will not be built: `u64::MAX` until the source ends or a batch
    /// fails. Lowered (`fetch_min`, AcqRel) by the feeder at END/FAILED, by a decode
    /// worker at FAILED and by the copy thread when the backend fails; read (Acquire) by the feeder and the decode workers, which stop
    /// there. The copy thread does not read it: it stops at the END/FAILED stamp itself,
    /// after delivering every batch before it.
    limit: AtomicU64,
    /// The failure with the lowest sequence so far. Written before the FAILED stamp (or the
    /// Failed token) is published; taken by the consumer when it pops the Failed token.
    failure: Mutex<Option<(u64, Error)>>,
    /// The feeder waits here for a free host slot.
    pub(crate) feeder: ParkSlot,
    /// The decode workers wait here for gathered batches: one slot per host slot, so that
    /// handing a batch to the decoders wakes only the workers that claimed its items.
    decoders: Box<[ParkSlot]>,
    /// The copy thread waits here for filled batches, releases and copy completions.
    /// std's `Arc` in both builds: shared with the backend's [`CopyWaker`](crate::backend::CopyWaker).
    pub(crate) copier: native::Arc<ParkSlot>,
    /// The consumer waits here for tokens.
    pub(crate) consumer: ParkSlot,
    /// The dropping thread waits here for the pipeline's threads to end.
    exits: ParkSlot,
    /// Pipeline threads running (feeder, copy thread, decode workers). Incremented
    /// (Relaxed) as each starts, decremented (Release) as each ends; read (Acquire) by
    /// the dropping thread.
    live: AtomicUsize,
    /// How long a waiter spins before it parks.
    spin: Duration,
    pub(crate) counters: Counters,
    /// The timeline, when tracing is on (see [`crate::trace`]).
    pub(crate) trace: Option<native::Arc<Trace>>,
}

impl Control {
    pub(crate) fn new(
        copier: native::Arc<ParkSlot>,
        spin: Duration,
        host_slots: usize,
        decode_threads: usize,
        trace: Option<native::Arc<Trace>>,
    ) -> Self {
        Control {
            stop: AtomicBool::new(false),
            limit: AtomicU64::new(u64::MAX),
            failure: Mutex::new(None),
            feeder: ParkSlot::new(),
            decoders: (0..host_slots)
                .map(|_| ParkSlot::with_room(decode_threads))
                .collect(),
            copier,
            consumer: ParkSlot::new(),
            exits: ParkSlot::new(),
            live: AtomicUsize::new(0),
            spin,
            counters: Counters::new(),
            trace,
        }
    }

    /// The trace clock's now, when tracing is on: the start of a span.
    #[inline]
    pub(crate) fn span_start(&self) -> Option<u64> {
        self.trace.as_ref().map(|t| t.now())
    }

    /// Records a span from `start` (a [`span_start`](Self::span_start)) to now.
    #[inline]
    pub(crate) fn span(&self, start: Option<u64>, kind: Kind, track: Track, seq: u64, arg: u32) {
        if let (Some(trace), Some(start)) = (&self.trace, start) {
            trace.span(kind, track, seq, arg, start);
        }
    }

    /// Records an instant at now, when tracing is on.
    #[inline]
    pub(crate) fn instant(&self, kind: Kind, track: Track, seq: u64, arg: u32) {
        if let Some(trace) = &self.trace {
            trace.instant(kind, track, seq, arg);
        }
    }

    /// Whether the pipeline is stopping (Acquire; pairs with [`stop`](Self::stop)).
    #[inline]
    pub(crate) fn stopped(&self) -> bool {
        self.stop.load(Ordering::Acquire)
    }

    /// Where the decode workers that claimed items of batch `k` wait for it.
    #[inline]
    pub(crate) fn decoders(&self, k: u64) -> &ParkSlot {
        &self.decoders[(k % self.decoders.len() as u64) as usize]
    }

    fn wake_decoders(&self) {
        self.decoders.iter().for_each(ParkSlot::wake);
    }

    /// Stops every stage and wakes every waiter. Idempotent.
    pub(crate) fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.feeder.wake();
        self.wake_decoders();
        self.copier.wake();
        self.consumer.wake();
        self.exits.wake();
    }

    /// The first batch that will not be built (Acquire; see `limit`).
    #[inline]
    pub(crate) fn limit(&self) -> u64 {
        self.limit.load(Ordering::Acquire)
    }

    /// No batch at or after `seq` will be built: the feeder and the decode workers stop
    /// there, and are woken to see it.
    pub(crate) fn limit_to(&self, seq: u64) {
        self.limit.fetch_min(seq, Ordering::AcqRel);
        self.feeder.wake();
        self.wake_decoders();
    }

    /// Records `error` as the failure of batch `seq` unless an earlier batch failed first.
    pub(crate) fn record_failure(&self, seq: u64, error: Error) {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        if failure.as_ref().is_none_or(|(s, _)| seq < *s) {
            *failure = Some((seq, error));
        }
    }

    /// Takes the recorded failure, if any.
    pub(crate) fn take_failure(&self) -> Option<Error> {
        let mut failure = self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.take().map(|(_, e)| e)
    }

    /// The configured spin time.
    pub(crate) fn spin(&self) -> Duration {
        self.spin
    }

    /// Waits on `park` until `ready()`, the pipeline stops, or `ends()` (checked after
    /// `ready`).
    #[inline]
    pub(crate) fn wait_unless(
        &self,
        park: &ParkSlot,
        ready: impl FnMut() -> bool,
        mut ends: impl FnMut() -> bool,
    ) -> Waited {
        park.wait(self.spin, None, ready, || self.stopped() || ends())
    }

    /// Counts a pipeline thread in (as it starts).
    pub(crate) fn thread_started(&self) {
        self.live.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a pipeline thread out (as it ends).
    pub(crate) fn thread_exited(&self) {
        self.live.fetch_sub(1, Ordering::Release);
        self.exits.wake();
    }

    /// Waits until every pipeline thread has ended or `deadline` (if any) passes; true if
    /// all ended.
    pub(crate) fn wait_for_exits(&self, deadline: Option<Instant>) -> bool {
        let done = || self.live.load(Ordering::Acquire) == 0;
        self.exits.wait(Duration::ZERO, deadline, done, || false) == Waited::Ready
    }
}
