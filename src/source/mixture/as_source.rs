//! A [`Mixture`] as a [`Source`]: of samplers of one [`WindowFormat`] (a mixed window a
//! sample, batches of a batch size) or of [`Documents`] (a packed step a batch). Its state
//! is a [`MixtureState`] whose sources are their own [`State`]s.

use std::sync::Arc;

use super::builder_settings::BuilderSettings;
use super::decoder::MixedDecoder;
use super::mix::Mixture;
use super::samples::MixedSamples;
use super::state::MixtureState;
use super::Stop;
use super::{MixedSteps, PackMixedDocuments};
use crate::config::{Config, ConfigBuilder};
use crate::error::source::SourceError;
use crate::error::Result;
use crate::locate::Locate;
use crate::source::contract::Source;
use crate::source::documents::checkpoint::DocumentsCheckpoint;
use crate::source::documents::packed::Documents;
use crate::source::run::Run;
use crate::source::sampling::as_source::{kept_between, WindowFormat};
use crate::source::sampling::checkpoint::Checkpoint;
use crate::source::state::State;

impl<C> MixtureState<C> {
    /// The same state with each source's record turned into another by `f`.
    pub(crate) fn map_sources<D>(self, f: impl FnMut(C) -> D) -> MixtureState<D> {
        MixtureState {
            version: self.version,
            seed: self.seed,
            stop: self.stop,
            weights: self.weights,
            consumed: self.consumed,
            step: self.step,
            skip: self.skip,
            world_size: self.world_size,
            batch_size: self.batch_size,
            sources: self.sources.into_iter().map(f).collect(),
        }
    }
}

/// A mixture's state in `from`, its sources' records read by `pick` (`None`: a state of
/// another kind of source, a mismatch naming `here`).
fn mixture_state<C>(
    from: Option<&State>,
    here: &str,
    pick: impl Fn(&State) -> Option<&C>,
) -> Result<Option<MixtureState<C>>>
where
    C: Clone,
{
    let mismatch = |saved: &str| -> crate::Error {
        SourceError::MixtureMismatch {
            what: "the kind of source".to_owned(),
            saved: saved.to_owned(),
            here: here.to_owned(),
        }
        .into()
    };
    let Some(state) = from else {
        return Ok(None);
    };
    let State::Mixture(m) = state else {
        return Err(mismatch(state.described()));
    };
    let mut sources = Vec::with_capacity(m.sources.len());
    for s in &m.sources {
        sources.push(pick(s).cloned().ok_or_else(|| mismatch(s.described()))?);
    }
    Ok(Some(MixtureState {
        version: m.version,
        seed: m.seed,
        stop: m.stop,
        weights: m.weights.clone(),
        consumed: m.consumed,
        step: m.step,
        skip: m.skip.clone(),
        world_size: m.world_size,
        batch_size: m.batch_size,
        sources,
    }))
}

fn windows_of(state: &State) -> Option<&Checkpoint> {
    match state {
        State::Windows(c) => Some(c),
        _ => None,
    }
}

fn documents_of(state: &State) -> Option<&DocumentsCheckpoint> {
    match state {
        State::Documents(c) => Some(c),
        _ => None,
    }
}

/// The run a mixture was built with.
fn own_run(settings: &super::settings::MixSettings) -> Run {
    let run = &settings.run;
    Run {
        rank: run.rank,
        world_size: run.world,
        batch_size: run.batch,
        drop_last: true,
        start_step: run.start_step,
        skip_steps: run.skip.ranges().iter().map(|&(a, b)| a..b).collect(),
        epochs: None,
    }
}

/// Kept steps of a mixture's run from `from` before the first kept step at or after
/// `step`: what its `checkpoint_after` counts.
fn kept_before(
    settings: &super::settings::MixSettings,
    from: (u64, &[(u64, u64)]),
    step: u64,
) -> u64 {
    let (origin, saved_skip) = from;
    let skip = settings.run.skip.union(saved_skip);
    let first = settings.run.start_step.max(origin);
    let next = skip.next_kept(step.max(first));
    kept_between(skip.ranges(), first, next)
}

impl BuilderSettings {
    /// These settings with a loader's run in place of their own.
    pub(crate) fn with_run(mut self, run: &Run) -> Self {
        self.run = run.settings();
        self
    }
}

impl<S: WindowFormat> Source for Mixture<S> {
    type Sample = <MixedSamples<S> as Iterator>::Item;
    type Decoder = MixedDecoder<S::Decoder>;
    type Samples = MixedSamples<S>;

    fn packs_steps(&self) -> bool {
        false
    }

    fn has_epochs(&self) -> bool {
        false
    }

    fn own_run(&self) -> Run {
        own_run(self.settings())
    }

    fn with_run(&self, run: &Run) -> Result<Self> {
        self.to_builder().map_settings(|s| s.with_run(run)).build()
    }

