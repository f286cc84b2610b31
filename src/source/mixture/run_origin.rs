//! [`RunOrigin`]: where a mixture's run starts, and the walk of the global sequence from
//! there.

use super::blend::normalized;
use super::state::WeightSpan;
use super::stop::Stop;
use super::walk::Walk;
use crate::source::sampling::skip::SkipSteps;

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
