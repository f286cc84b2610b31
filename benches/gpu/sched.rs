//! `PINRING_BENCH_SCHED_OTHER=1`: every pipeline of the benchmark keeps its threads as
//! `SCHED_OTHER` (`ConfigBuilder::batch_scheduling(false)`), for an A/B of the default
//! `SCHED_BATCH` (src/thread_policy.rs) in one session.

/// The variable that turns the pipelines' `SCHED_BATCH` off.
pub const SCHED_OTHER: &str = "PINRING_BENCH_SCHED_OTHER";

/// Whether the pipelines' threads run as `SCHED_BATCH` in this run.
pub fn batch_scheduling() -> bool {
    std::env::var_os(SCHED_OTHER).is_none()
}
