//! Waiting without burning: a bounded, adaptive spin, then park; and the wake-up.
//!
//! Each stage that waits (feeder, decode workers, copy thread, consumer) waits on a
//! [`ParkSlot`]; whoever makes its condition true calls [`ParkSlot::wake`].
//!
//! # Spin, then park
//!
//! A wait first checks its condition in a spin loop for at most the configured spin time
//! (a few tens of µs; [`ConfigBuilder::spin`](crate::ConfigBuilder::spin)), then parks.
//! The spin is bounded by time, not by a count of checks, and the deadline (if any) is
//! checked in both phases, so a loaded machine cannot stretch a wait past its deadline by
//! more than one park's wake-up latency. The spin adapts: each slot keeps a smoothed rate
//! of how often a spin ended with the condition met, and spins only while that rate shows
//! spinning pays (at least one spin in four succeeds); one wait in 16 spins anyway, to
//! notice when the other side speeds up. Only waits that spun update the rate (a parked
//! wait's length is mostly the wake-up's own latency, which says nothing about whether a
//! spin would have caught the condition). A consumer that takes 10 ms a step therefore
//! parks at once and costs no CPU, while a copy thread fed every few µs catches each batch
//! without a park/unpark round trip — and spares its waker the system call that unparking
//! costs.
//!
//! # No lost wake-up
//!
//! A waiter that is about to park announces it with `sleepers.fetch_add(1, AcqRel)`, then
//! re-checks its condition, then parks. A waker publishes its change with a Release store,
//! then reads `sleepers` with a read-modify-write (`fetch_add(0, AcqRel)`) and unparks the
//! registered waiters if it is not zero. The two RMWs are on one location, so one is first
//! in its modification order: if the waker's is first, the waiter's RMW reads from it and
//! acquires everything the waker published before it, so the waiter's re-check sees the
//! condition; if the waiter's is first, the waker reads at least 1 and unparks it (an
//! unpark before the park leaves a token, so the park returns at once). No SeqCst is
//! needed, so loom checks it exactly. A stale unpark only makes a later park return early;
//! every wait re-checks in a loop.

use std::time::Duration;

use crate::sync::native;
use crate::sync::{
    current, park, park_timeout, spin_loop, AtomicUsize, Instant, Mutex, Ordering, Thread,
};

/// Every this many waits spin regardless of the rate, to notice a faster producer.
const PROBE_EVERY: u64 = 16;
/// The spin success rate's scale (fixed point).
const ONE: u64 = 1024;
/// Spin while at least this share of spins succeed.
const SPIN_WHEN: u64 = ONE / 4;
/// Spin checks between two reads of the clock.
const CHECKS_PER_CLOCK_READ: u32 = 8;
/// Parked threads a slot has room for from the start (a role with more waiters asks for
/// more: [`ParkSlot::with_room`]).
const ROOM: usize = 4;

/// Where the threads of one waiting role park. On cache lines of its own (128 bytes, as
/// `crossbeam_utils::CachePadded` pads on x86-64): its waiters and wakers write it, and the
/// slots of other roles (and whatever else sits beside it) would share their misses.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct ParkSlot {
    /// Waiters between their announcement and the end of their park. Read-modify-written
    /// (AcqRel) by waiters and wakers alike; see the module docs for the pairing.
    sleepers: AtomicUsize,
    /// The threads to unpark. Locked only on the slow path (a waiter about to park, or a
    /// waker that found sleepers). Its room is reserved when the slot is made, so that a
    /// park allocates nothing while no more threads wait here than the slot was made for:
    /// the steady state allocates nothing (tests/alloc.rs), even where a role first parks
    /// after thousands of batches.
    threads: Mutex<Vec<Thread>>,
    /// Smoothed share of spins that ended with the condition met, out of [`ONE`]: steers
    /// the spin only. std's atomic in every build (models never spin); Relaxed, a
    /// statistic that orders nothing.
    hits: native::AtomicU64,
    /// Waits so far (for the probe); Relaxed statistic.
    waits: native::AtomicU64,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// The condition held.
    Ready,
    /// The deadline passed first.
    TimedOut,
    /// The wait was called off (the pipeline is stopping, or the stage must end).
    Stopped,
}

impl ParkSlot {
    /// A slot for a role of at most [`ROOM`] waiting threads.
    pub(crate) fn new() -> Self {
        Self::with_room(ROOM)
    }

    /// A slot for a role of up to `waiters` waiting threads (the decode workers, who may
    /// all wait on one host slot).
    pub(crate) fn with_room(waiters: usize) -> Self {
        ParkSlot {
            sleepers: AtomicUsize::new(0),
            threads: Mutex::new(Vec::with_capacity(waiters.max(ROOM))),
            hits: native::AtomicU64::new(ONE),
            waits: native::AtomicU64::new(0),
        }
    }

