//! What a loader needs from a `pinring.Mixture`: the core's [`Mixture`] of one kind of
//! sampler (token windows or records) with its sources' decoder, its states, and a pipeline
//! started over it.

use std::sync::Arc;

use pinring::source::{
    FixedRecords, Mixture, MixtureBuilder, MixtureState, RecordBytes, Segmented, TokenShards,
    Tokens,
};
use pinring::{Backend, Config, ConfigBuilder, Locate, Pipeline};

use crate::source::steps::Steps;

/// A mixture of samplers of one kind.
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
}

/// Runs `$body` with `$m` bound to the spec's mixture, whichever kind it mixes.
macro_rules! with_mix {
    ($spec:expr, $m:ident => $body:expr) => {
        match $spec {
            MixSpec::Tokens { mix: $m, .. } => $body,
            MixSpec::Records { mix: $m } => $body,
        }
    };
}

/// `mix` rebuilt with `change` applied to its builder.
fn rebuilt<S: Segmented + Clone>(
    mix: &Mixture<S>,
    change: impl FnOnce(MixtureBuilder<S>) -> MixtureBuilder<S>,
) -> pinring::Result<Mixture<S>> {
    change(mix.to_builder()).build()
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

impl MixSpec {
    /// The same spec with its mixture rebuilt by `change` (for either kind).
    fn map(
        &self,
        tokens: impl FnOnce(&Mixture<TokenShards>) -> pinring::Result<Mixture<TokenShards>>,
        records: impl FnOnce(&Mixture<FixedRecords>) -> pinring::Result<Mixture<FixedRecords>>,
    ) -> pinring::Result<MixSpec> {
        Ok(match self {
            MixSpec::Tokens { mix, decoder } => MixSpec::Tokens {
                mix: tokens(mix)?,
                decoder: *decoder,
            },
            MixSpec::Records { mix } => MixSpec::Records { mix: records(mix)? },
        })
    }

    /// The weights, as given.
    pub(crate) fn weights(&self) -> Vec<f64> {
        with_mix!(self, m => m.weights().to_vec())
    }

    /// Each source's share: the weights normalized.
    pub(crate) fn shares(&self) -> Vec<f64> {
        with_mix!(self, m => m.shares().to_vec())
    }

    /// Each source's samples per epoch of its own walk.
    pub(crate) fn epoch_lens(&self) -> Vec<u64> {
        with_mix!(self, m => m.epoch_lens())
    }

    /// The same mixture cutting its run into batches of `batch` samples on every rank,
    /// beginning at `steps.start` and leaving out `steps.skip`.
    pub(crate) fn batched(&self, batch: u64, steps: &Steps) -> pinring::Result<MixSpec> {
        self.map(
            |m| rebuilt(m, |b| stepped(b, batch, steps)),
            |m| rebuilt(m, |b| stepped(b, batch, steps)),
        )
    }

    /// The same mixture with other weights.
    pub(crate) fn with_weights(&self, weights: &[f64]) -> pinring::Result<MixSpec> {
        self.map(
            |m| rebuilt(m, |b| b.weights(weights)),
            |m| rebuilt(m, |b| b.weights(weights)),
        )
    }

    /// `state` with this mixture's weights from its point on (see `Mixture::reweight`).
    pub(crate) fn reweight(&self, state: &MixtureState) -> pinring::Result<MixtureState> {
        with_mix!(self, m => m.reweight(state))
    }

    /// Checks that this mixture can resume from `state`.
    pub(crate) fn check(&self, state: &MixtureState) -> pinring::Result<()> {
        with_mix!(self, m => m.check_state(state))
    }

    /// The state after this rank popped `samples` samples since `from` (the start when
    /// `None`).
    pub(crate) fn checkpoint(
        &self,
        from: Option<&MixtureState>,
        samples: u64,
    ) -> pinring::Result<MixtureState> {
        with_mix!(self, m => m.checkpoint_after(from, samples))
    }

    /// What places a batch's rows in their files: the mixture (it asks the row's source).
    pub(crate) fn locator(&self) -> Arc<dyn Locate> {
        with_mix!(self, m => Arc::new(m.clone()))
    }

    /// The config builder of a pipeline over this mixture: batches of `batch` samples of
    /// `sample_bytes` bytes, the mixture as the locator.
    pub(crate) fn config_base(&self, batch: usize, sample_bytes: usize) -> ConfigBuilder {
        Config::builder()
            .batch_size(batch)
            .bytes_per_sample(sample_bytes)
            .locator(self.locator())
    }

    /// Starts a pipeline of backend `B` over this mixture, from `from` (the start when
    /// `None`).
    pub(crate) fn start<B: Backend>(
        &self,
        config: Config<B>,
        from: Option<&MixtureState>,
    ) -> pinring::Result<Pipeline<B>> {
        match self {
            MixSpec::Tokens { mix, decoder } => {
                let samples = match from {
                    None => mix.iter(),
                    Some(state) => mix.iter_from(state)?,
                };
                Pipeline::new(config, mix.decoder(*decoder), samples)
            }
            MixSpec::Records { mix } => {
                let samples = match from {
                    None => mix.iter(),
                    Some(state) => mix.iter_from(state)?,
                };
                Pipeline::new(config, mix.decoder(RecordBytes), samples)
            }
        }
    }
}
