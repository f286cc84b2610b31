//! How the cuda backend learns that copies completed without polling from the copy
//! thread: a thread of its own (`pinring-complete`) follows the copies in order, publishes
//! the copy count and wakes the copy thread and any `Batch::synchronize` parked on it.
//!
//! Copies go in runs of consecutive batches (host slots `h..h + n`). After a run the copy
//! thread records ONE event, COPIED(h) of the run's first host slot, writes the run's end
//! in `run_end[h]` and then publishes it in `recorded` (Release). The completion thread
//! Acquire-loads `recorded` and walks the runs from the first not yet complete (`done`,
//! always a run's start): it reads the run's end from `run_end[done % H]`, queries COPIED
//! and steps over the runs that completed; at the first that has not, it waits in three
//! phases: it spins on the query for [`SPIN`] (300 µs: a run of small batches' copy), then
//! naps between queries ([`NAP_FIRST`] doubling up to [`NAP_MAX`], for [`NAPS_UNTIL`] in
//! all), then waits in the driver: its own stream waits (stream-side) for the run's COPIED
//! record, it records its own event PARKED there, created with `CU_EVENT_BLOCKING_SYNC`,
//! and `cuEventSynchronize` on PARKED parks the thread instead of spinning. COPIED itself
//! is a plain event: recording a blocking-sync event behind queued copies costs the copy
//! thread about 2 µs a run, and while it did, the consumer's own driver calls (its
//! `wait_on` and its release's record) took 4.6–7.0 µs a batch in a third of the small
//! workload's passes, against 1.4–3.8 µs in the rest (ARCHITECTURE.md §7, "Why COPIED is
//! plain"); PARKED is recorded only by a wait that has already lasted [`SPIN`] and
//! [`NAPS_UNTIL`], or that a `synchronize` awaits. While a
//! `Batch::synchronize` waits, it skips the naps (a waiter arriving mid-nap cuts the nap
//! short): the driver's wait wakes it as the copy lands, not up to a nap later. Each time
//! it steps past runs it publishes their end in the [`CopyCount`] (a Release store, then
//! the waiters' wake-up) and wakes the copy thread, which frees their host slots.
//!
//! Ordering: the completion thread never looks at a run's `run_end` entry or event before
//! reading `recorded` past the run's start (so the entry and the record it looks at are
//! that run's), and a host slot's `run_end` entry and COPIED event are written again only
//! by a run that starts there after the slot was freed, which needs the count past it:
//! each query or wait is on exactly the record it means. One record per run (not per
//! batch) keeps the copy thread's cost per batch to the batch's READY record, a plain
//! event. When nothing is in flight the completion thread parks.

use std::fmt;
use std::time::{Duration, Instant};

use cudarc::driver::result;
use cudarc::driver::sys::{CUcontext, CUevent, CUevent_wait_flags, CUresult, CUstream};
use cudarc::driver::DriverError;

use crate::backend::contract::CopyWaker;
use crate::backend::copy_count::CopyCount;
use crate::error::{Error, Result};
use crate::park::ParkSlot;
use crate::slot::index::HostIdx;
use crate::sync::native::{Arc, AtomicBool, AtomicU64, Builder, JoinHandle, Mutex, Ordering};

use super::driver;

/// How long the completion thread spins on a copy (phase 1): about a run of small batches'
/// copy, so that a steady stream of them is followed without a wake-up per run.
const SPIN: Duration = Duration::from_micros(300);

/// The first nap of phase 2 (each next one doubles, up to [`NAP_MAX`]).
const NAP_FIRST: Duration = Duration::from_micros(20);
/// The longest nap of phase 2.
const NAP_MAX: Duration = Duration::from_micros(200);
/// How long phase 2 lasts before the completion thread waits in the driver (phase 3).
const NAPS_UNTIL: Duration = Duration::from_millis(2);

/// How long the spin waits between two queries: each query takes the driver's locks, which
/// the copy thread's and the consumer's calls need too.
const QUERY_EVERY: Duration = Duration::from_micros(2);

/// A driver call of the completion thread's that failed: its name and its error.
type Failed = (&'static str, DriverError);

/// What the copy thread and the completion thread share.
struct Shared {
    /// Batches whose copies are enqueued with their runs' COPIED points recorded. Stored
    /// (Release) by the copy thread after the record and `run_end`; loaded (Acquire) by the
    /// completion thread before it looks at either.
    recorded: AtomicU64,
    /// The end (sequence after the last batch) of the run that starts at each host slot.
    /// Written (Relaxed) by the copy thread before its Release store of `recorded`, read
    /// (Relaxed) by the completion thread after its Acquire load of it.
    run_end: Box<[AtomicU64]>,
    /// Batches whose copies have completed: published by the completion thread after it
    /// saw their events complete; read by the copy thread, waited on by
    /// `Batch::synchronize`. It fails (Release) after `failure` is stored, and once the
    /// thread ends for any reason, so that no wait outlives it.
    count: CopyCount,
    /// Set (Release) by the backend's teardown; read (Acquire) by the completion thread.
    stop: AtomicBool,
    /// A failed call, named (a sticky device error), reported to the copy thread and to
    /// `synchronize` on every call from then on; stored before the count fails.
    failure: Mutex<Option<Failed>>,
    /// The completion thread parks here while nothing is in flight.
    park: ParkSlot,
}

/// The completion side of one cuda backend.
pub(super) struct Completion {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl fmt::Debug for Completion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Completion")
            .field("recorded", &self.shared.recorded.load(Ordering::Relaxed))
            .field("count", &self.shared.count)
            .finish()
    }
}

