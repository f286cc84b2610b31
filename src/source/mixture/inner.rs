//! What a [`Mixture`](crate::source::Mixture) and its iterators share: the sources, the
//! settings, and where a run starts.

use super::blend::normalized;
use super::member::Member;
use super::state::WeightSpan;
use super::stop::Stop;
use super::walk::Walk;
use crate::source::sampling::skip::SkipSteps;

/// What a mixture of samplers and its iterators share. (Public only as the hidden
/// [`Mixable::Shared`](super::mixable::Mixable) of samplers' segment sets; nothing outside
/// the crate can name it.)
pub struct MixInner<S> {
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
#[derive(Debug, Clone)]
pub(crate) struct RunOrigin {
    pub(crate) history: Vec<WeightSpan>,
    pub(crate) at: u64,
    pub(crate) step: u64,
    pub(crate) counts: Vec<u64>,
    pub(crate) skip: SkipSteps,
}

impl<S> std::fmt::Debug for MixInner<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixInner")
            .field("sources", &self.members.len())
            .field("weights", &self.weights)
            .finish_non_exhaustive()
    }
}

impl<S> MixInner<S> {
    /// The walk of a run from `origin`.
    pub(crate) fn walk(&self, origin: &RunOrigin) -> Walk {
        origin.walk(
            &self.norm,
            self.stop,
            self.members.iter().map(|m| m.epoch_len).collect(),
        )
    }
}

impl RunOrigin {
    /// The global sequence from this origin under the weights in force there (`norm`, the
    /// mixture's weights normalized, where the history has none) and the stop rule `stop`,
    /// each source's epoch `epoch_lens` long.
    pub(crate) fn walk(&self, norm: &[f64], stop: Stop, epoch_lens: Vec<u64>) -> Walk {
        // A run's history is never empty (a fresh one has its first span, a resumed one's
        // was checked); without one the weights in force start at 0.
        let (weights, base) = match self.history.last() {
            Some(span) => (
                normalized(&span.weights, None).unwrap_or_else(|_| norm.to_vec()),
                span.counts.clone(),
            ),
            None => (norm.to_vec(), vec![0; self.counts.len()]),
        };
        Walk::new(weights, base, &self.counts, self.at, stop, epoch_lens)
    }
}
