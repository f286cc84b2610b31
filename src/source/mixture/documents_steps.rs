//! [`MixedSteps`]: a rank's steps of a mixture of packed documents, in order, from the
//! start or a state — each step walked over the mixed document stream for every rank, this
//! rank's pieces kept — leaving out the steps before the start step and the skipped ones.

use super::documents_member::DocMember;
use super::documents_step::MixedDocStep;
use super::step_walk::StepWalk;

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
#[derive(Debug)]
pub struct MixedSteps {
    walk: StepWalk<DocMember>,
}

impl MixedSteps {
    /// The steps of the run `walk` walks.
    pub(crate) fn new(walk: StepWalk<DocMember>) -> Self {
        MixedSteps { walk }
    }

    /// The number of the next step it yields (if the run goes on that far).
    pub fn next_step(&self) -> u64 {
        self.walk.next_step()
    }

    /// The position in the mixture's document sequence where the walk stands: after the
    /// last step walked.
    pub fn position(&self) -> u64 {
        self.walk.position()
    }
}

impl Iterator for MixedSteps {
    type Item = MixedDocStep;

    fn next(&mut self) -> Option<MixedDocStep> {
        if self.walk.ended() {
            return None;
        }
        let inner = self.walk.inner.clone();
        let lists = &inner.packing.lists;
        let mut list = lists.take();
        let Some((step, walked)) = self.walk.next_kept(&mut list) else {
            lists.give_back(list);
            return None;
        };
        let sizes = inner.packing.schedule.at(step);
        let (outcome, start) = match walked {
            Ok(walked) => match sizes.check_pieces(step, walked.most_pieces) {
                Ok(()) => (Ok(list), walked.start),
                Err(e) => {
                    lists.give_back(list);
                    self.walk.end();
                    (Err(Box::new(e)), walked.start)
                }
            },
            // The walk ended with it.
            Err(e) => {
                lists.give_back(list);
                (Err(Box::new(e)), self.walk.position())
            }
        };
        Some(MixedDocStep {
            inner,
            step,
            sizes,
            start,
            outcome,
        })
    }

    /// At least one more step until a step fails or the stop rule ends the run (then
    /// none), no upper bound.
    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.walk.ended() {
            (0, Some(0))
        } else {
            (0, None)
        }
    }
}
