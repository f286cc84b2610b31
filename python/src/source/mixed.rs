//! What a loader needs from a `pinring.Mixture`: the core's [`Mixture`] of one kind of
//! source (token windows, records, or packed documents) with its decoder, its states, and
//! a pipeline started over it.

use std::sync::Arc;

use pinring::source::{
    DocumentMixtureBuilder, Documents, DocumentsCheckpoint, FixedRecords, Mixture, MixtureBuilder,
    MixtureState, RecordBytes, Schedule, Segmented, SourceError, Stop, TokenShards, Tokens,
};
use pinring::{Backend, Config, ConfigBuilder, Fields, Locate, Pipeline};

use crate::position::Position;
use crate::source::steps::Steps;
use crate::state::SourceState;

/// A mixture of sources of one kind.
#[derive(Debug, Clone)]
pub(crate) enum MixSpec {
    /// Of token windows, decoded to one dtype.
    Tokens {
        /// The mixture.
        mix: Mixture<TokenShards>,
        /// Widens the tokens to the dtype.
        decoder: Tokens,
    },
    /// Of records.
    Records {
        /// The mixture.
        mix: Mixture<FixedRecords>,
    },
    /// Of packed documents: a batch is one step of this rank.
    Documents {
        /// The mixture.
        mix: Mixture<Documents>,
    },
}

/// Runs `$body` with `$m` bound to the spec's mixture, whichever kind it mixes.
macro_rules! with_mix {
    ($spec:expr, $m:ident => $body:expr) => {
        match $spec {
            MixSpec::Tokens { mix: $m, .. } => $body,
            MixSpec::Records { mix: $m } => $body,
            MixSpec::Documents { mix: $m } => $body,
        }
    };
}

/// `b` with batches of `batch` samples, beginning at `steps.start` and leaving out
/// `steps.skip`.
fn stepped<S: Segmented + Clone>(
    b: MixtureBuilder<S>,
    batch: u64,
    steps: &Steps,
) -> MixtureBuilder<S> {
    let b = b.batch_size(batch).skip_steps(steps.skip.iter().copied());
    if steps.start > 0 {
        b.start_step(steps.start)
    } else {
        b
    }
}

/// `b` beginning at `steps.start` and leaving out `steps.skip` (a step a batch).
fn stepped_documents(b: DocumentMixtureBuilder, steps: &Steps) -> DocumentMixtureBuilder {
    let b = b.skip_steps(steps.skip.iter().copied());
    if steps.start > 0 {
        b.start_step(steps.start)
    } else {
        b
    }
}

/// The error of a state of another kind than the mixture's (`here`).
fn other_kind(state: &SourceState, here: &str) -> pinring::Error {
    SourceError::MixtureMismatch {
        what: "the kind of source".to_owned(),
        saved: state.kind().trim_start_matches("a ").to_owned(),
        here: here.to_owned(),
    }
    .into()
}

/// `state` as a window mixture's, or the error of a state of another kind.
fn windows_of(state: &SourceState) -> pinring::Result<&MixtureState> {
    match state {
        SourceState::Mixture(m) => Ok(m),
        other => Err(other_kind(other, "Mixture of TokenWindows or FixedRecords")),
    }
}

/// `state` as a documents mixture's, or the error of a state of another kind.
fn documents_of(state: &SourceState) -> pinring::Result<&MixtureState<DocumentsCheckpoint>> {
    match state {
        SourceState::DocumentMixture(m) => Ok(m),
        other => Err(other_kind(other, "Mixture of Documents")),
    }
}

/// The window mixture state in `from`, if any.
fn windows_state(from: Option<&SourceState>) -> pinring::Result<Option<&MixtureState>> {
    from.map(windows_of).transpose()
}

/// The documents mixture state in `from`, if any.
fn documents_state(
    from: Option<&SourceState>,
) -> pinring::Result<Option<&MixtureState<DocumentsCheckpoint>>> {
    from.map(documents_of).transpose()
}

