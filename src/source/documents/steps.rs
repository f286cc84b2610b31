//! [`Steps`]: a rank's steps, in order, from the start or a checkpoint; endless (epoch
//! after epoch) or to the source's end epoch. Each is a [`DocStep`]: the iterator locates
//! the step (dropping the partial steps the walk drops), checks that this step's
//! `cu_seqlens` holds every rank's pieces, and moves on — walking over the steps before the
//! start step and the skipped ones without yielding them, never past the end epoch, and
//! ending that walk when the pipeline it feeds stops; the decoder does the rest.

use std::fmt;
use std::sync::Arc;

use super::inner::Inner;
use super::index::BuiltBy;
use super::permutation::Permutation;
use super::step::DocStep;
use super::walk::Cursor;
use super::walker::{Located, Walker};
use crate::feeding::feeder_stopped;
use crate::source::sampling::skip::SkipSteps;

/// The steps of one rank of a [`Documents`](crate::source::Documents) source, in order:
/// what a [`Pipeline`](crate::Pipeline) pulls (one step a batch). Endless, epoch after
/// epoch — or to the start of the source's
/// [`until_epoch`](crate::source::Documents::until_epoch) — unless a step cannot be made:
/// that step carries its error (the decoder returns it, so `pop` reports it after the steps
/// before it) and the iterator ends.
///
/// Each step is found by walking the shards' indexes; a shard not indexed yet by the
/// thread ahead of the walk is indexed here (the step waits:
/// [`IndexStats::on_walk`](crate::source::IndexStats::on_walk) counts it). The steps
/// before the [`start_step`](crate::source::DocumentsBuilder::start_step) and the
/// [`skip_steps`](crate::source::DocumentsBuilder::skip_steps) are walked the same way
/// (their documents used up on every rank) but not yielded: the other steps keep their
/// numbers. A step walked over that fits nowhere is still an error (the walk cannot go
/// on); one that packs too many documents is not (it is never packed).
///
/// That walk is bounded: it stops at the end epoch (a skipped range that runs past it
/// ends the run there, after the steps before it), and, on a pipeline's feeder thread, when
/// that pipeline stops (dropped, or its [`StopHandle`](crate::StopHandle) used): the
/// iterator then ends, so no thread walks on for a pipeline that is gone.
pub struct Steps {
    inner: Arc<Inner>,
    /// Where the walk stands: after the last step walked.
    cursor: Cursor,
    /// The next step walked's number (an optimizer step).
    step: u64,
    /// The next micro-step of `step` walked: `0..grad_accum_steps`.
    micro: u64,
    /// The first step yielded, at the earliest (the start step).
    first: u64,
    /// The steps walked over, not yielded.
    skip: SkipSteps,
    /// The first epoch none of whose steps is yielded or walked (`None`: endless).
    end: Option<u64>,
    /// The permutation of the cursor's epoch, once made (shuffled order).
    perm: Option<Arc<Permutation>>,
    done: bool,
}

impl fmt::Debug for Steps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Steps")
            .field("cursor", &self.cursor)
            .field("step", &self.step)
            .field("micro", &self.micro)
            .field("first", &self.first)
            .field("skip", &self.skip.ranges())
            .field("end", &self.end)
            .field("done", &self.done)
            .finish()
    }
}

impl Steps {
    /// The steps from `cursor`, at step `step` (its epoch's permutation `perm`, if at
    /// hand), yielding none before `first`, none of `skip` and none of epoch `end` or
    /// later.
    pub(super) fn new(
        inner: Arc<Inner>,
        cursor: Cursor,
        step: u64,
        perm: Option<Arc<Permutation>>,
        first: u64,
        skip: SkipSteps,
        end: Option<u64>,
    ) -> Self {
        Steps {
            inner,
            cursor,
            step,
            micro: 0,
            first,
            skip,
            end,
            perm,
            done: false,
        }
    }

    /// Whether a step located at `located` lies past the end epoch.
    fn past_end(&self, located: &Located) -> bool {
        self.end.is_some_and(|end| located.start.epoch >= end)
    }

    /// Ends the iterator, the walk standing at `cursor` (where the next step would start).
    fn end_at(&mut self, cursor: Cursor, perm: Option<Arc<Permutation>>) -> Option<DocStep> {
        self.cursor = cursor;
        self.perm = perm;
        self.done = true;
        None
    }

    /// The number of the next step it yields (if the run goes on that far): past the
    /// start step and the skipped steps.
    pub fn next_step(&self) -> u64 {
        if self.micro > 0 {
            return self.step;
        }
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
        if self.done || self.end.is_some_and(|end| self.cursor.epoch >= end) {
            self.done = true;
            return None;
        }
        let mut walker = Walker::new(&self.inner, BuiltBy::Walk, self.perm.take());
        let pops = self.inner.schedule.grad_accum_steps();
        // The steps walked over: their documents used up, nothing yielded (each of its
        // `G` micro-steps walked).
        let mut walked_over = Ok(());
        'over: while self.micro == 0 && !self.skip.delivers(self.first, self.step) {
            if feeder_stopped() {
                let cursor = self.cursor;
                return self.end_at(cursor, walker.into_perm());
            }
            for _ in 0..pops {
                match walker.locate(self.cursor, self.step) {
                    Ok(located) if self.past_end(&located) => {
                        return self.end_at(located.start, walker.into_perm());
                    }
                    Ok(located) => self.cursor = located.after(),
                    Err(e) => {
                        walked_over = Err(e);
                        break 'over;
                    }
                }
            }
            self.step += 1;
        }
        let (step, micro) = (self.step, self.micro);
        let sizes = self.inner.schedule.at(step);
        let located = walked_over.and_then(|()| walker.locate(self.cursor, step));
        if let Ok(located) = &located
            && self.past_end(located) {
                return self.end_at(located.start, walker.into_perm());
            }
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
        match &outcome {
            Ok(located) => {
                self.cursor = located.after();
                self.micro += 1;
                if self.micro == pops {
                    self.micro = 0;
                    self.step += 1;
                }
            }
            Err(_) => self.done = true,
        }
        Some(DocStep {
            inner: self.inner.clone(),
            step,
            micro,
            epoch,
            sizes,
            outcome: outcome.map_err(Box::new),
            perm: self.perm.clone(),
        })
    }

    /// No lower bound (the end epoch may come at the next step), no upper bound: the
    /// steps are endless, or end at the end epoch or a failure, so `collect` must not
    /// reserve for an endless run.
    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            (0, None)
        }
    }
}
