//! [`Steps`]: a rank's steps, in order, from the start or a checkpoint; endless (epoch
//! after epoch). Each is a [`DocStep`]: the iterator locates the step (dropping the partial
//! steps the walk drops), checks that this step's `cu_seqlens` holds every rank's pieces,
//! and moves on — walking over the steps before the start step and the skipped ones
//! without yielding them; the decoder does the rest.

use std::fmt;
use std::sync::Arc;

use super::inner::Inner;
use super::index::BuiltBy;
use super::permutation::Permutation;
use super::step::DocStep;
use super::walk::Cursor;
use super::walker::Walker;
use crate::source::sampling::skip::SkipSteps;

/// The steps of one rank of a [`Documents`](crate::source::Documents) source, in order:
/// what a [`Pipeline`](crate::Pipeline) pulls (one step a batch). Endless, epoch after
/// epoch, unless a step cannot be made: that step carries its error (the decoder returns
/// it, so `pop` reports it after the steps before it) and the iterator ends.
///
/// Each step is found by walking the shards' indexes; a shard not indexed yet by the
/// thread ahead of the walk is indexed here (the step waits:
/// [`IndexStats::on_walk`](crate::source::IndexStats::on_walk) counts it). The steps
/// before the [`start_step`](crate::source::DocumentsBuilder::start_step) and the
/// [`skip_steps`](crate::source::DocumentsBuilder::skip_steps) are walked the same way
/// (their documents used up on every rank) but not yielded: the other steps keep their
/// numbers. A step walked over that fits nowhere is still an error (the walk cannot go
/// on); one that packs too many documents is not (it is never packed).
pub struct Steps {
    inner: Arc<Inner>,
    /// Where the walk stands: after the last step walked.
    cursor: Cursor,
    /// The next step walked's number.
    step: u64,
    /// The first step yielded, at the earliest (the start step).
    first: u64,
    /// The steps walked over, not yielded.
    skip: SkipSteps,
    /// The permutation of the cursor's epoch, once made (shuffled order).
    perm: Option<Arc<Permutation>>,
    /// The first epoch not yielded (`until_epoch`): none of its steps is, and the walk
    /// over skipped steps stops there too.
    end: Option<u64>,
    done: bool,
}

impl fmt::Debug for Steps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Steps")
            .field("cursor", &self.cursor)
            .field("step", &self.step)
            .field("first", &self.first)
            .field("skip", &self.skip.ranges())
            .field("done", &self.done)
            .finish()
    }
}

impl Steps {
    /// The steps from `cursor`, at step `step` (its epoch's permutation `perm`, if at
    /// hand), yielding none before `first` and none of `skip`.
    pub(super) fn new(
        inner: Arc<Inner>,
        cursor: Cursor,
        step: u64,
        perm: Option<Arc<Permutation>>,
        first: u64,
        skip: SkipSteps,
    ) -> Self {
        Steps {
            inner,
            cursor,
            step,
            first,
            skip,
            perm,
            end: None,
            done: false,
        }
    }

    /// The same steps up to the end of epoch `end - 1`: the first step of epoch `end` is
    /// not yielded, and neither is anything after it (a skipped range reaching past it
    /// ends the run there, instead of walking on).
    pub fn until_epoch(mut self, end: u64) -> Self {
        self.end = Some(end);
        self
    }

    /// Whether `epoch` is past the end (`until_epoch`).
    fn past_end(&self, epoch: u64) -> bool {
        self.end.is_some_and(|end| epoch >= end)
    }

    /// The number of the next step it yields (if the run goes on that far): past the
    /// start step and the skipped steps.
    pub fn next_step(&self) -> u64 {
        self.skip.next_kept(self.step.max(self.first))
    }

    /// Where the walk stands: after the last step yielded (or walked over since: the steps
    /// before the start step and the skipped ones are walked when the next step is
    /// pulled).
    pub fn cursor(&self) -> Cursor {
        self.cursor
    }

}

impl Iterator for Steps {
    type Item = DocStep;

    fn next(&mut self) -> Option<DocStep> {
        if self.done {
            return None;
        }
        let mut walker = Walker::new(&self.inner, BuiltBy::Walk, self.perm.take());
        // The steps walked over: their documents used up, nothing yielded.
        let mut walked_over = Ok(());
        while !self.skip.delivers(self.first, self.step) {
            match walker.locate(self.cursor, self.step) {
                Ok(located) if self.past_end(located.start.epoch) => {
                    self.done = true;
                    return None;
                }
                Ok(located) => {
                    self.cursor = located.after();
                    self.step += 1;
                }
                Err(e) => {
                    walked_over = Err(e);
                    break;
                }
            }
        }
        let step = self.step;
        let sizes = self.inner.schedule.at(step);
        let located = walked_over.and_then(|()| walker.locate(self.cursor, step));
        self.perm = walker.into_perm();
        let outcome = located.and_then(|located| {
            sizes
                .check_pieces(step, located.walk.most_pieces)
                .map(|()| located)
        });
        let epoch = match &outcome {
            Ok(located) => located.start.epoch,
            Err(_) => self.cursor.epoch,
        };
        if self.past_end(epoch) {
            self.done = true;
            return None;
        }
        match &outcome {
            Ok(located) => {
                self.cursor = located.after();
                self.step += 1;
            }
            Err(_) => self.done = true,
        }
        Some(DocStep {
            inner: self.inner.clone(),
            step,
            epoch,
            sizes,
            outcome: outcome.map_err(Box::new),
            perm: self.perm.clone(),
        })
    }

    /// At least one more step until a step fails (then that failed step), no upper bound:
    /// the steps are endless, but may end at a failure, so `collect` must not reserve for
    /// an endless run.
    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            (1, None)
        }
    }
}
