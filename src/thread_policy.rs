//! How the pipeline's own threads are scheduled beside the trainer's: `SCHED_BATCH`, and
//! the copy thread's timer slack.
//!
//! A thread the pipeline wakes (the copy thread on a release, the cpu backend's copy stream,
//! the feeder, a decode worker) would, as a plain `SCHED_OTHER` thread that slept, preempt
//! the thread that woke it: on a host with fewer free cores than pipeline threads the
//! trainer's `release` or `pop` then waits out the woken thread's time slice (150 µs a
//! release on the 2-core development VM, benches/RESULTS.md "Waking without preempting the
//! trainer"). Linux never lets a `SCHED_BATCH` thread preempt on wake-up: it runs on a free
//! core at once, or at the next tick otherwise; its share of the CPU is unchanged. Each
//! pipeline thread sets it for itself when it starts ([`ConfigBuilder::batch_scheduling`]
//! turns it off), and so does a `Documents` source's index thread (always: it only
//! scans); no other thread's policy is touched.
//!
//! The copy thread also asks for a timer slack of 1 µs, its own (`PR_SET_TIMERSLACK`; the
//! default is 50 µs), so that its sleeps before an expected release end when asked
//! (`src/cadence.rs`).
//!
//! [`ConfigBuilder::batch_scheduling`]: crate::ConfigBuilder::batch_scheduling

/// Puts the calling thread in `SCHED_BATCH` when `on` (Linux; elsewhere nothing). A refusal
/// (a seccomp policy, a container) leaves the thread as it was: the policy is a preference.
pub(crate) fn yield_at_wakeup(on: bool) {
    #[cfg(target_os = "linux")]
    if on {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid sched_param for the call; pid 0 is the calling thread,
        // whose policy only this thread changes.
        let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    }
}

/// Sets the calling thread's timer slack to 1 µs (Linux; elsewhere nothing). A refusal
/// leaves it as it was: sleeps then end up to the default slack late.
pub(crate) fn fine_timer_slack() {
    #[cfg(target_os = "linux")]
    {
        const SLACK_NS: libc::c_ulong = 1_000;
        // SAFETY: PR_SET_TIMERSLACK takes one unsigned long and changes only the calling
        // thread's slack.
        let _ = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, SLACK_NS) };
    }
}