impl MixSpec {
    /// The same spec with its mixture rebuilt (for each kind).
    fn map(
        &self,
        tokens: impl FnOnce(&Mixture<TokenShards>) -> pinring::Result<Mixture<TokenShards>>,
        records: impl FnOnce(&Mixture<FixedRecords>) -> pinring::Result<Mixture<FixedRecords>>,
        documents: impl FnOnce(&Mixture<Documents>) -> pinring::Result<Mixture<Documents>>,
    ) -> pinring::Result<MixSpec> {
        Ok(match self {
            MixSpec::Tokens { mix, decoder } => MixSpec::Tokens {
                mix: tokens(mix)?,
                decoder: *decoder,
            },
            MixSpec::Records { mix } => MixSpec::Records { mix: records(mix)? },
            MixSpec::Documents { mix } => MixSpec::Documents {
                mix: documents(mix)?,
            },
        })
    }

    /// Whether it mixes packed documents (a batch is a step).
    pub(crate) fn is_documents(&self) -> bool {
        matches!(self, MixSpec::Documents { .. })
    }

    /// A mixture of documents' step: its fields and schedule; None for other mixtures.
    pub(crate) fn step_layout(&self) -> Option<(Fields, Schedule)> {
        match self {
            MixSpec::Documents { mix } => Some((mix.fields(), mix.schedule().clone())),
            _ => None,
        }
    }

    /// The weights, as given.
    pub(crate) fn weights(&self) -> Vec<f64> {
        with_mix!(self, m => m.weights().to_vec())
    }

    /// Each source's share: the weights normalized.
    pub(crate) fn shares(&self) -> Vec<f64> {
        with_mix!(self, m => m.shares().to_vec())
    }

    /// Each source's samples (documents) per epoch of its own walk, where known (a
    /// documents source counts its documents once every shard is indexed).
    pub(crate) fn epoch_lens(&self) -> Vec<Option<u64>> {
        match self {
            MixSpec::Tokens { mix, .. } => mix.epoch_lens().into_iter().map(Some).collect(),
            MixSpec::Records { mix } => mix.epoch_lens().into_iter().map(Some).collect(),
            MixSpec::Documents { mix } => mix.epoch_lens(),
        }
    }

    /// The same mixture cutting its run into batches of `batch` samples on every rank
    /// (documents: a step a batch, `batch` unused), beginning at `steps.start` and leaving
    /// out `steps.skip`.
    pub(crate) fn batched(&self, batch: u64, steps: &Steps) -> pinring::Result<MixSpec> {
        self.map(
            |m| stepped(m.to_builder(), batch, steps).build(),
            |m| stepped(m.to_builder(), batch, steps).build(),
            |m| stepped_documents(m.to_builder(), steps).build(),
        )
    }

    /// The same mixture with other weights.
    pub(crate) fn with_weights(&self, weights: &[f64]) -> pinring::Result<MixSpec> {
        self.map(
            |m| m.to_builder().weights(weights).build(),
            |m| m.to_builder().weights(weights).build(),
            |m| m.to_builder().weights(weights).build(),
        )
    }

    /// `state` with this mixture's weights from its point on (see `Mixture::reweight`).
    pub(crate) fn reweight(&self, state: &SourceState) -> pinring::Result<SourceState> {
        Ok(match self {
            MixSpec::Documents { mix } => {
                SourceState::DocumentMixture(mix.reweight(documents_of(state)?)?)
            }
            MixSpec::Tokens { mix, .. } => SourceState::Mixture(mix.reweight(windows_of(state)?)?),
            MixSpec::Records { mix } => SourceState::Mixture(mix.reweight(windows_of(state)?)?),
        })
    }

