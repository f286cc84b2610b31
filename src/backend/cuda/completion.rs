//! How the cuda backend learns that copies completed without polling: a thread of its own
//! (`pinring-complete`) waits in the driver on the completion events, which are created
//! with `CU_EVENT_BLOCKING_SYNC` so that the wait parks the thread (no spin), and wakes the
//! copy thread when one completes.
//!
//! After each run of copies the copy thread records the run's last host slot's COPIED
//! event, then publishes the run's end in `recorded` (Release). The completion thread
//! Acquire-loads `recorded`, synchronizes on the latest COPIED record (`cuEventSynchronize`:
//! the stream runs in order, so every earlier copy is done too), publishes that end in
//! `completed` (Release) and wakes the copy thread, which frees host slots up to it. The
//! completion thread never synchronizes on an event before its record is made (it reads
//! `recorded` first), and a host slot's COPIED event is recorded again only after the slot
//! was freed, which needs `completed` past it: so each synchronize waits for exactly the
//! record it means. When nothing is in flight it parks.

use std::fmt;

use cudarc::driver::result;
use cudarc::driver::sys::{CUcontext, CUevent};

use crate::backend::private::CopyWaker;
use crate::error::{Error, Result};
use crate::park::ParkSlot;
use crate::sync::native::{Arc, AtomicBool, AtomicU64, Builder, JoinHandle, Mutex, Ordering};

use super::driver;

/// What the copy thread and the completion thread share.
struct Shared {
    /// Batches whose copies are enqueued with their completion point recorded. Stored
    /// (Release) by the copy thread after the record; loaded (Acquire) by the completion
    /// thread before it synchronizes.
    recorded: AtomicU64,
    /// The host slot whose COPIED event marks `recorded`'s last batch. Written (Relaxed)
    /// before the Release store of `recorded`, read after its Acquire load: it is that
    /// run's slot or a later run's (recorded later still), so the wait on it is never
    /// shorter than the one meant, only sometimes longer.
    last_slot: AtomicU64,
    /// Batches whose copies have completed. Stored (Release) by the completion thread after
    /// its synchronize returns; loaded (Acquire) by the copy thread.
    completed: AtomicU64,
    /// Set (Release) by the backend's teardown; read (Acquire) by the completion thread.
    stop: AtomicBool,
    /// A failed synchronize, reported to the copy thread.
    failure: Mutex<Option<Error>>,
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
    /// Starts the completion thread over the COPIED events `copied` of context `ctx`.
    pub(super) fn start(ctx: CUcontext, copied: Vec<CUevent>, waker: CopyWaker) -> Result<Self> {
        let shared = Arc::new(Shared {
            recorded: AtomicU64::new(0),
            last_slot: AtomicU64::new(0),
            completed: AtomicU64::new(0),
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
                let events = events;
                run(&thread_shared, raw_ctx as CUcontext, &events.0, &waker);
            })
            .map_err(|e| Error::Spawn {
                thread: "cuda completion thread",
                source: Box::new(e),
            })?;
        Ok(Completion {
            shared,
            thread: Some(thread),
        })
    }

    /// Copy thread: the copies of batches before `end` are enqueued, the last one's
    /// completion recorded in host slot `h`'s COPIED event.
    pub(super) fn recorded(&self, end: u64, h: usize) {
        let shared = &*self.shared;
        shared.last_slot.store(h as u64, Ordering::Relaxed);
        // Release: the record (and `last_slot`) happen-before the completion thread's wait.
        shared.recorded.store(end, Ordering::Release);
        shared.park.wake();
    }

    /// Copy thread: batches whose copies have completed.
    pub(super) fn completed(&self) -> Result<u64> {
        let shared = &*self.shared;
        if let Some(error) = shared
            .failure
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            return Err(error);
        }
        // Acquire: pairs with the completion thread's Release store after its wait.
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

fn run(shared: &Shared, ctx: CUcontext, copied: &[CUevent], waker: &CopyWaker) {
    // The completion thread is the backend's: its context stays bound.
    // SAFETY: the backend's live context (it outlives this thread, or is leaked with it).
    if unsafe { result::ctx::set_current(ctx) }.is_err() {
        return;
    }
    let mut done = 0u64;
    loop {
        let mut recorded = 0;
        shared.park.wait(
            std::time::Duration::ZERO,
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
        let h = shared.last_slot.load(Ordering::Relaxed) as usize;
        // SAFETY: a live event of the backend, recorded (for batch `recorded - 1`) before
        // the Release store of `recorded` loaded above; it is not recorded again until the
        // copy thread saw `completed` pass that batch, which is stored below.
        if let Err(e) = unsafe { result::event::synchronize(copied[h]) } {
            *shared.failure.lock().unwrap_or_else(|e| e.into_inner()) =
                Some(driver::error("cuEventSynchronize", e, ""));
            waker.wake();
            return;
        }
        done = recorded;
        // Release: the copies before `done` are complete; pairs with `completed`'s Acquire.
        shared.completed.store(done, Ordering::Release);
        waker.wake();
    }
}
