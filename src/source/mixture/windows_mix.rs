//! `Mixture<S>` of samplers of segments `S`: what is its own — its builder and batch
//! size, its sources, its run of samples and the state after a count of them, its
//! decoder and rows.

use super::builder::MixtureBuilder;
use super::mix::Mixture;
use super::state::MixtureState;
use super::windows_decoder::MixedDecoder;
use super::windows_member::WindowMember;
use super::windows_samples::MixedSamples;
use crate::decode::Decode;
use crate::error::Result;
use crate::locate::{Locate, Location};
use crate::row::Row;
use crate::setters::setters;
use crate::source::sampling::sampler::Sampler;
use crate::source::sampling::segmented::Segmented;

impl<S: Segmented + Clone> Mixture<S> {
    /// A builder over `sources`, samplers of one kind of source (token shards, or files of
    /// records) and one sample shape, each built alone: world size 1, no batch size, no
    /// steps (the mixture shards, batches and numbers the steps). Defaults: equal weights,
    /// seed 0, rank 0 of 1, no batch size, [`Stop::Never`](crate::source::Stop::Never).
    pub fn builder(sources: impl IntoIterator<Item = Sampler<S>>) -> MixtureBuilder<S> {
        MixtureBuilder::new(sources)
    }
}

impl<S: Segmented + Clone> MixtureBuilder<S> {
    setters! {
        /// The batch size each rank's pipeline cuts its samples into: it numbers the steps
        /// ([`MixedSample::step`](crate::source::MixedSample::step), reported by
        /// [`Batch::step`](crate::Batch::step)), and a stop rule ends the mixture on a whole
        /// step. Give the pipeline the same batch size.
        batch_size(samples: u64) => run.batch_size = Some(samples);
    }

    /// Checks the settings and returns the mixture. Sources and weights that cannot be
    /// mixed are [`ConfigError::Mixture`]: no source, more than 65536, a source that sets
    /// its own rank and world size, batch size, start step or skipped steps, samples of
    /// another window length or record size than source 0's, weights that are not one per
    /// source, negative, NaN, infinite or all 0. The mixture's own settings are checked as
    /// a sampler's are: a zero world size or batch size is [`SourceError::Zero`], a rank
    /// not below the world size [`SourceError::BadRank`], a start step or skipped steps
    /// without a batch size [`SourceError::StepsNeedBatchSize`], a reversed range
    /// [`SourceError::BadSkip`].
    ///
    /// [`ConfigError::Mixture`]: crate::ConfigError::Mixture
    /// [`SourceError::Zero`]: crate::error::source::SourceError::Zero
    /// [`SourceError::BadRank`]: crate::error::source::SourceError::BadRank
    /// [`SourceError::StepsNeedBatchSize`]: crate::error::source::SourceError::StepsNeedBatchSize
    /// [`SourceError::BadSkip`]: crate::error::source::SourceError::BadSkip
    pub fn build(self) -> Result<Mixture<S>> {
        let settings = self.checked()?;
        let members = (self.sources().iter().cloned())
            .map(|s| WindowMember::new(s, settings.seed))
            .collect::<Result<Vec<_>>>()?;
        Ok(Mixture::new(members, settings, ()))
    }
}

impl<S: Segmented> Mixture<S> {
    /// The sources, as given.
    pub fn sources(&self) -> impl ExactSizeIterator<Item = &Sampler<S>> {
        self.inner.members.iter().map(|m| &m.given)
    }

    /// The batch size, if set.
    pub fn batch_size(&self) -> Option<u64> {
        self.settings().run.batch
    }

    /// Each source's epoch length (its samples per epoch of its own walk).
    pub fn epoch_lens(&self) -> Vec<u64> {
        self.inner.members.iter().map(|m| m.epoch_len).collect()
    }

