//! When a release wakes the copy thread: at once with few device slots, otherwise once
//! half of them wait to be refilled or the consumer finds nothing to pop.
//!
//! A consumer that is slower than the pipeline (the state a loader aims for) releases a
//! slot while the copy thread is parked waiting for exactly that slot; waking it is an
//! unpark, a system call of 1.5–1.9 µs on the releasing thread on the GPU hosts measured
//! (benches/RESULTS.md, "The slot cycle"), most of what a release costs there. With `D`
//! device slots and the pipeline ahead, the batch that slot will hold is needed only `D - 1`
//! pops later, so the wake can wait: a release wakes the copy thread only once
//! `threshold = D / 2` released slots wait to be taken, or while a pop waits (HURRY); the
//! copy thread, once awake, refills every released slot it can before it parks again (one
//! wake for `D / 2` releases, their copies one run). With `D < 4` the threshold is 1 and
//! every release wakes, as before (nothing is counted); there `src/cadence.rs` has the copy
//! thread spinning when a steady consumer's release comes, so the wake finds no sleeper.
//!
//! The copy thread's own wait is unchanged: it takes a RELEASED slot whenever it looks
//! (any other wake-up, a fill or a completed copy, makes it look). Only the release's
//! wake-up is put off.
//!
//! # No stall
//!
//! The count and the HURRY bit live in one word, `state`, changed only by RMWs (AcqRel),
//! so a release and a pop's request are ordered one before the other:
//! - a release, after publishing RELEASED, adds one and wakes the copy thread if the word
//!   it made has `threshold` slots or HURRY;
//! - a pop that finds no batch (`take_ready`: `pop`, `pop_for`, `try_pop`) sets HURRY,
//!   then wakes the copy thread if HURRY was not set already (a request that stands woke
//!   it, and the releases since see HURRY);
//! - the copy thread takes one off as it takes a RELEASED slot, and clears HURRY (if set)
//!   before it pushes a run's tokens: a pop that asked gets one of them, and a pop that
//!   asks again does so after taking it, so after the clear.
//!
//! The take can come before the release's increment (the copy thread sees RELEASED, which
//! the release publishes first, and takes the slot at once): the count is then -1 for a
//! moment. It is kept in the word's upper bits, two's complement, and HURRY in bit 0, so
//! that neither the dip nor the increment that ends it touches HURRY. (With HURRY in the
//! top bit, the dip borrowed into it and the increment cleared a pop's request: model 13
//! found the stall.)
//!
//! If the release's RMW comes first, the pop's reads from it, so the copy thread the pop
//! wakes sees the slot RELEASED; if the pop's comes first, the release sees HURRY and
//! wakes. Each wake follows its RMW, so the park protocol's pairing (`src/park.rs`) holds.
//! A consumer that holds leases, releases some (from any thread) and pops gets its batch.
//! A consumer that releases fewer than `threshold` slots and then waits for them to refill
//! without popping (polling `stats()`, say) would wait until it pops or releases more
//! (only `pop`, `pop_for` and `try_pop` ask), so the copy thread's wait for a device slot
//! is bounded here: it looks again after 1 ms, then after twice as long each time it found
//! nothing, up to 16 ms (`src/copy_thread.rs`). Such a consumer's slots refill within 1 ms
//! of a release that follows a refill, within 16 ms after a longer pause; a stalled consumer
//! costs about 60 wake-ups a second. Model 13 (`lazy_release_wake`, four device slots,
//! two releases from another thread while the consumer pops twice) checks it, with a twin
//! whose pop asks without waking ("deadlock").

use crossbeam_utils::CachePadded;

use crate::park::ParkSlot;
use crate::sync::{AtomicUsize, Ordering};

/// The bit of `state` that says a pop found nothing to pop.
const HURRY: usize = 1;
/// One released slot in `state`: the count is the rest of the word, two's complement, so
/// that a take counted before its release (the copy thread may see RELEASED, and take the
/// slot, before the release's increment) makes it -1 for a moment without a borrow into
/// HURRY.
const ONE: usize = 2;

