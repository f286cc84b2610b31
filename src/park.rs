//! Spin-then-park waiting for one waiting role, and its wake-up.
//!
//! Each stage that waits (feeder, decoder, copy thread, consumer) has one [`ParkSlot`].
//! The waiter spins on its condition for the configured budget, then announces that it
//! sleeps and parks; whoever makes the condition true calls [`ParkSlot::wake`]. Of the
//! budget's checks, the first `PAUSES` are separated by a spin-loop hint and the rest by
//! a yield: where the pipeline's threads outnumber the cores, a waiter that only paused
//! would hold the core the thread it waits for needs (on 2 cores that made a cpu-backend
//! pipeline of tiny batches about 20 times slower); on an idle core a yield returns at once.
//!
//! No wake-up is lost: the waiter's `sleeping.swap(true, AcqRel)` and the waker's
//! `sleeping.swap(false, AcqRel)` are read-modify-writes of one location, so one of them is
//! first in its modification order. If the waker's swap is first, the waiter's swap reads
//! from it and acquires everything the waker published before it — the waiter's re-check
//! then sees the condition. If the waiter's swap is first, the waker reads `true` and
//! unparks it. A stale unpark only makes a later `park` return early, and every waiter
//! re-checks its condition in a loop.

use std::time::Instant;

use crate::sync::{
    current, park, park_timeout, spin_loop, yield_now, AtomicBool, Mutex, Ordering, Thread,
};

/// Checks of a spin separated by a spin-loop hint; later checks are separated by a yield.
const PAUSES: u32 = 64;

/// Where one waiting thread parks.
#[derive(Debug)]
pub(crate) struct ParkSlot {
    /// `true` from just before the waiter's last re-check until a waker takes it.
    /// AcqRel swaps on both sides pair with each other (see the module docs).
    sleeping: AtomicBool,
    /// The thread to unpark. Locked only on the slow path (waiter about to park, or a waker
    /// that found `sleeping`).
    thread: Mutex<Option<Thread>>,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// The condition held.
    Ready,
    /// The deadline passed first.
    TimedOut,
    /// The pipeline is stopping.
    Stopped,
}

impl ParkSlot {
    pub(crate) fn new() -> Self {
        ParkSlot {
            sleeping: AtomicBool::new(false),
            thread: Mutex::new(None),
        }
    }

    /// Waits until `ready()` or `stopped()` is true, or `deadline` passes.
    ///
    /// `ready` and `stopped` must read with Acquire what the waker published with Release
    /// before calling [`wake`](Self::wake). `spin` is the number of checks before parking.
    pub(crate) fn wait(
        &self,
        spin: u32,
        deadline: Option<Instant>,
        mut ready: impl FnMut() -> bool,
        mut stopped: impl FnMut() -> bool,
    ) -> Waited {
        for i in 0..spin {
            if ready() {
                return Waited::Ready;
            }
            if stopped() {
                return Waited::Stopped;
            }
            if i < PAUSES {
                spin_loop();
            } else {
                yield_now();
            }
        }
        self.register();
        loop {
            if ready() {
                return Waited::Ready;
            }
            if stopped() {
                return Waited::Stopped;
            }
            // AcqRel: pairs with the waker's swap (module docs).
            self.sleeping.swap(true, Ordering::AcqRel);
            if ready() {
                return Waited::Ready;
            }
            if stopped() {
                return Waited::Stopped;
            }
            match deadline {
                None => park(),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Waited::TimedOut;
                    }
                    park_timeout(d - now);
                }
            }
        }
    }

    /// Wakes the waiter if it parks or is about to. Call after publishing (Release) what
    /// the waiter's condition reads.
    #[inline]
    pub(crate) fn wake(&self) {
        // AcqRel: pairs with the waiter's swap (module docs).
        if self.sleeping.swap(false, Ordering::AcqRel) {
            let guard = self.thread.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(t) = guard.as_ref() {
                t.unpark();
            }
        }
    }

    /// Records the calling thread as the one to unpark (slow path only).
    fn register(&self) {
        let me = current();
        let mut guard = self.thread.lock().unwrap_or_else(|e| e.into_inner());
        if guard.as_ref().map(|t| t.id()) != Some(me.id()) {
            *guard = Some(me);
        }
    }
}
