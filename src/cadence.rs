//! When the copy thread sleeps before it waits for a release: the consumer's cadence,
//! learnt, so that a release a parked copy thread waits for costs no system call.
//!
//! A consumer slower than the pipeline releases each device slot while the copy thread
//! waits for exactly that slot. With few device slots (`D < 4`, the default two) every
//! such release wakes the copy thread ([`ReleaseWake`](crate::slot::release_wake)), and
//! the wake of a parked thread is an unpark, 1.5–1.9 µs on the releasing thread on the GPU
//! hosts measured (benches/RESULTS.md, "The slot cycle"), most of what a Python step's
//! release costs. The spin that would spare it ([`ParkSlot`](crate::park::ParkSlot),
//! 30 µs by default) is shorter than a step of a trainer that takes tens of µs or more.
//!
//! So the copy thread learns how long its waits for a device slot take (an exponential
//! average, weight 1/4) and, when a wait is expected to last longer than half the spin and
//! at most [`MAX_CADENCE`], first sleeps unannounced for the expected time less half the
//! spin, then waits as before, spinning whatever the spin rate says: the release finds it
//! spinning (no waiter parked, no unpark). A sleep that ends after the release (the slot is
//! already free when it ends: the consumer sped up, or the timer was late) shortens the
//! estimate by a quarter; a wait whose spin misses lengthens it through the average.
//!
//! # Why no wake-up is lost
//!
//! The sleep is not a wait: nothing is announced, no waker looks for it, and after it the
//! copy thread checks its condition and waits exactly as without it (announce, re-check,
//! park; `src/park.rs`). It is as if the copy thread had been descheduled for that long. A
//! release, a fill, a completed copy or a stop that comes during it is seen when it ends.
//!
//! # What it costs
//!
//! When a slow consumer suddenly speeds up, up to one sleep ([`MAX_CADENCE`] at most) of
//! delay on each of the few waits the estimate takes to follow (each late sleep shortens it
//! by a quarter; the slot released is refilled that much later), and a spin of up to the
//! spin time per batch where a sleep ran (a consumer stepping every 100 µs: about 15–30 µs
//! of the copy thread's core a step). Consumers slower than [`MAX_CADENCE`] a step are waited for as
//! before: there the system call is a small share of a step, and a long unannounced sleep
//! would delay a consumer that speeds up. The copy thread asks the kernel for a timer slack
//! of 1 µs (its own, `PR_SET_TIMERSLACK`; the default is 50 µs) so that a sleep ends when
//! asked.

use std::time::Duration;

/// Waits expected to last longer than this are waited for at once, without a sleep.
pub(crate) const MAX_CADENCE: Duration = Duration::from_millis(1);

/// What the copy thread learnt of its waits for a device slot.
#[derive(Debug)]
pub(crate) struct Cadence {
    /// The expected length of a wait for a device slot (ns), from its start.
    expected_ns: u64,
    /// How long before the expected release a sleep ends (ns): half the spin, so the
    /// spin that follows covers the release whether it comes a little early or late.
    margin_ns: u64,
}

impl Cadence {
    /// For a pipeline whose waits spin up to `spin` (zero: never sleeps).
    pub(crate) fn new(spin: Duration) -> Self {
        Cadence {
            expected_ns: 0,
            margin_ns: duration_ns(spin / 2),
        }
    }

    /// How long to sleep before the next wait for a device slot (zero: wait at once).
    pub(crate) fn lead(&self) -> Duration {
        if cfg!(pinring_loom)
            || self.margin_ns == 0
            || self.expected_ns <= self.margin_ns
            || self.expected_ns > duration_ns(MAX_CADENCE)
        {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.expected_ns - self.margin_ns)
    }

    /// Folds in one wait for a device slot: `late` when the slot was already free as the
    /// sleep before it ended, otherwise how long the wait took from its start (sleep
    /// included).
    pub(crate) fn observe(&mut self, slept: Duration, late: bool, took: Duration) {
        if late {
            let bound = self.expected_ns.min(duration_ns(slept));
            self.expected_ns = bound - bound / 4;
        } else {
            let took = duration_ns(took);
            self.expected_ns = self.expected_ns - self.expected_ns / 4 + took / 4;
        }
    }
}

fn duration_ns(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(all(test, not(pinring_loom)))]
mod tests {
    use super::*;

    const SPIN: Duration = Duration::from_micros(30);

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    /// A consumer releasing every `interval`: the waits the copy thread sees, each as
    /// long as the interval (or, after a sleep that ran past it, found late).
    fn settle(c: &mut Cadence, interval: Duration, waits: usize) {
        for _ in 0..waits {
            let lead = c.lead();
            if lead >= interval {
                c.observe(lead, true, lead);
            } else {
                c.observe(lead, false, interval);
            }
        }
    }

    #[test]
    fn a_steady_consumer_is_slept_for_until_just_before_its_release() {
        let mut c = Cadence::new(SPIN);
        assert_eq!(c.lead(), Duration::ZERO, "nothing learnt yet: no sleep");
        settle(&mut c, us(100), 40);
        let lead = c.lead();
        assert!(
            lead > us(80) && lead < us(100),
            "lead {lead:?} for 100 µs waits"
        );
    }

    #[test]
    fn fast_and_slow_consumers_are_waited_for_at_once() {
        let mut fast = Cadence::new(SPIN);
        settle(&mut fast, us(10), 40);
        assert_eq!(
            fast.lead(),
            Duration::ZERO,
            "the spin alone covers 10 µs waits"
        );
        let mut slow = Cadence::new(SPIN);
        settle(&mut slow, Duration::from_millis(10), 40);
        assert_eq!(slow.lead(), Duration::ZERO, "10 ms steps park, as before");
    }

    #[test]
    fn no_spin_never_sleeps() {
        let mut c = Cadence::new(Duration::ZERO);
        settle(&mut c, us(100), 40);
        assert_eq!(c.lead(), Duration::ZERO);
    }

    #[test]
    fn a_consumer_that_speeds_up_is_followed_within_a_few_waits() {
        let mut c = Cadence::new(SPIN);
        settle(&mut c, us(400), 40);
        assert!(c.lead() > us(300));
        // Now every 50 µs: the sleeps end late, each shortening the estimate by a quarter.
        let mut late = 0;
        for _ in 0..40 {
            let lead = c.lead();
            if lead >= us(50) {
                late += 1;
                c.observe(lead, true, lead);
            } else {
                c.observe(lead, false, us(50));
            }
        }
        assert!(
            late <= 8,
            "{late} late sleeps before following the new cadence"
        );
        assert!(c.lead() < us(50), "lead {:?} for 50 µs waits", c.lead());
    }
}