/// The counts that decide when a release wakes the copy thread.
#[derive(Debug)]
pub(crate) struct ReleaseWake {
    /// Device slots RELEASED and not yet taken by the copy thread (in units of [`ONE`],
    /// signed: a take may come before the release counted it), and [`HURRY`]. Changed by
    /// RMWs only (AcqRel): a release's increment, the copy thread's decrement as it takes
    /// a RELEASED slot and its clear of HURRY, a pop's set of HURRY. On a cache line of its
    /// own: the fields beside it in [`DeviceSlots`](super::device::DeviceSlots) are read by
    /// both threads on every release.
    state: CachePadded<AtomicUsize>,
    /// Released slots that wake the copy thread: `D / 2`, at least 1.
    threshold: usize,
}

impl ReleaseWake {
    /// For `device_slots` slots.
    pub(crate) fn new(device_slots: usize) -> Self {
        ReleaseWake {
            state: CachePadded::new(AtomicUsize::new(0)),
            threshold: (device_slots / 2).max(1),
        }
    }

    /// Whether every release wakes (fewer than four device slots): then nothing is
    /// counted.
    #[inline]
    pub(crate) fn eager(&self) -> bool {
        self.threshold == 1
    }

    /// Whether `state` calls for the copy thread.
    #[inline]
    fn calls(&self, state: usize) -> bool {
        // The count's sign is the word's: an arithmetic shift reads it.
        let released = (state as isize) >> 1;
        state & HURRY != 0 || released >= self.threshold as isize
    }

    /// Releasing thread, after publishing RELEASED: counts the slot and wakes the copy
    /// thread if enough wait or a pop asked.
    #[inline]
    pub(crate) fn released(&self, copier: &ParkSlot) {
        // AcqRel: one modification order with the pop's request and the copy thread's
        // RMWs (module docs).
        if self.eager()
            || self.calls(
                self.state
                    .fetch_add(ONE, Ordering::AcqRel)
                    .wrapping_add(ONE),
            )
        {
            copier.wake();
        }
    }

    /// Copy thread: it took a RELEASED slot.
    #[inline]
    pub(crate) fn taken(&self) {
        if !self.eager() {
            self.state.fetch_sub(ONE, Ordering::AcqRel);
        }
    }

    /// Copy thread, before it pushes a run's tokens: the pop that asked is served.
    #[inline]
    pub(crate) fn served(&self) {
        if !self.eager() && self.state.load(Ordering::Relaxed) & HURRY != 0 {
            self.state.fetch_and(!HURRY, Ordering::AcqRel);
        }
    }

    /// Consumer, when a pop finds no batch: the copy thread refills the released slots
    /// now; wakes it, unless an earlier request still stands (that one woke it, and
    /// every release since sees HURRY and wakes it too: a consumer polling `try_pop` does
    /// not unpark the copy thread at each poll).
    #[inline]
    pub(crate) fn ask(&self, copier: &ParkSlot) {
        if !self.eager() && self.state.fetch_or(HURRY, Ordering::AcqRel) & HURRY == 0 {
            copier.wake();
        }
    }
}

#[cfg(all(test, not(pinring_loom)))]
mod tests {
    use super::*;

    /// A take counted before its release (the count at -1 for a moment) leaves a pop's
    /// request standing, and the release that ends the dip still sees it.
    #[test]
    fn a_take_before_its_release_is_counted_keeps_hurry() {
        let wake = ReleaseWake::new(4);
        let copier = ParkSlot::new();
        wake.taken();
        wake.ask(&copier);
        assert!(
            wake.calls(wake.state.load(Ordering::Acquire)),
            "HURRY stands"
        );
        wake.released(&copier);
        let state = wake.state.load(Ordering::Acquire);
        assert_eq!(state, HURRY, "the count back at 0, HURRY kept");
        wake.served();
        assert!(!wake.calls(wake.state.load(Ordering::Acquire)));
        wake.released(&copier);
        assert!(
            !wake.calls(wake.state.load(Ordering::Acquire)),
            "one of two"
        );
        wake.released(&copier);
        assert!(
            wake.calls(wake.state.load(Ordering::Acquire)),
            "the threshold"
        );
    }
}
