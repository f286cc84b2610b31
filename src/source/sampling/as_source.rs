//! A [`Sampler`] as a [`Source`]: token windows and records, written once for every
//! [`WindowFormat`] — a [`Segmented`](super::segmented::Segmented) set that says how its
//! windows decode.

use std::sync::Arc;

use super::checkpoint::Checkpoint;
use super::sampler::Sampler;
use super::samples::Samples;
use super::window_format::WindowFormat;
use crate::config::{Config, ConfigBuilder};
use crate::error::source::SourceError;
use crate::error::Result;
use crate::locate::Locate;
use crate::source::contract::{EpochPlace, Source};
use crate::source::run::Run;
use crate::source::state::State;

/// The window state in `from`, or a mismatch for a state of another kind.
pub(crate) fn windows_state(from: Option<&State>) -> Result<Option<&Checkpoint>> {
    match from {
        None => Ok(None),
        Some(State::Windows(c)) => Ok(Some(c)),
        Some(other) => Err(SourceError::CheckpointMismatch {
            what: "the kind of source".to_owned(),
            saved: other.described().to_owned(),
            here: "token windows or records".to_owned(),
        }
        .into()),
    }
}

/// Steps `from..to` that `skip` does not leave out.
pub(crate) fn kept_between(skip: &[(u64, u64)], from: u64, to: u64) -> u64 {
    let skipped: u64 = skip
        .iter()
        .map(|&(a, b)| b.min(to).saturating_sub(a.max(from)))
        .sum();
    to.saturating_sub(from).saturating_sub(skipped)
}

impl<S: WindowFormat> Sampler<S> {
    /// Where the batch at `step` of the run from `from` stands in its epoch, and the
    /// checkpoint there.
    fn placed(&self, from: Option<&Checkpoint>, step: u64) -> Result<(EpochPlace, Checkpoint)> {
        let at = self.checkpoint_at_step(from, step)?;
        let raw = self.batches_left(&at)?.unwrap_or(0);
        let left = kept_between(&at.skip, at.step, at.step.saturating_add(raw));
        Ok((
            EpochPlace {
                epoch: at.epoch,
                left,
            },
            at,
        ))
    }
}

impl<S: WindowFormat> Source for Sampler<S> {
    type Sample = S::Window;
    type Decoder = S::Decoder;
    type Samples = Samples<S>;

    fn packs_steps(&self) -> bool {
        false
    }

    fn own_run(&self) -> Run {
        Run {
            drop_last: self.drop_last(),
            ..self.inner.run.run()
        }
    }

    fn with_run(&self, run: &Run) -> Result<Self> {
        self.to_builder().run(run.clone()).build()
    }

    fn config(&self) -> ConfigBuilder {
        let b = Config::builder()
            .bytes_per_sample(self.source().sample_bytes(self.window()))
            .locator(self.locator());
        match self.batch_size().and_then(|b| usize::try_from(b).ok()) {
            Some(n) => b.batch_size(n),
            None => b,
        }
    }

    fn decoder(&self) -> S::Decoder {
        self.source().window_decoder()
    }

    fn samples(&self, from: Option<&State>, epochs: Option<u64>) -> Result<Samples<S>> {
        let samples = match windows_state(from)? {
            None => self.iter(),
            Some(state) => self.iter_from_checkpoint(state)?,
        };
        Ok(match epochs {
            Some(end) => samples.until_epoch(end),
            None => samples,
        })
    }

    fn state_at(&self, from: Option<&State>, _near: Option<&State>, step: u64) -> Result<State> {
        // Arithmetic from the run's origin: nothing to walk.
        self.checkpoint_at_step(windows_state(from)?, step)
            .map(State::Windows)
    }

    fn check(&self, state: &State) -> Result<()> {
        match windows_state(Some(state))? {
            Some(c) => self.check_checkpoint(c),
            None => Ok(()),
        }
    }

    fn epoch_batches(&self) -> Option<u64> {
        Sampler::epoch_batches(self)
    }

    fn epoch_len(&self) -> Option<u64> {
        Some(Sampler::epoch_len(self))
    }

    fn place(&self, from: Option<&State>, step: u64) -> Result<Option<EpochPlace>> {
        if self.batch_size().is_none() {
            return Ok(None);
        }
        Ok(Some(self.placed(windows_state(from)?, step)?.0))
    }

    fn total_batches(&self, from: Option<&State>, epochs: u64) -> Result<Option<u64>> {
        let Some(per_epoch) = Sampler::epoch_batches(self) else {
            return Ok(None);
        };
        let from = windows_state(from)?;
        let first = from.map_or(0, |c| c.step).max(self.start_step());
        let (place, at) = self.placed(from, first)?;
        if place.epoch >= epochs {
            return Ok(Some(0));
        }
        let raw = self.batches_left(&at)?.unwrap_or(0);
        let later = (epochs - place.epoch - 1).saturating_mul(per_epoch);
        let end = at.step.saturating_add(raw).saturating_add(later);
        Ok(Some(kept_between(&at.skip, at.step, end)))
    }

    fn end_step(&self, from: Option<&State>, epochs: u64) -> Result<Option<u64>> {
        let Some(per_epoch) = Sampler::epoch_batches(self) else {
            return Ok(None);
        };
        // From the run's origin (its start step aside): the state resumed from, or step 0.
        let origin = match windows_state(from)? {
            Some(state) => state.clone(),
            None => self.checkpoint(0, 0),
        };
        if origin.epoch >= epochs {
            return Ok(Some(origin.step));
        }
        let raw = self.batches_left(&origin)?.unwrap_or(0);
        let later = (epochs - origin.epoch - 1).saturating_mul(per_epoch);
        Ok(Some(origin.step.saturating_add(raw).saturating_add(later)))
    }

    fn locator(&self) -> Arc<dyn Locate> {
        Arc::new(self.clone())
    }
}
