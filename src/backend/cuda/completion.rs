//! How the cuda backend learns that copies completed without polling from the copy
//! thread: a thread of its own (`pinring-complete`) follows the copies in order and wakes
//! the copy thread as each completes.
//!
//! The copy thread records host slot `h`'s COPIED event after the copy of each batch out of
//! it, then publishes the run's end in `recorded` (Release). The completion thread
//! Acquire-loads `recorded` and walks the batches from the first not yet complete: it
//! queries each one's COPIED event and steps over those that completed; at the first that
//! has not, it spins on the query for a few tens of µs (a copy of a small batch takes that
//! long), then waits in the driver (`cuEventSynchronize` on an event created with
//! `CU_EVENT_BLOCKING_SYNC`, which parks the thread instead of spinning). Each time it
//! steps past batches it publishes their end in `completed` (Release) and wakes the copy
//! thread, which frees their host slots. Ordering: the completion thread never looks at a
//! batch's event before reading `recorded` past it (so the record it looks at is that
//! batch's), and a host slot's COPIED event is recorded again only after the slot was freed,
//! which needs `completed` past it: each query or wait is on exactly the record it means.
//! When nothing is in flight it parks.

use std::fmt;
use std::time::{Duration, Instant};

use cudarc::driver::result;
use cudarc::driver::sys::{CUcontext, CUevent, CUresult};
use cudarc::driver::DriverError;

use crate::backend::private::CopyWaker;
use crate::error::Result;
use crate::park::ParkSlot;
use crate::sync::native::{Arc, AtomicBool, AtomicU64, Builder, JoinHandle, Mutex, Ordering};

use super::driver;

/// How long the completion thread spins on a copy before it waits in the driver: about a
/// small batch's copy, so that a steady stream of them is followed without a driver wake-up
/// per batch, and an idle pipeline costs nothing.
const SPIN: Duration = Duration::from_micros(40);

/// What the copy thread and the completion thread share.
struct Shared {
    /// Batches whose copies are enqueued with their COPIED points recorded. Stored
    /// (Release) by the copy thread after the records; loaded (Acquire) by the completion
    /// thread before it looks at their events.
    recorded: AtomicU64,
    /// Batches whose copies have completed. Stored (Release) by the completion thread after
    /// it saw their events complete; loaded (Acquire) by the copy thread.
    completed: AtomicU64,
    /// Set (Release) by the backend's teardown; read (Acquire) by the completion thread.
    stop: AtomicBool,
    /// Whether `failure` holds an error: set (Release) after it is stored, read (Acquire)
    /// by the copy thread before it looks at it.
    failed: AtomicBool,
    /// A failed query or wait (a sticky device error), reported to the copy thread on every
    /// call from then on.
    failure: Mutex<Option<DriverError>>,
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
            .field("completed", &self.shared.completed.load(Ordering::Relaxed))
            .finish()
    }
}

/// The raw COPIED events, for the completion thread (they outlive it: the backend joins it
/// before it frees them, or leaks both).
struct Events(Vec<CUevent>);

// SAFETY: event handles are driver handles, usable from any thread.
unsafe impl Send for Events {}

impl Completion {
    /// Starts the completion thread over the COPIED events `copied` (one per host slot) of
    /// context `ctx`.
    pub(super) fn start(ctx: CUcontext, copied: Vec<CUevent>, waker: CopyWaker) -> Result<Self> {
        let shared = Arc::new(Shared {
            recorded: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            failure: Mutex::new(None),
            park: ParkSlot::new(),
        });
        let events = Events(copied);
        let thread_shared = shared.clone();
        let raw_ctx = ctx as usize;
        let thread = Builder::new()
            .name("pinring-complete".into())
            .spawn(move || {
                let events = events;
                run(&thread_shared, raw_ctx as CUcontext, &events.0, &waker);
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

    /// Copy thread: the copies of batches before `end` are enqueued, each with its COPIED
    /// record.
    pub(super) fn recorded(&self, end: u64) {
        // Release: the records happen-before the completion thread looks at them.
        self.shared.recorded.store(end, Ordering::Release);
        self.shared.park.wake();
    }

    /// Copy thread: batches whose copies have completed, or the device error that stopped
    /// the completion thread.
    pub(super) fn completed(&self) -> Result<u64> {
        let shared = &*self.shared;
        if shared.failed.load(Ordering::Acquire) {
            if let Some(e) = *shared.failure.lock().unwrap_or_else(|e| e.into_inner()) {
                return Err(driver::error("cuEventQuery", e, ""));
            }
        }
        // Acquire: pairs with the completion thread's Release store.
        Ok(shared.completed.load(Ordering::Acquire))
    }

    /// Teardown: ends the completion thread. `join` waits for it (the copies are done, so
    /// it is not blocked in the driver); otherwise it is left to end on its own.
    pub(super) fn stop(&mut self, join: bool) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.park.wake();
        if let Some(thread) = self.thread.take() {
            if join {
                let _ = thread.join();
            }
        }
    }
}

/// Whether `event`'s latest record has completed.
fn query(event: CUevent) -> std::result::Result<bool, DriverError> {
    // SAFETY: a live event of the backend (a query needs no current context).
    match unsafe { result::event::query(event) } {
        Ok(()) => Ok(true),
        Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_READY => Ok(false),
        Err(e) => Err(e),
    }
}

fn run(shared: &Shared, ctx: CUcontext, copied: &[CUevent], waker: &CopyWaker) {
    // The completion thread is the backend's: its context stays bound.
    // SAFETY: the backend's live context (it outlives this thread, or is leaked with it).
    if unsafe { result::ctx::set_current(ctx) }.is_err() {
        return;
    }
    let slots = copied.len() as u64;
    let mut done = 0u64;
    let fail = |e: DriverError| {
        *shared.failure.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
        shared.failed.store(true, Ordering::Release);
        waker.wake();
    };
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
            // Batch `done`'s COPIED record was made before `recorded` passed it (Acquire
            // above), and is not made again before `completed` passes it (below).
            let event = copied[(done % slots) as usize];
            let start = Instant::now();
            let complete = loop {
                match query(event) {
                    Ok(true) => break true,
                    Ok(false) if start.elapsed() < SPIN => std::hint::spin_loop(),
                    Ok(false) => break false,
                    Err(e) => return fail(e),
                }
            };
            if !complete {
                // Tell the copy thread what completed so far, then wait in the driver.
                shared.completed.store(done, Ordering::Release);
                waker.wake();
                // SAFETY: as above; a blocking-sync event parks this thread until then.
                if let Err(e) = unsafe { result::event::synchronize(event) } {
                    return fail(e);
                }
            }
            done += 1;
            // Step over every later batch already complete before publishing.
            while done < recorded {
                match query(copied[(done % slots) as usize]) {
                    Ok(true) => done += 1,
                    Ok(false) => break,
                    Err(e) => return fail(e),
                }
            }
            // Release: the copies before `done` are complete; pairs with `completed`'s
            // Acquire in the copy thread.
            shared.completed.store(done, Ordering::Release);
            waker.wake();
        }
    }
}