    /// The name of the stop rule, unless it is "never" (an endless run).
    pub(crate) fn stop_rule(&self) -> Option<&'static str> {
        let stop = with_mix!(self, m => m.stop());
        (stop != Stop::Never).then(|| stop.name())
    }

    /// The steps the run has (counted from step 0), when its stop rule ends it before the
    /// first step it would deliver from `start`, so that a run beginning there would
    /// deliver nothing; `None` otherwise, and without a stop rule. The mixture's states
    /// say so: at the start step, then after one more step, which does not advance where
    /// the stop rule ends the run first (both walks stop at the run's end).
    pub(crate) fn steps_if_past_end(
        &self,
        start: u64,
        from: Option<&SourceState>,
    ) -> pinring::Result<Option<u64>> {
        if start == 0 || self.stop_rule().is_none() {
            return Ok(None);
        }
        fn ends<C>(
            at: MixtureState<C>,
            one_more: impl FnOnce(&MixtureState<C>) -> pinring::Result<MixtureState<C>>,
        ) -> pinring::Result<Option<u64>> {
            let after = one_more(&at)?;
            Ok((after.step == at.step).then_some(at.step))
        }
        // (A mixture of windows numbers steps only with a batch size, which a Loader gives.)
        match self {
            MixSpec::Tokens { mix, .. } => match mix.batch_size() {
                Some(b) => ends(mix.checkpoint_after(windows_state(from)?, 0)?, |at| {
                    mix.checkpoint_after(Some(at), b)
                }),
                None => Ok(None),
            },
            MixSpec::Records { mix } => match mix.batch_size() {
                Some(b) => ends(mix.checkpoint_after(windows_state(from)?, 0)?, |at| {
                    mix.checkpoint_after(Some(at), b)
                }),
                None => Ok(None),
            },
            MixSpec::Documents { mix } => {
                ends(mix.checkpoint_after(documents_state(from)?, 0)?, |at| {
                    mix.checkpoint_after(Some(at), 1)
                })
            }
        }
    }

    /// Checks that this mixture can resume from `state`.
    pub(crate) fn check(&self, state: &SourceState) -> pinring::Result<()> {
        match self {
            MixSpec::Tokens { mix, .. } => mix.check_state(windows_of(state)?),
            MixSpec::Records { mix } => mix.check_state(windows_of(state)?),
            MixSpec::Documents { mix } => mix.check_state(documents_of(state)?),
        }
    }

    /// The state after what `position` says was popped since its `from` (the start when
    /// `None`): samples for windows and records; steps for documents, walked on from the
    /// last state computed (kept in `position`).
    pub(crate) fn checkpoint(&self, position: &mut Position) -> pinring::Result<SourceState> {
        let from = position.from.as_ref();
        match self {
            MixSpec::Tokens { mix, .. } => mix
                .checkpoint_after(windows_state(from)?, position.samples)
                .map(SourceState::Mixture),
            MixSpec::Records { mix } => mix
                .checkpoint_after(windows_state(from)?, position.samples)
                .map(SourceState::Mixture),
            MixSpec::Documents { mix } => {
                let (done, after) = match &position.walked_after {
                    Some((done, SourceState::DocumentMixture(state)))
                        if *done <= position.batches =>
                    {
                        (*done, Some(state))
                    }
                    _ => (0, documents_state(from)?),
                };
                let state = mix.checkpoint_after(after, position.batches - done)?;
                let state = SourceState::DocumentMixture(state);
                position.walked_after = Some((position.batches, state.clone()));
                Ok(state)
            }
        }
    }

    /// What places a batch's rows in their files: the mixture (it asks the row's source).
    pub(crate) fn locator(&self) -> Arc<dyn Locate> {
        with_mix!(self, m => Arc::new(m.clone()))
    }

    /// The config builder of a pipeline over this mixture: batches of `batch` samples of
    /// `sample_bytes` bytes (documents: the mixture's own, a step a batch), the mixture as
    /// the locator.
    pub(crate) fn config_base(&self, batch: usize, sample_bytes: usize) -> ConfigBuilder {
        match self {
            MixSpec::Documents { mix } => mix.config(),
            _ => Config::builder()
                .batch_size(batch)
                .bytes_per_sample(sample_bytes),
        }
        .locator(self.locator())
    }

    /// Starts a pipeline of backend `B` over this mixture, from `from` (the start when
    /// `None`).
    pub(crate) fn start<B: Backend>(
        &self,
        config: Config<B>,
        from: Option<&SourceState>,
    ) -> pinring::Result<Pipeline<B>> {
        match self {
            MixSpec::Tokens { mix, decoder } => {
                let samples = match windows_state(from)? {
                    None => mix.iter(),
                    Some(state) => mix.iter_from(state)?,
                };
                Pipeline::new(config, mix.decoder(*decoder), samples)
            }
            MixSpec::Records { mix } => {
                let samples = match windows_state(from)? {
                    None => mix.iter(),
                    Some(state) => mix.iter_from(state)?,
                };
                Pipeline::new(config, mix.decoder(RecordBytes), samples)
            }
            MixSpec::Documents { mix } => {
                let steps = match documents_state(from)? {
                    None => mix.iter(),
                    Some(state) => mix.iter_from(state)?,
                };
                Pipeline::new(config, mix.decoder(), steps)
            }
        }
    }
}
