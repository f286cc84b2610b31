//! What a [`Mixture`](crate::source::Mixture) and its iterators share: the sources, the
//! settings, and where a run starts.

use super::blend::normalized;
use super::member::Member;
use super::state::WeightSpan;
use super::stop::Stop;
use super::walk::Walk;
use crate::source::sampling::skip::SkipSteps;

/// What a mixture and its iterators share.
pub(crate) struct MixInner<S> {
    pub(crate) members: Vec<Member<S>>,
    /// The weights as given.
    pub(crate) weights: Vec<f64>,
    /// The weights normalized.
    pub(crate) norm: Vec<f64>,
    pub(crate) seed: u64,
    pub(crate) rank: u64,
    pub(crate) world: u64,
    pub(crate) batch: Option<u64>,
    pub(crate) stop: Stop,
    pub(crate) start_step: u64,
    pub(crate) skip: SkipSteps,
}

/// Where a run starts: the global position, the step, each source's count there, the
/// weights' history and the skipped steps.
pub(crate) struct RunOrigin {
    pub(crate) history: Vec<WeightSpan>,
    pub(crate) at: u64,
    pub(crate) step: u64,
    pub(crate) counts: Vec<u64>,
    pub(crate) skip: SkipSteps,
}

impl<S> MixInner<S> {
    /// The walk of a run from `origin`.
    pub(crate) fn walk(&self, origin: &RunOrigin) -> Walk {
        // A run's history is never empty (a fresh one has its first span, a resumed one's
        // was checked); without one the weights in force start at 0.
        let (weights, base) = match origin.history.last() {
            Some(span) => (
                normalized(&span.weights, None).unwrap_or_else(|_| self.norm.clone()),
                span.counts.clone(),
            ),
            None => (self.norm.clone(), vec![0; self.members.len()]),
        };
        Walk::new(
            weights,
            base,
            &origin.counts,
            origin.at,
            self.stop,
            self.members.iter().map(|m| m.epoch_len).collect(),
        )
    }
}