    fn config(&self) -> ConfigBuilder {
        let first = self.sources().next().expect("a mixture has sources");
        let b = Config::builder()
            .bytes_per_sample(first.source().sample_bytes(first.window()))
            .locator(self.locator());
        match self.batch_size().and_then(|b| usize::try_from(b).ok()) {
            Some(n) => b.batch_size(n),
            None => b,
        }
    }

    fn decoder(&self) -> Self::Decoder {
        let first = self.sources().next().expect("a mixture has sources");
        Mixture::<S>::decoder(self, first.source().window_decoder())
    }

    fn samples(&self, from: Option<&State>, _epochs: Option<u64>) -> Result<MixedSamples<S>> {
        match mixture_state(from, "a mixture of token windows or records", windows_of)? {
            None => Ok(self.iter()),
            Some(state) => self.iter_from(&state),
        }
    }

    fn state_at(&self, from: Option<&State>, _near: Option<&State>, step: u64) -> Result<State> {
        let from = mixture_state(from, "a mixture of token windows or records", windows_of)?;
        let origin = from
            .as_ref()
            .map_or((0, &[][..]), |s| (s.step, &s.skip[..]));
        let steps = kept_before(self.settings(), origin, step);
        let samples = steps.saturating_mul(self.batch_size().unwrap_or(1));
        let state = self.checkpoint_after(from.as_ref(), samples)?;
        Ok(State::Mixture(state.map_sources(State::Windows)))
    }

    fn check(&self, state: &State) -> Result<()> {
        match mixture_state(
            Some(state),
            "a mixture of token windows or records",
            windows_of,
        )? {
            Some(state) => self.check_state(&state),
            None => Ok(()),
        }
    }

    fn stop_rule(&self) -> Option<&'static str> {
        (self.stop() != Stop::Never).then(|| self.stop().name())
    }

    fn locator(&self) -> Arc<dyn Locate> {
        Arc::new(self.clone())
    }

    fn weights(&self) -> Option<&[f64]> {
        Some(Mixture::weights(self))
    }

    fn reweighted(&self, weights: &[f64], state: &State) -> Result<(Self, State)> {
        let mix = self.to_builder().weights(weights).build()?;
        let saved = mixture_state(
            Some(state),
            "a mixture of token windows or records",
            windows_of,
        )?
        .unwrap_or_else(|| unreachable!("a state was given"));
        let state = mix.reweight(&saved)?.map_sources(State::Windows);
        Ok((mix, State::Mixture(state)))
    }
}

impl Source for Mixture<Documents> {
    type Sample = <MixedSteps as Iterator>::Item;
    type Decoder = PackMixedDocuments;
    type Samples = MixedSteps;

    fn packs_steps(&self) -> bool {
        true
    }

    fn has_epochs(&self) -> bool {
        false
    }

    fn own_run(&self) -> Run {
        own_run(self.settings())
    }

    fn with_run(&self, run: &Run) -> Result<Self> {
        self.to_builder().map_settings(|s| s.with_run(run)).build()
    }

    fn config(&self) -> ConfigBuilder {
        Mixture::<Documents>::config(self).locator(self.locator())
    }

    fn decoder(&self) -> PackMixedDocuments {
        Mixture::<Documents>::decoder(self)
    }

    fn samples(&self, from: Option<&State>, _epochs: Option<u64>) -> Result<MixedSteps> {
        match mixture_state(from, "a mixture of packed documents", documents_of)? {
            None => Ok(self.iter()),
            Some(state) => self.iter_from(&state),
        }
    }

    fn state_at(&self, from: Option<&State>, near: Option<&State>, step: u64) -> Result<State> {
        let from = mixture_state(from, "a mixture of packed documents", documents_of)?;
        // A state of this run at an earlier step walks on from there.
        let near = mixture_state(near, "a mixture of packed documents", documents_of)?
            .filter(|n| n.step <= step);
        let start = near.or(from);
        let origin = start
            .as_ref()
            .map_or((0, &[][..]), |s| (s.step, &s.skip[..]));
        let steps = kept_before(self.settings(), origin, step);
        let state = self.checkpoint_after(start.as_ref(), steps)?;
        Ok(State::Mixture(state.map_sources(State::Documents)))
    }

    fn check(&self, state: &State) -> Result<()> {
        match mixture_state(Some(state), "a mixture of packed documents", documents_of)? {
            Some(state) => self.check_state(&state),
            None => Ok(()),
        }
    }

    fn stop_rule(&self) -> Option<&'static str> {
        (self.stop() != Stop::Never).then(|| self.stop().name())
    }

    fn locator(&self) -> Arc<dyn Locate> {
        Arc::new(self.clone())
    }

    fn weights(&self) -> Option<&[f64]> {
        Some(Mixture::weights(self))
    }

    fn reweighted(&self, weights: &[f64], state: &State) -> Result<(Self, State)> {
        let mix = self.to_builder().weights(weights).build()?;
        let saved = mixture_state(Some(state), "a mixture of packed documents", documents_of)?
            .unwrap_or_else(|| unreachable!("a state was given"));
        let state = mix.reweight(&saved)?.map_sources(State::Documents);
        Ok((mix, State::Mixture(state)))
    }
}
