//! [`Source`]: what a run needs of a source — the shape of its batches, its decoder, its
//! samples from a saved place, its state at a step, its check of a saved state, its epochs
//! where it has them, what places its rows — and [`IntoSource`], what
//! [`Loader::builder`](crate::Loader::builder) takes.
//!
//! Token windows and records ([`Sampler`](super::Sampler)), packed documents
//! ([`Documents`](super::Documents)) and mixtures of either ([`Mixture`](super::Mixture))
//! implement it; [`AnySource`](super::AnySource) is their union. A
//! [`Loader`](crate::Loader) is the run of a source over a pipeline.

use std::fmt;
use std::sync::Arc;

use super::run::Run;
use super::state::State;
use crate::config::ConfigBuilder;
use crate::decode::Decode;
use crate::error::Result;
use crate::locate::Locate;

/// Where the next batch of a run stands in its epoch: the epoch, and the batches that
/// epoch has left (those the run delivers: not the skipped steps).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochPlace {
    /// The epoch of the next batch.
    pub epoch: u64,
    /// Batches its epoch has left, the next one included.
    pub left: u64,
}

/// What a run needs of a source. A [`Loader`](crate::Loader) calls these; a format
/// implements what differs and inherits the rest.
///
/// Every method that takes `from` reads it as the state the run resumed from (`None`: a
/// fresh run from step 0), and the source is the one [`with_run`](Self::with_run) set up
/// for the run (its rank, world size, batch size, start step and skipped steps).
pub trait Source: Clone + fmt::Debug + Send + Sync + 'static {
    /// What the source's iterator yields: a window, a step of packed documents, a mixed
    /// sample.
    type Sample: Send + 'static;
    /// Writes a sample into its place in the pinned slot, on the decode pool.
    type Decoder: Decode<Sample = Self::Sample>;
    /// The samples of a run, in order (the pipeline's feeder pulls them).
    type Samples: Iterator<Item = Self::Sample> + Send + 'static;

    /// Whether a batch is one step of packed documents, sized by the source itself: then a
    /// run has no batch size ([`Run::batch_size`] is `None`).
    fn packs_steps(&self) -> bool;

    /// Whether the source walks epochs of its own (a mixture does not: each of its sources
    /// has its own, and its run ends where its stop rule says).
    fn has_epochs(&self) -> bool {
        true
    }

    /// The run this source was built with. A loader owns the run, so it refuses a source
    /// that set any of it (`Run::first_set`).
    fn own_run(&self) -> Run;

    /// This source set up for `run`; the checks of the run's settings are the source's.
    fn with_run(&self, run: &Run) -> Result<Self>;

    /// The config builder of its batches: the batch size and a sample's bytes, or the
    /// fields of a step, and what places its rows. The loader adds the pipeline's settings.
    fn config(&self) -> ConfigBuilder;

    /// Its decoder.
    fn decoder(&self) -> Self::Decoder;

    /// The run's samples from `from`, to the end of epoch `epochs - 1` when `epochs` is
    /// given (endless, or to the source's own end, when not).
    fn samples(&self, from: Option<&State>, epochs: Option<u64>) -> Result<Self::Samples>;

    /// The state of the run from `from` once every batch before step `step` was
    /// consumed: the next batch is the first kept step at or after it. `near`, when
    /// given, is a state of this run at an earlier step, which a source that walks to its
    /// states may walk on from.
    fn state_at(&self, from: Option<&State>, near: Option<&State>, step: u64) -> Result<State>;

    /// Checks that this source can resume from `state`: a state of another kind, dataset,
    /// order, seed or shape is a mismatch naming what differs.
    fn check(&self, state: &State) -> Result<()>;

    /// Batches an epoch on this rank, the same on every rank, where it is known up front.
    fn epoch_batches(&self) -> Option<u64> {
        None
    }

    /// Samples an epoch on this rank, where it is known up front.
    fn epoch_len(&self) -> Option<u64> {
        None
    }

    /// Where the batch at `step` of the run from `from` stands in its epoch, where epochs'
    /// lengths are known up front (`None` otherwise).
    fn place(&self, from: Option<&State>, step: u64) -> Result<Option<EpochPlace>> {
        let _ = (from, step);
        Ok(None)
    }

    /// Batches the run from `from` delivers before epoch `epochs`, where that is known up
    /// front (`None` otherwise).
    fn total_batches(&self, from: Option<&State>, epochs: u64) -> Result<Option<u64>> {
        let _ = (from, epochs);
        Ok(None)
    }

    /// The step at which the run from `from` ends when capped at `epochs` epochs, where
    /// that is known by arithmetic (token windows and records); `None` otherwise.
    fn end_step(&self, from: Option<&State>, epochs: u64) -> Result<Option<u64>> {
        let _ = (from, epochs);
        Ok(None)
    }

    /// The name of the rule by which the run ends of itself, without an epoch cap: a
    /// mixture's stop rule (`"first"`, `"all"`); `None` for a run that goes on until its
    /// epochs end (or forever).
    fn stop_rule(&self) -> Option<&'static str> {
        None
    }

    /// What places the rows of its batches in their files.
    fn locator(&self) -> Arc<dyn Locate>;

    /// A mixture's weights (`None` for a single source).
    fn weights(&self) -> Option<&[f64]> {
        None
    }

    /// The same mixture with new `weights` from `state` on, and the state that records the
    /// change. A source that is not a mixture refuses.
    fn reweighted(&self, weights: &[f64], state: &State) -> Result<(Self, State)> {
        let _ = (weights, state);
        Err(crate::error::ConfigError::Run {
            field: "weights",
            why: "this source has no weights: only a Mixture can be reweighted".to_owned(),
        }
        .into())
    }
}

/// What [`Loader::builder`](crate::Loader::builder) takes: a [`Source`], or what makes one
/// (a [`FixedRecords`](super::FixedRecords) set, read one record a sample in file order).
pub trait IntoSource {
    /// The source it makes.
    type Source: Source;

    /// Makes it.
    fn into_source(self) -> Result<Self::Source>;
}

impl<S: Source> IntoSource for S {
    type Source = S;

    fn into_source(self) -> Result<S> {
        Ok(self)
    }
}
