//! [`RankError`]: a rank a [`RankGuard`](crate::RankGuard) names before the collective
//! that would hang (one that runs out first, one whose data wait is far above the rest,
//! ranks at different steps), or the guard's collective failing.

use std::time::Duration;

/// A rank named before the collective that would hang, or the check's collective failing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum RankError {
    /// A rank's run ends before the others': it would leave the training loop while they
    /// wait for it in their next collective.
    #[error(
        "rank {rank} runs out of data at step {ends_at}, before the other ranks (they go on to \
         step {others_reach} at least): it would leave the training loop while they wait for \
         it in their next collective (a hang, then a NCCL/gloo timeout). Checked at step \
         {step}, on every rank. Give every rank the same data and run settings (epochs, stop \
         rule, shards), or stop every rank at step {ends_at}"
    )]
    RunsOut {
        /// The rank that runs out first.
        rank: u64,
        /// The step its run ends at (its last batch is step `ends_at - 1`).
        ends_at: u64,
        /// The step the others reach at least (the look ahead's end, or their run's end).
        others_reach: u64,
        /// The step checked at.
        step: u64,
    },
    /// A rank waited for data far longer than the rest since the last check: it holds
    /// every rank back at each collective.
    #[error(
        "rank {rank} waited {waited:?} for data over the last {steps} steps, the least-waiting \
         rank {least:?} (its source took {source_time:?} to read; the most of any rank: \
         {most_source_time:?}): the data of rank {rank} holds every rank back. Checked at \
         step {step}"
    )]
    SlowData {
        /// The rank that waited the most.
        rank: u64,
        /// Its wait since the last check.
        waited: Duration,
        /// The shortest wait of any rank since the last check.
        least: Duration,
        /// Its source time since the last check (the most of any rank when that rank is
        /// the one: otherwise not reduced, `None`).
        source_time: Option<Duration>,
        /// The most source time of any rank since the last check.
        most_source_time: Duration,
        /// Steps since the last check.
        steps: u64,
        /// The step checked at.
        step: u64,
    },
    /// The ranks checked at different steps: they did not pop the same batches.
    #[error(
        "rank {rank} is at step {step} while another rank is at step {others}: every rank must \
         pop the same number of batches between checks (is one rank's loop different?)"
    )]
    Steps {
        /// The rank at the lowest step.
        rank: u64,
        /// Its step.
        step: u64,
        /// The highest step of any rank.
        others: u64,
    },
    /// The ranks' guards do not match: two versions of pinring, or two world sizes.
    #[error(
        "the ranks' guards do not match (lane layouts {lowest:#x} and {highest:#x}: the lanes' \
         version << 32 | world_size): give every rank's guard the same world_size, and run \
         one pinring version on every rank"
    )]
    Versions {
        /// The lowest layout version among the ranks.
        lowest: i64,
        /// The highest.
        highest: i64,
    },
    /// The caller's collective failed.
    #[error("the rank guard's collective failed: {0}")]
    Collective(String),
    /// The collective gave back lanes no guard of this run could have written (not the
    /// maximum over the ranks' lanes: a collective that does not reduce by MAX).
    #[error(
        "the rank guard's collective gave back lanes that are not a maximum over the ranks: {0}"
    )]
    BadReduction(String),
}

impl RankError {
    /// The rank named, where one is.
    pub fn rank(&self) -> Option<u64> {
        match self {
            RankError::RunsOut { rank, .. }
            | RankError::SlowData { rank, .. }
            | RankError::Steps { rank, .. } => Some(*rank),
            _ => None,
        }
    }
}
