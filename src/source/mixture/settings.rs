//! [`MixSettings`]: the settings every [`Mixture`](super::mix::Mixture) holds — the
//! weights, the seed, the stop rule and the checked run (the ranks, the batch size, the
//! start step and the skipped steps) — and what follows from them alone: where a fresh or
//! resumed run starts, and the state a run records.

use super::run_origin::RunOrigin;
use super::state::{MixtureState, WeightSpan, MIXTURE_STATE_VERSION};
use super::stop::Stop;
use crate::error::Result;
use crate::source::run::CheckedRun;
use crate::source::sampling::skip::SkipSteps;

/// The settings of a mixture, checked. (Public only inside the hidden member of a
/// mixture's [`Mixable`](super::mixable::Mixable) kind; nothing outside the crate can name
/// it.)
#[derive(Debug)]
pub struct MixSettings {
    /// The weights as given.
    pub(crate) weights: Vec<f64>,
    /// The weights normalized.
    pub(crate) norm: Vec<f64>,
    pub(crate) seed: u64,
    pub(crate) stop: Stop,
    /// The rank, world size, batch size (a mixture of samplers'; none for one of
    /// documents, whose every step is a batch), start step and skipped steps, checked.
    pub(crate) run: CheckedRun,
}

impl MixSettings {
    /// The origin of a fresh run over `sources` sources.
    pub(crate) fn fresh(&self, sources: usize) -> RunOrigin {
        RunOrigin {
            history: vec![WeightSpan {
                from: 0,
                weights: self.weights.clone(),
                counts: vec![0; sources],
            }],
            at: 0,
            step: 0,
            counts: vec![0; sources],
            skip: self.run.skip.clone(),
        }
    }

    /// The origin of a run resumed from `state`, where each source's count is `counts`
    /// (checked already), after checking that the weights in force are these settings'.
    pub(crate) fn resumed<C>(
        &self,
        state: &MixtureState<C>,
        counts: Vec<u64>,
    ) -> Result<RunOrigin> {
        state.check_weights(&self.weights, &self.norm)?;
        Ok(RunOrigin {
            history: state.weights.clone(),
            at: state.consumed,
            step: state.step,
            counts,
            skip: self.run.skip.union(&state.skip),
        })
    }

    /// The weights' history and skipped steps of `state` reweighted to these settings'
    /// weights at its point, where each source's count is `counts`; `None` when its
    /// weights in force are these settings' already.
    pub(crate) fn reweighted<C>(
        &self,
        state: &MixtureState<C>,
        counts: &[u64],
    ) -> Option<(Vec<WeightSpan>, SkipSteps)> {
        if state.weights_in_force_are(&self.norm) {
            return None;
        }
        let history = state.history_with(&self.weights, counts);
        Some((history, SkipSteps::merged(state.skip.clone())))
    }

    /// The state at global position `at`, step `step`, with the weights' `history`, the
    /// skipped steps `skip` and each source's own state `sources`; its batch size is the
    /// run's (0: none, as for a mixture of packed documents, whose every item is a step).
    pub(crate) fn state<C>(
        &self,
        history: Vec<WeightSpan>,
        (at, step): (u64, u64),
        skip: &SkipSteps,
        sources: Vec<C>,
    ) -> MixtureState<C> {
        MixtureState {
            version: MIXTURE_STATE_VERSION,
            seed: self.seed,
            stop: self.stop,
            weights: history,
            consumed: at,
            step,
            skip: skip.ranges().to_vec(),
            world_size: self.run.world,
            batch_size: self.run.batch.unwrap_or(0),
            sources,
        }
    }
}
