//! [`MixedSteps`]: a rank's steps of a mixture of packed documents, in order, from the
//! start or a state — each step walked over the mixed document stream for every rank, this
//! rank's pieces kept — leaving out the steps before the start step and the skipped ones.

use std::fmt;
use std::sync::Arc;

use super::inner::DocMixInner;
use super::step::MixedDocStep;
use super::stream::{walk_step, MixedStream};
use crate::feeding::feeder_stopped;
use crate::source::documents::index::BuiltBy;
use crate::source::mixture::run_origin::RunOrigin;
use crate::source::sampling::skip::SkipSteps;

/// The steps of one rank of a [`Mixture<Documents>`](crate::source::Mixture), in order:
/// what a [`Pipeline`](crate::Pipeline) pulls (one step a batch). Endless with
/// [`Stop::Never`](crate::source::Stop::Never); with a stop rule it ends before the step
/// the end would cut short. A step that cannot be made carries its error (the decoder
/// returns it, so `pop` reports it after the steps before it) and the iterator ends.
///
/// Every rank walks every step whole (the ranks take each step's documents in rank order
/// from the one stream), steps before the start step and skipped steps too, keeping only
/// its own pieces of the steps it yields. A shard of a source not indexed yet is indexed
/// when the walk reaches it (the step waits; in sequential order each source's thread
/// indexes ahead of the walk). A stop rule ends that walk too (a skipped range that runs
/// past the end ends the run); without one, on a pipeline's feeder thread, the walk over
/// skipped steps ends when that pipeline stops.
pub struct MixedSteps {
    inner: Arc<DocMixInner>,
    stream: MixedStream,
    /// The step the stream stands at the start of.
    at: u64,
    skip: SkipSteps,
    ended: bool,
}

impl fmt::Debug for MixedSteps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MixedSteps")
            .field("position", &self.stream.position())
            .field("step", &self.at)
            .field("ended", &self.ended)
            .finish()
    }
}

impl MixedSteps {
    /// The run of `inner` from `origin`.
    pub(crate) fn new(inner: Arc<DocMixInner>, origin: RunOrigin) -> Self {
        MixedSteps {
            stream: MixedStream::new(&inner, &origin, BuiltBy::Walk),
            at: origin.step,
            skip: origin.skip,
            ended: false,
            inner,
        }
    }

    /// The number of the next step it yields (if the run goes on that far).
    pub fn next_step(&self) -> u64 {
        self.skip
            .next_kept(self.at.max(self.inner.settings.run.start_step))
    }

    /// The position in the mixture's document sequence where the walk stands: after the
    /// last step walked.
    pub fn position(&self) -> u64 {
        self.stream.position()
    }
}

impl Iterator for MixedSteps {
    type Item = MixedDocStep;

    fn next(&mut self) -> Option<MixedDocStep> {
        while !self.ended {
            let k = self.at;
            let keep = self.skip.delivers(self.inner.settings.run.start_step, k);
            if !keep && feeder_stopped() {
                // Walking over skipped steps for a pipeline that stopped: end the walk.
                self.ended = true;
                return None;
            }
            let sizes = self.inner.schedule.at(k);
            let mut list = keep.then(|| self.inner.lists.take());
            let room = self.inner.lists.room();
            let run = &self.inner.settings.run;
            let (world, rank) = (run.world, run.rank);
            let walked = walk_step(&mut self.stream, sizes, world, rank, list.as_mut(), room);
            let (outcome, start) = match walked {
                Ok(Some(walked)) => {
                    self.at += 1;
                    let Some(list) = list else {
                        continue;
                    };
                    match sizes.check_pieces(k, walked.most_pieces) {
                        Ok(()) => (Ok(list), walked.start),
                        Err(e) => {
                            self.inner.lists.give_back(list);
                            self.ended = true;
                            (Err(Box::new(e)), walked.start)
                        }
                    }
                }
                Ok(None) => {
                    self.ended = true;
                    if let Some(list) = list {
                        self.inner.lists.give_back(list);
                    }
                    return None;
                }
                Err(e) => {
                    self.ended = true;
                    if let Some(list) = list {
                        self.inner.lists.give_back(list);
                    }
                    (Err(Box::new(e)), self.stream.position())
                }
            };
            return Some(MixedDocStep {
                inner: self.inner.clone(),
                step: k,
                sizes,
                start,
                outcome,
            });
        }
        None
    }

    /// At least one more step until a step fails or the stop rule ends the run (then
    /// none), no upper bound.
    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.ended {
            (0, Some(0))
        } else {
            (0, None)
        }
    }
}
