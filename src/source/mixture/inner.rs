//! [`MixInner`]: what a [`Mixture`](super::mix::Mixture) of any kind shares with its
//! iterators and decoder — its members, settings and packing — and what a run needs of
//! them all alike: where it starts (fresh, or a state checked), the [`Stream`] of its
//! global sequence from there, its walk over whole steps, and its state at a position.

use std::fmt;

use super::member::Member;
use super::run_origin::RunOrigin;
use super::settings::MixSettings;
use super::state::{MixtureState, WeightSpan};
use super::stream::Stream;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::documents::index::BuiltBy;
use crate::source::sampling::skip::SkipSteps;

/// What a mixture and its iterators share. (Public only as the hidden inside of a
/// [`Mixture`](crate::source::Mixture); nothing outside the crate can name it.)
pub struct MixInner<M: Member> {
    pub(crate) members: Vec<M>,
    pub(crate) settings: MixSettings,
    pub(crate) packing: M::Packing,
}

impl<M: Member> fmt::Debug for MixInner<M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MixInner")
            .field("sources", &self.members.len())
            .field("weights", &self.settings.weights)
            .finish_non_exhaustive()
    }
}

impl<M: Member> MixInner<M> {
    /// Each source's items by count, shards built by `by`.
    pub(crate) fn readers(&self, by: BuiltBy) -> Vec<M::Reader> {
        self.members.iter().map(|m| m.reader(by)).collect()
    }

    /// The sequence of the run from `origin`, shards built by `by`.
    pub(crate) fn stream(&self, origin: &RunOrigin, by: BuiltBy) -> Stream<M::Reader> {
        let readers = self.readers(by);
        let epoch_lens = (self.members.iter().zip(&readers))
            .map(|(m, r)| m.epoch_len(r))
            .collect();
        let s = &self.settings;
        Stream {
            walk: origin.walk(&s.norm, s.stop, epoch_lens),
            readers,
        }
    }

    /// Checks `state` but for its weights in force: its version, seed, stop rule and
    /// number of sources against these settings, each source's record as that source
    /// checks its own ([`Member::count_of`]), and its weights' history against the counts
    /// there; each source's count at its position.
    pub(crate) fn check_run(&self, state: &MixtureState<M::Record>) -> Result<Vec<u64>> {
        let s = &self.settings;
        state.check_mixture(s.seed, s.stop, self.members.len())?;
        let counts = (self.members.iter().zip(&state.sources).enumerate())
            .map(|(index, (member, saved))| member.count_of(saved, index))
            .collect::<Result<Vec<u64>>>()?;
        state.check_history(&counts)?;
        Ok(counts)
    }

    /// The origin of a run resumed from `from` (checked), or of a fresh run.
    pub(crate) fn origin(&self, from: Option<&MixtureState<M::Record>>) -> Result<RunOrigin> {
        match from {
            Some(state) => {
                let counts = self.check_run(state)?;
                self.settings.resumed(state, counts)
            }
            None => Ok(self.settings.fresh(self.members.len())),
        }
    }

    /// The state of the run from `from` (checked; the start when `None`) after `steps`
    /// delivered steps and `part` positions of the next one (a sampler's state may stand
    /// inside a step). It walks the steps — the steps before the start step and the
    /// skipped ones among them too, each delivered one checked ([`Member::check_step`]) —
    /// over the sources' indexes alone (nothing read). Where the stop rule ends the run
    /// first, the state after its last whole step: its `step` is the run's step count, and
    /// a resume from it delivers nothing.
    pub(crate) fn state_after(
        &self,
        from: Option<&MixtureState<M::Record>>,
        steps: u64,
        part: u64,
    ) -> Result<MixtureState<M::Record>> {
        let origin = self.origin(from)?;
        let first = self.settings.run.start_step;
        let target = origin.skip.after_kept(first.max(origin.step), steps);
        let mut stream = self.stream(&origin, BuiltBy::Start);
        let mut step = origin.step;
        let mut at = stream.walk.clone();
        while step < target {
            let Some(walked) =
                M::walk_step(&mut stream, &self.settings, &self.packing, step, None)?
            else {
                break;
            };
            if origin.skip.delivers(first, step) {
                M::check_step(&self.packing, step, &walked)?;
            }
            step += 1;
            at = stream.walk.clone();
        }
        if step == target && part > 0 {
            let mut walk = at.clone();
            if walk.skip_within(part) == part {
                at = walk;
            }
        }
        // Steps of samples without a batch size are not numbered.
        if M::STEPS_NEED_BATCH_SIZE && self.settings.run.batch.is_none() {
            step = origin.step;
        }
        let place = (at.position(), step);
        let state = self.state(
            origin.history,
            place,
            &at.counts(),
            &origin.skip,
            &mut stream.readers,
        );
        Ok(state?)
    }

    /// The state at global position `at`, step `step`, with the weights' `history` and
    /// the skipped steps `skip`, where each source's count is `counts` (their places found
    /// by `readers`).
    pub(crate) fn state(
        &self,
        history: Vec<WeightSpan>,
        (at, step): (u64, u64),
        counts: &[u64],
        skip: &SkipSteps,
        readers: &mut [M::Reader],
    ) -> Result<MixtureState<M::Record>, SourceError> {
        let world = self.settings.run.world;
        let sources = (self.members.iter().zip(readers).zip(counts))
            .map(|((m, reader), &n)| m.record(reader, n, step, world))
            .collect::<Result<Vec<_>, SourceError>>()?;
        Ok(self.settings.state(history, (at, step), skip, sources))
    }
}