/// The raw COPIED events, for the completion thread (they outlive it: the backend joins it
/// before it frees them, or leaks both).
struct Events(Vec<CUevent>);

// SAFETY: event handles are driver handles, usable from any thread.
unsafe impl Send for Events {}

/// What the completion thread waits in the driver with (phase 3): a stream of its own and
/// PARKED, a blocking-sync event recorded only there. Both are the backend's and outlive
/// the thread as the COPIED events do; only the completion thread uses them.
#[derive(Clone, Copy)]
pub(super) struct Parking {
    pub(super) stream: CUstream,
    pub(super) parked: CUevent,
}

// SAFETY: stream and event handles are driver handles, usable from any thread.
unsafe impl Send for Parking {}

impl Completion {
    /// Starts the completion thread over the COPIED events `copied` (one per host slot) of
    /// context `ctx`, waiting in the driver with `parking`.
    /// `batch`: the thread runs as `SCHED_BATCH` (src/thread_policy.rs).
    pub(super) fn start(
        ctx: CUcontext,
        copied: Vec<CUevent>,
        parking: Parking,
        waker: CopyWaker,
        batch: bool,
    ) -> Result<Self> {
        let shared = Arc::new(Shared {
            recorded: AtomicU64::new(0),
            run_end: copied.iter().map(|_| AtomicU64::new(0)).collect(),
            count: CopyCount::new(),
            stop: AtomicBool::new(false),
            failure: Mutex::new(None),
            park: ParkSlot::new(),
        });
        let events = Events(copied);
        let thread_shared = shared.clone();
        let raw_ctx = ctx as usize;
        let thread = Builder::new()
            .name("pinring-complete".into())
            .spawn(move || {
                let (events, parking) = (events, parking);
                crate::thread_policy::yield_at_wakeup(batch);
                run(
                    &thread_shared,
                    raw_ctx as CUcontext,
                    &events.0,
                    parking,
                    &waker,
                );
                // However the thread ends, no wait on the count outlives it.
                thread_shared.count.fail();
            })
            .map_err(|e| crate::error::Error::Spawn {
                thread: "cuda completion thread",
                source: Box::new(e),
            })?;
        Ok(Completion {
            shared,
            thread: Some(thread),
        })
    }

    /// Copy thread: the run that starts at host slot `first` is enqueued up to batch `end`
    /// (exclusive), with its COPIED record.
    pub(super) fn recorded(&self, first: HostIdx, end: u64) {
        let shared = &*self.shared;
        shared.run_end[first.0].store(end, Ordering::Relaxed);
        // Release: the record and `run_end` happen-before the completion thread looks at
        // them.
        shared.recorded.store(end, Ordering::Release);
        shared.park.wake();
    }

    /// Copy thread: batches whose copies have completed, or the device error that stopped
    /// the completion thread.
    pub(super) fn completed(&self) -> Result<u64> {
        let shared = &*self.shared;
        if shared.count.failed()
            && let Some(error) = shared.error()
        {
            return Err(error);
        }
        // Acquire: pairs with the completion thread's Release store.
        Ok(shared.count.done())
    }

    /// Lease holder (`Batch::wait_on`): whether the copy of batch `seq` has completed, as
    /// far as the completion thread has seen (Acquire: pairs with its Release store of the
    /// count, made after it saw the run's COPIED record complete).
    #[inline]
    pub(super) fn passed(&self, seq: u64) -> bool {
        self.shared.count.done() > seq
    }

    /// Lease holder (`Batch::synchronize`): parks until the copy of batch `seq` has
    /// completed. Every batch handed out had its run's COPIED record published in
    /// `recorded` before its token was pushed, so the completion thread reaches it unless
    /// the device fails (then the device's error) or the thread ends.
    pub(super) fn wait_past(&self, seq: u64) -> Result<()> {
        let shared = &*self.shared;
        if shared.count.wait_past(seq) {
            return Ok(());
        }
        Err(shared.error().unwrap_or(Error::Internal(
            "the cuda completion thread ended before a batch's copy completed",
        )))
    }

    /// Teardown: ends the completion thread. `join` waits for it (the copies are done, so
    /// it is not blocked in the driver); otherwise it is left to end on its own.
    pub(super) fn stop(&mut self, join: bool) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.park.wake();
        if let Some(thread) = self.thread.take()
            && join
        {
            let _ = thread.join();
        }
    }
}

