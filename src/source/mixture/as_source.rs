//! A [`Mixture`] as a [`Source`], written once for every kind: of samplers of one
//! [`WindowFormat`] (a mixed window a sample, batches of a batch size) or of [`Documents`]
//! (a packed step a batch), each kind giving what differs ([`MixedSource`]). Its state is
//! a [`MixtureState`] whose sources are their own [`State`]s.

use std::convert::Infallible;
use std::sync::Arc;

use super::builder::MixtureBuilder;
use super::documents_decoder::PackMixedDocuments;
use super::documents_member::DocMember;
use super::documents_steps::MixedSteps;
use super::member::Member;
use super::mix::Mixture;
use super::mixable::Mixable;
use super::settings::MixSettings;
use super::state::MixtureState;
use super::step_walk::StepWalk;
use super::stop::Stop;
use super::windows_decoder::MixedDecoder;
use super::windows_samples::MixedSamples;
use crate::config::{Config, ConfigBuilder};
use crate::decode::Decode;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::locate::Locate;
use crate::source::contract::Source;
use crate::source::documents::packed::Documents;
use crate::source::run::Run;
use crate::source::sampling::as_source::kept_between;
use crate::source::sampling::window_format::WindowFormat;
use crate::source::state::State;

/// What a mixture's kind gives its [`Source`] impl: its samples, decoder and batches.
/// (Unnameable outside the crate.)
pub trait MixedSource: Mixable {
    /// What its iterator yields.
    type Sample: Send + 'static;
    /// Its decoder.
    type Decoder: Decode<Sample = Self::Sample>;
    /// Its iterator.
    type Samples: Iterator<Item = Self::Sample> + Send + 'static;

    /// Whether a batch is one packed step.
    const PACKS_STEPS: bool;

    /// Builds `builder`.
    fn build(builder: MixtureBuilder<Self>) -> Result<Mixture<Self>>;

    /// The config builder of its batches, with what places its rows.
    fn config(mix: &Mixture<Self>) -> ConfigBuilder;

    /// Its decoder.
    fn decoder(mix: &Mixture<Self>) -> Self::Decoder;

    /// Its samples of the run `walk` walks.
    fn samples(walk: StepWalk<Self::Member>) -> Self::Samples;
}

impl<S: WindowFormat> MixedSource for S {
    type Sample = <MixedSamples<S> as Iterator>::Item;
    type Decoder = MixedDecoder<S::Decoder>;
    type Samples = MixedSamples<S>;

    const PACKS_STEPS: bool = false;

    fn build(builder: MixtureBuilder<S>) -> Result<Mixture<S>> {
        builder.build()
    }

    fn config(mix: &Mixture<S>) -> ConfigBuilder {
        let first = mix.sources().next().expect("a mixture has sources");
        let b = Config::builder()
            .bytes_per_sample(first.source().sample_bytes(first.window()))
            .locator(Arc::new(mix.clone()));
        match mix.batch_size().and_then(|b| usize::try_from(b).ok()) {
            Some(n) => b.batch_size(n),
            None => b,
        }
    }

    fn decoder(mix: &Mixture<S>) -> Self::Decoder {
        let first = mix.sources().next().expect("a mixture has sources");
        mix.decoder(first.source().window_decoder())
    }

    fn samples(walk: StepWalk<Self::Member>) -> MixedSamples<S> {
        MixedSamples::new(walk)
    }
}

impl MixedSource for Documents {
    type Sample = <MixedSteps as Iterator>::Item;
    type Decoder = PackMixedDocuments;
    type Samples = MixedSteps;

    const PACKS_STEPS: bool = true;

    fn build(builder: MixtureBuilder<Documents>) -> Result<Mixture<Documents>> {
        builder.build()
    }

    fn config(mix: &Mixture<Documents>) -> ConfigBuilder {
        mix.config().locator(Arc::new(mix.clone()))
    }

    fn decoder(mix: &Mixture<Documents>) -> PackMixedDocuments {
        mix.decoder()
    }

    fn samples(walk: StepWalk<DocMember>) -> MixedSteps {
        MixedSteps::new(walk)
    }
}

