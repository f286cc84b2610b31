//! [`MixedSamples`]: a rank's samples of a mixture's run, step by step, and the
//! [`MixedSample`] it yields.

use std::fmt;

use super::step_walk::StepWalk;
use super::windows_member::WindowMember;
use crate::source::sampling::segmented::Segmented;

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
    walk: StepWalk<WindowMember<S>>,
    /// This rank's samples of the step being served: (source, its sample's count).
    plan: Vec<(u16, u64)>,
    /// Samples of `plan` yielded.
    used: usize,
    /// The step `plan` belongs to.
    serving: u64,
}

impl<S: Segmented> fmt::Debug for MixedSamples<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MixedSamples")
            .field("walk", &self.walk)
            .field("serving", &self.serving)
            .finish()
    }
}

impl<S: Segmented> MixedSamples<S> {
    /// The samples of the run `walk` walks.
    pub(crate) fn new(walk: StepWalk<WindowMember<S>>) -> Self {
        let per_rank = walk.inner.settings.run.batch.unwrap_or(1);
        let per_rank = usize::try_from(per_rank).unwrap_or(usize::MAX);
        MixedSamples {
            serving: walk.next_step(),
            walk,
            plan: Vec::with_capacity(per_rank.min(1 << 20)),
            used: 0,
        }
    }

    /// The step of the next sample (with a batch size), or of the one after the last.
    pub fn step(&self) -> u64 {
        if self.used < self.plan.len() {
            self.serving
        } else {
            self.walk.next_step()
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
        if self.used == self.plan.len() {
            // A walk of samples cannot fail: only the stop rule (or a stopped pipeline)
            // ends it.
            let (step, walked) = self.walk.next_kept(&mut self.plan)?;
            walked.ok()?;
            (self.serving, self.used) = (step, 0);
        }
        let (s, n) = *self.plan.get(self.used)?;
        self.used += 1;
        let stream = &mut self.walk.stream;
        let (member, reader) = (
            &self.walk.inner.members[usize::from(s)],
            &mut stream.readers[usize::from(s)],
        );
        let batch = self.walk.inner.settings.run.batch;
        Some(MixedSample {
            source: s,
            step: batch.map(|_| self.serving),
            batch_size: batch,
            item: member.window(reader, n),
        })
    }
}
