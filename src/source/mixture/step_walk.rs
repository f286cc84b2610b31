//! [`StepWalk`]: a rank's run of a mixture walked step by step, as its iterators
//! ([`MixedSamples`](super::windows_samples::MixedSamples),
//! [`MixedSteps`](super::documents_steps::MixedSteps)) pull it — every step walked whole
//! for every rank, the steps before the start step and the skipped ones without keeping
//! anything — and where it ends.

use std::fmt;
use std::sync::Arc;

use super::inner::MixInner;
use super::member::Member;
use super::run_origin::RunOrigin;
use super::stream::Stream;
use crate::error::source::SourceError;
use crate::feeding::feeder_stopped;
use crate::source::documents::index::BuiltBy;
use crate::source::sampling::skip::SkipSteps;

/// A run from its origin, walked step by step. (Public only as what a mixture's kind
/// makes its iterator of; nothing outside the crate can name it.)
pub struct StepWalk<M: Member> {
    pub(crate) inner: Arc<MixInner<M>>,
    pub(crate) stream: Stream<M::Reader>,
    /// The step the stream stands at the start of.
    at: u64,
    skip: SkipSteps,
    ended: bool,
}

impl<M: Member> fmt::Debug for StepWalk<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StepWalk")
            .field("position", &self.position())
            .field("next_step", &self.next_step())
            .field("ended", &self.ended)
            .finish()
    }
}

impl<M: Member> StepWalk<M> {
    /// The run of `inner` from `origin`; shards the walk reaches that no one indexed yet
    /// are indexed by the walk.
    pub(crate) fn new(inner: Arc<MixInner<M>>, origin: RunOrigin) -> Self {
        StepWalk {
            stream: inner.stream(&origin, BuiltBy::Walk),
            at: origin.step,
            skip: origin.skip,
            ended: false,
            inner,
        }
    }

    /// The number of the next step it delivers (if the run goes on that far).
    pub(crate) fn next_step(&self) -> u64 {
        let first = self.inner.settings.run.start_step;
        self.skip.next_kept(self.at.max(first))
    }

    /// The global position where the walk stands: after the last step walked.
    pub(crate) fn position(&self) -> u64 {
        self.stream.walk.position()
    }

    /// Whether the run has ended.
    pub(crate) fn ended(&self) -> bool {
        self.ended
    }

    /// Ends the run (after a step that could not be made).
    pub(crate) fn end(&mut self) {
        self.ended = true;
    }

    /// Walks to the next delivered step — over the steps before the start step and the
    /// skipped ones — and walks it, keeping this rank's part in `keep`: its number, and
    /// what the walk says or why the step cannot be made (the run ends after it). `None`
    /// when the run ends first: the stop rule ends the sequence, or, on a pipeline's feeder
    /// thread, that pipeline stopped while steps were walked over.
    pub(crate) fn next_kept(
        &mut self,
        keep: &mut M::Kept,
    ) -> Option<(u64, Result<M::Walked, SourceError>)> {
        while !self.ended {
            let k = self.at;
            let delivered = self.skip.delivers(self.inner.settings.run.start_step, k);
            if !delivered && feeder_stopped() {
                // Walking over steps for a pipeline that stopped: end the walk.
                self.ended = true;
                return None;
            }
            let kept = delivered.then_some(&mut *keep);
            match M::walk_step(
                &mut self.stream,
                &self.inner.settings,
                &self.inner.packing,
                k,
                kept,
            ) {
                Ok(Some(walked)) => {
                    self.at += 1;
                    if delivered {
                        return Some((k, Ok(walked)));
                    }
                }
                Ok(None) => {
                    self.ended = true;
                    return None;
                }
                Err(e) => {
                    self.ended = true;
                    return Some((k, Err(e)));
                }
            }
        }
        None
    }
}
