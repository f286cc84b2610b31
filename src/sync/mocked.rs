//! loom's primitives and what a model needs to run the protocol code (the `pinring_loom`
//! build).
//!
//! Besides loom's atomics, cells, mutex and threads, this holds what a model needs to run
//! the protocol code unchanged and deterministically:
//! - a park/unpark with std's semantics on loom's scheduler ([`Thread`]);
//! - a logical clock ([`Instant`]): it stands still except when a thread parks with a
//!   timeout, which advances that thread's clock by the whole timeout, so a deadline is
//!   reached in one step and every execution of a model replays the same way;
//! - the one seeded-bug switch the protocol code itself must honour: a thread whose
//!   wake-ups are suppressed ([`suppress_wakes`]) unparks nobody. The seeded bugs
//!   themselves (which model seeds what) live with the models, in `loom-tests/`.

use std::cell::Cell;
use std::ops::{Add, Sub};
use std::time::Duration;

pub(crate) use loom::cell::UnsafeCell;
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub(crate) use loom::sync::{Mutex, MutexGuard};
// std's `Arc`, not loom's: when loom reports a deadlock it unwinds the blocked threads,
// and dropping a loom `Arc` there panics again and aborts the whole test binary. The
// protocol never relies on an `Arc`'s drop for ordering.
pub(crate) use std::sync::Arc;

/// A thread handle with std's `unpark`: it wakes the thread if it is parked, and
/// otherwise leaves a token for its next `park`. (loom's own `unpark` also makes a thread
/// that is blocked in a mutex, condvar or join runnable, which std's never does; a stale
/// wake-up from a [`ParkSlot`](crate::park::ParkSlot) would then break loom's
/// bookkeeping.) The flags are std atomics, outside the model: they change only between
/// two loom operations of the same thread, where loom never switches threads.
#[derive(Clone, Debug)]
pub(crate) struct Thread {
    handle: loom::thread::Thread,
    state: std::sync::Arc<ParkState>,
}

#[derive(Debug, Default)]
struct ParkState {
    /// The thread is blocked in loom's `park` (set just before it, cleared after).
    parked: std::sync::atomic::AtomicBool,
    /// An unpark came while the thread was not parked.
    token: std::sync::atomic::AtomicBool,
}

impl Thread {
    pub(crate) fn id(&self) -> loom::thread::ThreadId {
        self.handle.id()
    }

    pub(crate) fn unpark(&self) {
        use std::sync::atomic::Ordering::Relaxed;
        if WAKES_SUPPRESSED.with(Cell::get) {
            return; // Seeded bug: this thread's wake-ups reach nobody.
        }
        if self.state.parked.load(Relaxed) {
            // Happens-before the park's return, as std's unpark.
            self.handle.unpark();
        } else {
            self.state.token.store(true, Relaxed);
        }
    }
}

loom::thread_local! {
    static CURRENT: Thread = Thread {
        handle: loom::thread::current(),
        state: Default::default(),
    };
    /// This thread's logical time, in nanoseconds.
    static NOW: Cell<u64> = Cell::new(0);
    static WAKES_SUPPRESSED: Cell<bool> = Cell::new(false);
}

/// Makes every later wake-up by the calling (loom) thread reach nobody, for the rest of
/// the execution: the models' decoder calls it (through `pinring::model_hooks`) to seed
/// a stop or a failure that wakes no parked thread (invariant 4).
pub fn suppress_wakes() {
    WAKES_SUPPRESSED.with(|s| s.set(true));
}

/// The calling thread's handle.
pub(crate) fn current() -> Thread {
    CURRENT.with(Thread::clone)
}

/// Takes the calling thread's token, or blocks until it is unparked.
pub(crate) fn park() {
    use std::sync::atomic::Ordering::Relaxed;
    let state = CURRENT.with(|t| t.state.clone());
    if state.token.swap(false, Relaxed) {
        return;
    }
    state.parked.store(true, Relaxed);
    loom::thread::park();
    state.parked.store(false, Relaxed);
}

/// A timed park: returns at once (as a spurious wake-up may) after advancing the calling
/// thread's logical clock by `timeout`, so that the caller's deadline check sees the time
/// pass in one step.
pub(crate) fn park_timeout(timeout: Duration) {
    NOW.with(|now| {
        let ns = u64::try_from(timeout.as_nanos()).unwrap_or(u64::MAX);
        now.set(now.get().saturating_add(ns));
    });
    loom::thread::yield_now();
}

/// In a model, a spin is a yield, so that loom can schedule the thread being waited on.
#[inline]
pub(crate) fn spin_loop() {
    loom::thread::yield_now();
}

/// A point on the calling thread's logical clock (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct Instant(u64);

impl Instant {
    pub(crate) fn now() -> Instant {
        Instant(NOW.with(Cell::get))
    }

    pub(crate) fn checked_add(self, d: Duration) -> Option<Instant> {
        let ns = u64::try_from(d.as_nanos()).ok()?;
        self.0.checked_add(ns).map(Instant)
    }

    pub(crate) fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    pub(crate) fn elapsed(self) -> Duration {
        Instant::now().saturating_duration_since(self)
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;

    fn add(self, d: Duration) -> Instant {
        self.checked_add(d).expect("logical clock overflow")
    }
}

impl Sub for Instant {
    type Output = Duration;

    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}