    /// Waits until `ready()` or `stopped()` is true, or `deadline` passes; checks in that
    /// order, so a condition that holds wins over a stop or a deadline.
    ///
    /// `ready` and `stopped` must read with Acquire what the waker published with Release
    /// before calling [`wake`](Self::wake). `spin` bounds the spin phase (zero parks at
    /// once).
    pub(crate) fn wait(
        &self,
        spin: Duration,
        deadline: Option<Instant>,
        ready: impl FnMut() -> bool,
        stopped: impl FnMut() -> bool,
    ) -> Waited {
        self.wait_with(spin, false, deadline, ready, stopped)
    }

    /// As [`wait`](Self::wait); `forced`: spins for `spin` whatever the spin rate says (for
    /// a waiter that slept until just before its condition is expected: `src/cadence.rs`).
    pub(crate) fn wait_with(
        &self,
        spin: Duration,
        forced: bool,
        deadline: Option<Instant>,
        mut ready: impl FnMut() -> bool,
        mut stopped: impl FnMut() -> bool,
    ) -> Waited {
        if ready() {
            return Waited::Ready;
        }
        if stopped() {
            return Waited::Stopped;
        }
        let budget = if forced { spin } else { self.budget(spin) };
        let start = Instant::now();
        let spun = self.spin(start, budget, deadline, &mut ready, &mut stopped);
        if !budget.is_zero() {
            self.observe(spun.is_some());
        }
        match spun {
            Some(outcome) => outcome,
            None => self.park(deadline, &mut ready, &mut stopped),
        }
    }

    /// The spin time for this wait: `spin` while spins here succeed often enough (or on a
    /// probe), else zero.
    fn budget(&self, spin: Duration) -> Duration {
        if spin.is_zero() {
            return spin;
        }
        let n = self.waits.fetch_add(1, native::Ordering::Relaxed);
        if self.hits.load(native::Ordering::Relaxed) >= SPIN_WHEN || n.is_multiple_of(PROBE_EVERY) {
            spin
        } else {
            Duration::ZERO
        }
    }

    /// Folds one spin's outcome into the success rate (an exponential average, weight
    /// 1/8).
    fn observe(&self, hit: bool) {
        let old = self.hits.load(native::Ordering::Relaxed);
        let new = old - old / 8 + if hit { ONE / 8 } else { 0 };
        self.hits.store(new, native::Ordering::Relaxed);
    }

    /// The spin phase: `Some` if the wait ended in it.
    fn spin(
        &self,
        start: Instant,
        budget: Duration,
        deadline: Option<Instant>,
        ready: &mut impl FnMut() -> bool,
        stopped: &mut impl FnMut() -> bool,
    ) -> Option<Waited> {
        if budget.is_zero() {
            return None;
        }
        let until = start.checked_add(budget)?;
        let mut checks = 0u32;
        loop {
            spin_loop();
            if ready() {
                return Some(Waited::Ready);
            }
            if stopped() {
                return Some(Waited::Stopped);
            }
            checks += 1;
            if checks.is_multiple_of(CHECKS_PER_CLOCK_READ) {
                let now = Instant::now();
                if deadline.is_some_and(|d| now >= d) {
                    return Some(Waited::TimedOut);
                }
                if now >= until {
                    return None;
                }
            }
        }
    }

    /// The park phase.
    fn park(
        &self,
        deadline: Option<Instant>,
        ready: &mut impl FnMut() -> bool,
        stopped: &mut impl FnMut() -> bool,
    ) -> Waited {
        let me = current();
        self.lock().push(me.clone());
        let outcome = loop {
            // AcqRel: pairs with the waker's RMW (module docs).
            self.sleepers.fetch_add(1, Ordering::AcqRel);
            let checked = if ready() {
                Some(Waited::Ready)
            } else if stopped() {
                Some(Waited::Stopped)
            } else {
                match deadline {
                    None => {
                        park();
                        None
                    }
                    Some(d) => {
                        let now = Instant::now();
                        if now >= d {
                            Some(Waited::TimedOut)
                        } else {
                            park_timeout(d - now);
                            None
                        }
                    }
                }
            };
            self.sleepers.fetch_sub(1, Ordering::AcqRel);
            if let Some(outcome) = checked {
                break outcome;
            }
            if ready() {
                break Waited::Ready;
            }
            if stopped() {
                break Waited::Stopped;
            }
        };
        let mut threads = self.lock();
        if let Some(i) = threads.iter().position(|t| t.id() == me.id()) {
            threads.swap_remove(i);
        }
        outcome
    }

    /// Wakes the waiters that park or are about to. Call after publishing (Release) what
    /// their conditions read.
    #[inline]
    pub(crate) fn wake(&self) {
        // AcqRel RMW: pairs with the waiters' announcements (module docs).
        if self.sleepers.fetch_add(0, Ordering::AcqRel) != 0 {
            for t in self.lock().iter() {
                t.unpark();
            }
        }
    }

    fn lock(&self) -> crate::sync::MutexGuard<'_, Vec<Thread>> {
        self.threads.lock().unwrap_or_else(|e| e.into_inner())
    }
}