impl<C> MixtureState<C> {
    /// The same state with each source's record turned into another by `f`, or `f`'s
    /// first error.
    pub(crate) fn try_map<D, E>(
        &self,
        f: impl FnMut(&C) -> Result<D, E>,
    ) -> Result<MixtureState<D>, E> {
        Ok(MixtureState {
            version: self.version,
            seed: self.seed,
            stop: self.stop,
            weights: self.weights.clone(),
            consumed: self.consumed,
            step: self.step,
            skip: self.skip.clone(),
            world_size: self.world_size,
            batch_size: self.batch_size,
            sources: self.sources.iter().map(f).collect::<Result<_, E>>()?,
        })
    }

    /// The same state with each source's record as a [`State`].
    fn into_state<M: Member<Record = C>>(self) -> State
    where
        C: Clone,
    {
        let Ok(state) = self.try_map(|c| Ok::<_, Infallible>(M::state(c.clone())));
        State::Mixture(state)
    }
}

/// A mixture's state of kind `S` in `from`: `None` without one; a state of another kind of
/// source (or of a mixture of another kind) is a mismatch naming the kind.
fn mixture_state<S: Mixable>(from: Option<&State>) -> Result<Option<MixtureState<S::Record>>> {
    let mismatch = |saved: &str| -> crate::error::Error {
        SourceError::MixtureMismatch {
            what: "the kind of source".to_owned(),
            saved: saved.to_owned(),
            here: S::Member::KIND.to_owned(),
        }
        .into()
    };
    let Some(state) = from else {
        return Ok(None);
    };
    let State::Mixture(m) = state else {
        return Err(mismatch(state.described()));
    };
    let record = |s: &State| {
        S::Member::record_of(s)
            .cloned()
            .ok_or_else(|| mismatch(s.described()))
    };
    m.try_map(record).map(Some)
}

/// Kept steps of a mixture's run from `from` (its step and skipped steps) before the
/// first kept step at or after `step`: what its `checkpoint_after` counts.
fn kept_before(
    settings: &MixSettings,
    (origin, saved_skip): (u64, &[(u64, u64)]),
    step: u64,
) -> u64 {
    let skip = settings.run.skip.union(saved_skip);
    let first = settings.run.start_step.max(origin);
    let next = skip.next_kept(step.max(first));
    kept_between(skip.ranges(), first, next)
}

impl<S: MixedSource> Source for Mixture<S> {
    type Sample = S::Sample;
    type Decoder = S::Decoder;
    type Samples = S::Samples;

    fn packs_steps(&self) -> bool {
        S::PACKS_STEPS
    }

    fn has_epochs(&self) -> bool {
        false
    }

    fn own_run(&self) -> Run {
        self.settings().run.run()
    }

    fn with_run(&self, run: &Run) -> Result<Self> {
        S::build(self.to_builder().with_run(run))
    }

    fn config(&self) -> ConfigBuilder {
        S::config(self)
    }

    fn decoder(&self) -> S::Decoder {
        S::decoder(self)
    }

    fn samples(&self, from: Option<&State>, _epochs: Option<u64>) -> Result<S::Samples> {
        let walk = match mixture_state::<S>(from)? {
            None => self.run(),
            Some(state) => self.run_from(&state)?,
        };
        Ok(S::samples(walk))
    }

    /// Walked from the latest state known at or before `step`: `near`, or `from`.
    fn state_at(&self, from: Option<&State>, near: Option<&State>, step: u64) -> Result<State> {
        let from = mixture_state::<S>(from)?;
        let near = mixture_state::<S>(near)?.filter(|n| n.step <= step);
        let start = near.or(from);
        let origin = start
            .as_ref()
            .map_or((0, &[][..]), |s| (s.step, &s.skip[..]));
        let steps = kept_before(self.settings(), origin, step);
        let state = self.inner.state_after(start.as_ref(), steps, 0)?;
        Ok(state.into_state::<S::Member>())
    }

    fn check(&self, state: &State) -> Result<()> {
        match mixture_state::<S>(Some(state))? {
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
        let mix = S::build(self.to_builder().weights(weights))?;
        let saved =
            mixture_state::<S>(Some(state))?.unwrap_or_else(|| unreachable!("a state was given"));
        let state = mix.reweight(&saved)?.into_state::<S::Member>();
        Ok((mix, state))
    }
}