    /// The run from the start (or from [`start_step`](crate::source::MixtureBuilder::start_step)),
    /// this rank's samples, leaving out the skipped steps: endless with [`Stop::Never`](crate::source::Stop::Never).
    pub fn iter(&self) -> MixedSamples<S> {
        MixedSamples::new(self.run())
    }

    /// The run resumed from `state` on this mixture's rank, world size and batch size
    /// (which may differ from the saved run's), after checking it as
    /// [`check_state`](Self::check_state) does. Positions `state.consumed..` are split
    /// as a fresh run's are, so every position is delivered exactly once across the two
    /// runs; the steps go on from `state.step`, skipping the state's skipped steps and
    /// this mixture's.
    pub fn iter_from(&self, state: &MixtureState) -> Result<MixedSamples<S>> {
        Ok(MixedSamples::new(self.run_from(state)?))
    }

    /// The state of a run from `from` (the start when `None`) after this rank popped
    /// `consumed` samples since: the global count (`consumed` whole steps of `W·B`, with
    /// the steps the run skipped or began after counted in), each source's place there,
    /// the weights' history, the step and the skipped steps. It walks the blend rule over
    /// the positions since `from` (arithmetic only). `from` is checked as `iter_from`
    /// checks it. Where a stop rule ends the run first (a skipped range or a start step
    /// past its end), the state at its end, after its last whole step: its `step` is the
    /// run's step count, and a resume from it delivers nothing.
    ///
    /// ```
    /// use pinring::source::{write_shard, Mixture, MixtureState, Order, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-mixstate-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 1000])?;
    /// write_shard(dir.join("b.bin"), &[0; 500])?;
    /// let source = |f: &str| TokenShards::open([dir.join(f)]).unwrap().windows(9)
    ///     .order(Order::Shuffled { seed: 3 }).build().unwrap();
    /// let on = |rank, world, batch| Mixture::builder([source("a.bin"), source("b.bin")])
    ///     .weights([2.0, 1.0]).shard(rank, world).batch_size(batch).build();
    /// // Two ranks popped 5 batches of 4: 40 positions of the global sequence.
    /// let states = [on(0, 2, 4)?.checkpoint_after(None, 20)?, on(1, 2, 4)?.checkpoint_after(None, 20)?];
    /// let state = MixtureState::merge(&states)?;
    /// assert_eq!((state.consumed, state.step), (40, 5));
    /// assert_eq!(state.sources[0].consumed + state.sources[1].consumed, 40);
    /// // Three ranks with batches of 2 go on from there.
    /// let mut ids = std::collections::BTreeSet::new();
    /// for rank in 0..3 {
    ///     for s in on(rank, 3, 2)?.iter_from(&state)?.take(6) {
    ///         assert_eq!(s.step(), Some(5 + ids.len() as u64 % 6 / 2));
    ///         assert!(ids.insert((s.source(), s.item().id())));
    ///     }
    /// }
    /// assert_eq!(MixtureState::<pinring::source::Checkpoint>::from_text(&state.to_text())?, state);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn checkpoint_after(
        &self,
        from: Option<&MixtureState>,
        consumed: u64,
    ) -> Result<MixtureState> {
        let run = &self.settings().run;
        let b = run.batch.unwrap_or(1);
        let part = (consumed % b).saturating_mul(run.world);
        self.inner.state_after(from, consumed / b, part)
    }

    /// Where the sample with id `id` of source `source` lies (see
    /// [`Sampler::location`](crate::source::Sampler::location)); `None` for a source or id
    /// the mixture does not have.
    pub fn location(&self, source: u16, id: u64) -> Option<Location> {
        self.locate(&Row { id, len: 0, source })
    }

    /// A [`MixedDecoder`] of this mixture's samples with `decoder`, the decoder of its
    /// sources' samples.
    pub fn decoder<D: Decode<Sample = S::Window>>(&self, decoder: D) -> MixedDecoder<D> {
        MixedDecoder::new(decoder, self.len())
    }
}
