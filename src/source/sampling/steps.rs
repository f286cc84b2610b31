//! Steps: a rank's run cut into its batches, numbered across epochs, and the arithmetic
//! that finds a step's place (for `start_step` and `skip_steps`) or the step of a
//! sample (for checkpoints) without walking the samples between.
//!
//! A run starts at an [`Origin`]: the global place `(epoch, base)` of its first sample (a
//! fresh epoch's start, `base` 0, or a checkpoint's `consumed` in its epoch) and the
//! number of its first step. From there this rank has `len0` samples left in the
//! origin's epoch (its share of positions `base..M'`), then `len` in each later epoch;
//! each part is cut into batches of `B` from its start, the last one short when `B` does
//! not divide it (only without `drop_last`). Step `k` is the `k`-th of those batches.

use super::sampler_inner::Inner;
use super::skip::SkipSteps;

/// Where a run starts: the global place of its first sample and its first step's number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Origin {
    /// The epoch of the first sample.
    pub(crate) epoch: u64,
    /// The global position in that epoch where the run's part of it starts.
    pub(crate) base: u64,
    /// The number of the run's first step.
    pub(crate) step: u64,
}

impl<S> Inner<S> {
    /// This rank's samples in the origin's epoch part, and in each later epoch.
    fn part_lens(&self, o: Origin) -> (u64, u64) {
        (self.share(o.base).1, self.len)
    }

    /// Samples this rank walks from the origin to the start of step `s` (`s >= o.step`),
    /// with batches of `b`.
    pub(crate) fn samples_to_step(&self, o: Origin, b: u64, s: u64) -> u128 {
        let (len0, len) = self.part_lens(o);
        let (b0, per_epoch) = (len0.div_ceil(b), len.div_ceil(b));
        let rel = s.saturating_sub(o.step);
        if rel <= b0 {
            return (u128::from(rel) * u128::from(b)).min(u128::from(len0));
        }
        let r = rel - b0;
        u128::from(len0)
            + u128::from(r / per_epoch) * u128::from(len)
            + (u128::from(r % per_epoch) * u128::from(b)).min(u128::from(len))
    }

    /// The step that the sample `t` samples after the origin belongs to.
    pub(crate) fn step_of(&self, o: Origin, b: u64, t: u128) -> u64 {
        let (len0, len) = self.part_lens(o);
        let (b0, per_epoch) = (len0.div_ceil(b), len.div_ceil(b));
        let steps = if t < u128::from(len0) {
            t / u128::from(b)
        } else {
            let r = t - u128::from(len0);
            let (epochs, within) = (r / u128::from(len), r % u128::from(len));
            u128::from(b0) + epochs * u128::from(per_epoch) + within / u128::from(b)
        };
        u64::try_from(u128::from(o.step) + steps).unwrap_or(u64::MAX)
    }

    /// Where step `s` (`s >= o.step`) starts: its epoch, the global position where that
    /// epoch's part starts (the origin's `base` in the origin's epoch, 0 in later ones),
    /// and its first sample's index in the part.
    pub(crate) fn step_place(&self, o: Origin, b: u64, s: u64) -> (u64, u64, u64) {
        let (len0, len) = self.part_lens(o);
        let (b0, per_epoch) = (len0.div_ceil(b), len.div_ceil(b));
        let rel = s.saturating_sub(o.step);
        if rel < b0 {
            return (o.epoch, o.base, rel * b);
        }
        let r = rel - b0;
        let epoch = o.epoch.saturating_add(1).saturating_add(r / per_epoch);
        (epoch, 0, (r % per_epoch) * b)
    }

    /// Where a run from `o` stands after this rank popped `popped` samples, as the global
    /// `(epoch, consumed, step)` of a checkpoint: with a batch size `b`, the run begins at
    /// step `first` (`start_step`, or the origin's step) and leaves out the steps of
    /// `skip`; without one it walks on from the origin.
    pub(crate) fn after_popped(
        &self,
        o: Origin,
        b: Option<u64>,
        first: u64,
        skip: &SkipSteps,
        popped: u64,
    ) -> (u64, u64, u64) {
        let Some(b) = b else {
            let (epoch, consumed) = self.advance(o.epoch, o.base, popped);
            return (epoch, consumed, o.step);
        };
        let mut left = u128::from(popped);
        let mut walked = 0u128;
        for (x, y) in skip.kept_from(first.max(o.step)) {
            let from = self.samples_to_step(o, b, x);
            walked = from + left;
            match y {
                // Popped past this stretch: on to the next one (a stretch popped whole
                // leaves the run at the next kept step).
                Some(y) if left >= self.samples_to_step(o, b, y) - from => {
                    left -= self.samples_to_step(o, b, y) - from;
                }
                _ => break,
            }
        }
        let t = u64::try_from(walked).unwrap_or(u64::MAX);
        let (epoch, consumed) = self.advance(o.epoch, o.base, t);
        (epoch, consumed, self.step_of(o, b, walked))
    }
}