impl Shared {
    /// The device error that stopped the completion thread, if one did.
    fn error(&self) -> Option<Error> {
        let failure = *self.failure.lock().unwrap_or_else(|e| e.into_inner());
        failure.map(|(call, e)| {
            driver::error(
                call,
                e,
                "the call of the cuda backend's copy completion thread",
            )
        })
    }
}

impl Drop for Completion {
    /// A completion that was not stopped (an open that failed after it started): stops
    /// the thread and joins it. Nothing was recorded, so it is parked, not in the driver.
    fn drop(&mut self) {
        self.stop(true);
    }
}

/// Phase 1: whether `event` completed within [`SPIN`].
fn spin(event: CUevent) -> std::result::Result<bool, Failed> {
    let start = Instant::now();
    loop {
        if query(event)? {
            return Ok(true);
        }
        if start.elapsed() >= SPIN {
            return Ok(false);
        }
        pause(QUERY_EVERY);
    }
}

/// Phases 2 and 3: returns once `event` has completed. Phase 2 is skipped, or cut short,
/// while a `Batch::synchronize` waits on `count`: the driver's wait then wakes this
/// thread as the copy lands, not up to a nap later.
fn nap_then_block(
    event: CUevent,
    parking: Parking,
    count: &CopyCount,
) -> std::result::Result<(), Failed> {
    let start = Instant::now();
    let mut nap = NAP_FIRST;
    while start.elapsed() < NAPS_UNTIL && !count.awaited() {
        count.nap(nap);
        if query(event)? {
            return Ok(());
        }
        nap = (nap * 2).min(NAP_MAX);
    }
    // SAFETY: live handles of the backend, of the context bound on this thread; `parking`
    // is this thread's alone. The stream waits for `event`'s record as it stands: the run's
    // (not recorded again before the count passes the run).
    unsafe {
        result::stream::wait_event(
            parking.stream,
            event,
            CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
        )
    }
    .map_err(|e| ("cuStreamWaitEvent", e))?;
    // SAFETY: as above. PARKED, recorded behind that wait, completes once the run's copy
    // has, and no later.
    unsafe { result::event::record(parking.parked, parking.stream) }
        .map_err(|e| ("cuEventRecord", e))?;
    // SAFETY: as above; a blocking-sync event parks this thread until it completes.
    unsafe { result::event::synchronize(parking.parked) }.map_err(|e| ("cuEventSynchronize", e))
}

/// Spins for `d` without calling into the driver.
fn pause(d: Duration) {
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Whether `event`'s latest record has completed.
fn query(event: CUevent) -> std::result::Result<bool, Failed> {
    // SAFETY: a live event of the backend (a query needs no current context).
    match unsafe { result::event::query(event) } {
        Ok(()) => Ok(true),
        Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        Err(e) => Err(("cuEventQuery", e)),
    }
}

fn run(shared: &Shared, ctx: CUcontext, copied: &[CUevent], parking: Parking, waker: &CopyWaker) {
    // The completion thread is the backend's: its context stays bound.
    let fail = |failed: Failed| {
        *shared.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(failed);
        // Release (in `fail`): the error is stored before a reader sees the count failed.
        shared.count.fail();
        waker.wake();
    };
    // SAFETY: the backend's live context (it outlives this thread, or is leaked with it).
    if let Err(e) = unsafe { result::ctx::set_current(ctx) } {
        // No copy could be followed: the copy thread must hear it, not wait forever.
        fail(("cuCtxSetCurrent", e));
        return;
    }
    let slots = copied.len() as u64;
    let mut done = 0u64;
    loop {
        let mut recorded = 0;
        shared.park.wait(
            Duration::ZERO,
            None,
            || {
                recorded = shared.recorded.load(Ordering::Acquire);
                recorded > done
            },
            || shared.stop.load(Ordering::Acquire),
        );
        if recorded <= done {
            return; // stopped
        }
        while done < recorded {
            // The run starting at `done` was published before `recorded` passed it
            // (Acquire above), and its entry and record are not rewritten before
            // `completed` passes it (below).
            let slot = (done % slots) as usize;
            let (event, end) = (copied[slot], shared.run_end[slot].load(Ordering::Relaxed));
            let complete = match spin(event) {
                Ok(complete) => complete,
                Err(e) => return fail(e),
            };
            if !complete {
                // Tell the copy thread what completed so far, then wait longer.
                shared.count.publish(done);
                waker.wake();
                if let Err(e) = nap_then_block(event, parking, &shared.count) {
                    return fail(e);
                }
            }
            done = end;
            // Step over every later run already complete before publishing.
            while done < recorded {
                let slot = (done % slots) as usize;
                match query(copied[slot]) {
                    Ok(true) => done = shared.run_end[slot].load(Ordering::Relaxed),
                    Ok(false) => break,
                    Err(e) => return fail(e),
                }
            }
            // Release: the copies before `done` are complete; pairs with the count's
            // Acquire in the copy thread and in `Batch::synchronize`, whose waiters the
            // publish wakes.
            shared.count.publish(done);
            waker.wake();
        }
    }
}
