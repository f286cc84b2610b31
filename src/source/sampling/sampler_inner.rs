//! The state a [`Sampler`](crate::source::Sampler) and its iterators share: the window grid of
//! the source, each rank's share of an epoch, and the arithmetic of positions and
//! checkpoints over them.

use super::checkpoint::{Checkpoint, Fingerprint, CHECKPOINT_VERSION};
use super::order::Order;
use super::skip::SkipSteps;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::run::CheckedRun;

pub(super) struct Inner<S> {
    pub(super) source: S,
    pub(super) window: u64,
    pub(super) stride: u64,
    pub(super) order: Order,
    /// The rank, world size, batch size, start step and skipped steps, checked
    /// (`SamplerBuilder::shard`, `batch_size`, `start_step`, `skip_steps`).
    pub(super) run: CheckedRun,
    pub(super) drop_last: bool,
    /// Whether `even_ranks` was set (kept for [`to_builder`](crate::source::Sampler::to_builder)).
    pub(super) even_ranks: bool,
    /// Each epoch (or the rest of a resumed one) uses a multiple of this many positions:
    /// `world·batch` (batch size, drop_last), `world` (batch size, or even_ranks) or 1.
    pub(super) grain: u64,
    /// `cum_windows[s]`: grid windows in segments before `s`; one entry more than segments.
    pub(super) cum_windows: Vec<u64>,
    /// `cum_starts[s]`: possible window starts in segments before `s`.
    pub(super) cum_starts: Vec<u64>,
    /// Grid windows in the whole source: `N`, positions in an epoch's order.
    pub(super) windows: u64,
    /// Positions a fresh epoch uses over all ranks: `M`.
    pub(super) epoch_windows: u64,
    /// Samples per fresh epoch for this rank.
    pub(super) len: u64,
    pub(super) fingerprint: Fingerprint,
}

impl<S> Inner<S> {
    /// The part of an epoch from global position `base` on (0 for a fresh epoch, a
    /// checkpoint's `consumed` for a resumed one), as (end, this rank's samples): the
    /// positions `base..end` are used, `end - base` being the largest multiple of the
    /// grain that fits, and this rank takes `base + rank + world·i` below `end`.
    pub(super) fn share(&self, base: u64) -> (u64, u64) {
        let rest = self.windows.saturating_sub(base);
        let used = rest - rest % self.grain;
        let (rank, world) = (self.run.rank, self.run.world);
        let len = used / world + u64::from(rank < used % world);
        (base + used, len)
    }

    /// The global state after this rank consumed `k` of its samples of an epoch part
    /// from `base` to `end`, `k` at most its share: position `base + world·k` (capped
    /// at `end`), the epoch's end being the next epoch's start.
    fn settle(&self, epoch: u64, base: u64, end: u64, k: u64) -> (u64, u64) {
        let at = u128::from(base) + u128::from(self.run.world) * u128::from(k);
        if at >= u128::from(end) {
            (epoch.saturating_add(1), 0)
        } else {
            (epoch, at as u64)
        }
    }

    /// The global (epoch, consumed) after this rank consumed `k` samples from position
    /// `base` of `epoch`, across epoch ends.
    pub(super) fn advance(&self, epoch: u64, base: u64, k: u64) -> (u64, u64) {
        let (end, len) = self.share(base);
        if k <= len {
            return self.settle(epoch, base, end, k);
        }
        // Past this epoch: whole fresh epochs of `len` (at least 1) each; `k` ends in
        // epoch `epoch + 1 + skip`, as its `k`-th sample, `k` in `1..=len`.
        let k = k - len;
        let skip = (k - 1) / self.len;
        let k = k - skip * self.len;
        let epoch = epoch.saturating_add(1).saturating_add(skip);
        self.settle(epoch, 0, self.epoch_windows, k)
    }

    /// The checkpoint at (epoch, consumed), `step` steps done, skipping `skip`.
    pub(super) fn checkpoint_at(
        &self,
        epoch: u64,
        consumed: u64,
        step: u64,
        skip: &SkipSteps,
    ) -> Checkpoint {
        Checkpoint {
            version: CHECKPOINT_VERSION,
            dataset: self.fingerprint.clone(),
            window: self.window,
            stride: self.stride,
            order: self.order.name().to_owned(),
            seed: self.order.seed(),
            windows: self.windows,
            epoch,
            consumed,
            world_size: self.run.world,
            batch_size: self.run.batch.unwrap_or(0),
            step,
            skip: skip.ranges().to_vec(),
        }
    }

    /// Checks that `c` belongs to this run and lies inside its epoch.
    pub(super) fn check(&self, c: &Checkpoint) -> Result<(), SourceError> {
        let here = self.checkpoint_at(c.epoch, c.consumed, c.step, &SkipSteps::default());
        let same_run = Checkpoint {
            world_size: here.world_size,
            batch_size: here.batch_size,
            skip: Vec::new(),
            ..c.clone()
        };
        if let Some((what, saved, here)) = same_run.difference(&here) {
            return Err(SourceError::CheckpointMismatch { what, saved, here });
        }
        if c.consumed > self.windows {
            return Err(SourceError::CheckpointPastEpoch {
                epoch: c.epoch,
                consumed: c.consumed,
                windows: self.windows,
            });
        }
        Ok(())
    }
}

impl<S> Inner<S> {
    /// Grid window `g` as (segment, start unit).
    pub(super) fn grid(&self, g: u64) -> (usize, u64) {
        let seg = segment_of(&self.cum_windows, g);
        (seg, (g - self.cum_windows[seg]) * self.stride)
    }

    /// Start `u` of all possible starts as (segment, start unit).
    pub(super) fn start_of(&self, u: u64) -> (usize, u64) {
        let seg = segment_of(&self.cum_starts, u);
        (seg, u - self.cum_starts[seg])
    }
}

/// The segment `s` with `cum[s] <= x < cum[s + 1]` (for `x` below `cum`'s last entry).
fn segment_of(cum: &[u64], x: u64) -> usize {
    cum.partition_point(|&c| c <= x)
        .saturating_sub(1)
        .min(cum.len().saturating_sub(2))
}
