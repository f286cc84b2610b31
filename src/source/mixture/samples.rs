//! [`MixedSamples`]: a rank's samples of a mixture's run, step by step, and the
//! [`MixedSample`] it yields.

use std::fmt;
use std::sync::Arc;

use super::inner::MixInner;
use super::run_origin::RunOrigin;
use super::walk::Walk;
use crate::feeding::feeder_stopped;
use crate::source::sampling::samples::Samples;
use crate::source::sampling::segmented::Segmented;
use crate::source::sampling::skip::SkipSteps;

/// One sample of a mixture: the sample of its source (a window), the source's index, and
/// the step it belongs to (with a batch size).
#[derive(Debug, Clone)]
pub struct MixedSample<T> {
    source: u16,
    step: Option<u64>,
    /// The samples of a step (the mixture's batch size), where it has one.
    batch_size: Option<u64>,
    item: T,
}

impl<T> MixedSample<T> {
    /// `item`, a sample of source `source`, in step `step` (of a batch size not said: see
    /// [`with_batch_size`](Self::with_batch_size)).
    pub fn new(source: u16, item: T, step: Option<u64>) -> Self {
        MixedSample {
            source,
            step,
            batch_size: None,
            item,
        }
    }

    /// The sample, its step holding `samples` samples per rank (the mixture's batch size):
    /// a pipeline of another batch size refuses the run
    /// ([`Describe::batch_size`](crate::Describe::batch_size)).
    pub fn with_batch_size(mut self, samples: Option<u64>) -> Self {
        self.batch_size = samples;
        self
    }

    /// The samples of its step per rank (the mixture's batch size), where it has one.
    pub fn batch_size(&self) -> Option<u64> {
        self.batch_size
    }

    /// The source's index in the mixture.
    pub fn source(&self) -> u16 {
        self.source
    }

    /// The step (this rank's batch of the run) it belongs to, where the mixture has a
    /// batch size.
    pub fn step(&self) -> Option<u64> {
        self.step
    }

    /// The source's sample (its id is the id within that source).
    pub fn item(&self) -> &T {
        &self.item
    }

    /// The source's sample, taken out.
    pub fn into_item(self) -> T {
        self.item
    }
}

/// A rank's samples of a [`Mixture`](crate::source::Mixture)'s run, in order: step after
/// step (with a batch size; one position per rank at a time without), each the rank's
/// share of the next `W·B` positions of the global sequence, leaving out the skipped
/// steps; ends where the stop rule ends the mixture (before the step it would cut short).
///
/// It walks every position of the global sequence (the rule needs each source's count),
/// a few nanoseconds each per source, and reads each of its own samples' places from its
/// source's order (building a shuffled source's permutation once per epoch of it). The
/// stop rule ends that walk over skipped steps too; without one, on a pipeline's feeder
/// thread, it ends when that pipeline stops.
pub struct MixedSamples<S: Segmented> {
    inner: Arc<MixInner<S>>,
    walk: Walk,
    /// Each source's walked sampler's iterator, kept for its epoch permutation.
    orders: Vec<Samples<S>>,
    /// This rank's samples of the step being served: (source, its sample's count).
    plan: Vec<(u16, u64)>,
    /// Samples of `plan` yielded.
    used: usize,
    /// The step `plan` belongs to.
    serving: u64,
    /// The step the walk stands at the start of.
    at: u64,
    skip: SkipSteps,
    ended: bool,
}

impl<S: Segmented> fmt::Debug for MixedSamples<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MixedSamples")
            .field("position", &self.walk.position())
            .field("step", &self.serving)
            .field("ended", &self.ended)
            .finish()
    }
}

impl<S: Segmented> MixedSamples<S> {
    /// The run from `origin`, begun at the mixture's start step if that is later.
    pub(crate) fn new(inner: Arc<MixInner<S>>, origin: RunOrigin) -> Self {
        let walk = inner.walk(&origin);
        let orders = inner.members.iter().map(|m| m.walked.iter()).collect();
        let per_rank = usize::try_from(inner.settings.run.batch.unwrap_or(1)).unwrap_or(usize::MAX);
        let mut samples = MixedSamples {
            walk,
            orders,
            plan: Vec::with_capacity(per_rank.min(1 << 20)),
            used: 0,
            serving: origin.step,
            at: origin.step,
            skip: origin.skip,
            ended: false,
            inner,
        };
        if samples.inner.settings.run.batch.is_some() {
            while samples.at < samples.inner.settings.run.start_step && !samples.ended {
                samples.ended = !samples.pass(false);
                samples.at += 1;
            }
        }
        samples
    }

    /// Walks one step's `W·B` positions, keeping this rank's in `plan` when `keep`; false
    /// when the stop rule ends the mixture inside them.
    fn pass(&mut self, keep: bool) -> bool {
        let run = &self.inner.settings.run;
        let (world, rank) = (run.world, run.rank);
        let chunk = world.saturating_mul(run.batch.unwrap_or(1));
        self.plan.clear();
        self.used = 0;
        for j in 0..chunk {
            let Some((s, n)) = self.walk.next() else {
                self.plan.clear();
                return false;
            };
            if keep && j % world == rank {
                self.plan.push((s as u16, n));
            }
        }
        true
    }

    /// Loads the next kept step into `plan`; false when the mixture has ended.
    fn load(&mut self) -> bool {
        let kept = self.skip.next_kept(self.at);
        while self.at < kept {
            // Walking over skipped steps for a pipeline that stopped: end the walk.
            if feeder_stopped() || !self.pass(false) {
                return false;
            }
            self.at += 1;
        }
        if !self.pass(true) {
            return false;
        }
        self.serving = self.at;
        self.at += 1;
        true
    }

    /// The step of the next sample (with a batch size), or of the one after the last.
    pub fn step(&self) -> u64 {
        if self.used < self.plan.len() {
            self.serving
        } else {
            self.skip.next_kept(self.at)
        }
    }

    /// The global position where the walk stands: the end of the step being served.
    pub fn position(&self) -> u64 {
        self.walk.position()
    }
}

impl<S: Segmented> Iterator for MixedSamples<S> {
    type Item = MixedSample<S::Window>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.used == self.plan.len() && (self.ended || !self.load()) {
            self.ended = true;
            return None;
        }
        let (s, n) = self.plan[self.used];
        self.used += 1;
        let epoch_len = self.inner.members[usize::from(s)].epoch_len;
        let window = self.orders[usize::from(s)].window_at(n / epoch_len, n % epoch_len);
        let batch = self.inner.settings.run.batch;
        Some(MixedSample {
            source: s,
            step: batch.map(|_| self.serving),
            batch_size: batch,
            item: window,
        })
    }
}
