//! How the pipeline's own threads are scheduled beside the trainer's: `SCHED_BATCH`.
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
