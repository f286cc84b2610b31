//! [`MixtureBuilder`]: a [`Mixture`]'s settings, checked by
//! [`build`](MixtureBuilder::build); [`Mixture::builder`] and [`Mixture::to_builder`].

use std::fmt;
use std::sync::Arc;

use super::builder_settings::{BuilderSettings, ShapeDifference, SourceRules};
use super::inner::MixInner;
use super::member::Member;
use super::mix::Mixture;
use super::stop::Stop;
use crate::error::Result;
use crate::setters::setters;
use crate::source::run::Run;
use crate::source::sampling::sampler::Sampler;
use crate::source::sampling::segmented::Segmented;

/// Builds a [`Mixture`]; see [`Mixture::builder`].
#[must_use]
pub struct MixtureBuilder<S> {
    sources: Vec<Sampler<S>>,
    settings: BuilderSettings,
}

impl<S> fmt::Debug for MixtureBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MixtureBuilder")
            .field("sources", &self.sources.len())
            .field("weights", &self.settings.weights)
            .field("seed", &self.settings.seed)
            .field("stop", &self.settings.stop)
            .field("run", &self.settings.run)
            .finish()
    }
}

impl<S: Segmented + Clone> Mixture<S> {
    /// A builder over `sources`, samplers of one kind of source (token shards, or files of
    /// records) and one sample shape, each built alone: world size 1, no batch size, no
    /// steps (the mixture shards, batches and numbers the steps). Defaults: equal weights,
    /// seed 0, rank 0 of 1, no batch size, [`Stop::Never`].
    pub fn builder(sources: impl IntoIterator<Item = Sampler<S>>) -> MixtureBuilder<S> {
        MixtureBuilder {
            sources: sources.into_iter().collect(),
            settings: BuilderSettings::default(),
        }
    }

    /// A builder with every setting of this mixture: change what differs (new weights for
    /// a [`reweight`](Mixture::reweight), another world size) and build again.
    pub fn to_builder(&self) -> MixtureBuilder<S> {
        let i = &*self.inner;
        MixtureBuilder {
            sources: i.members.iter().map(|m| m.given.clone()).collect(),
            settings: BuilderSettings::of(&i.settings),
        }
    }
}

impl<S: Segmented + Clone> MixtureBuilder<S> {
    /// The builder with its settings changed by `f` (a loader's run in place of its own).
    pub(crate) fn map_settings(
        mut self,
        f: impl FnOnce(BuilderSettings) -> BuilderSettings,
    ) -> Self {
        self.settings = f(self.settings);
        self
    }

    setters! {
        /// Each source's weight, one per source (default: equal): finite, at least 0, not all
        /// 0; they need not sum to 1 (each is taken over their sum). The share of the global
        /// sequence each source gets; see [`Blend`](crate::source::Blend) for the rule, which
        /// keeps every source within one sample of its share at every point.
        weights(weights: impl Into<Vec<f64>>) => settings.weights = Some(weights.into());
        /// The mixture's seed (default 0): it keys each source's shuffled (or random) order
        /// together with the source's own seed — a source of order seed `q` is walked as seed
        /// `q ^ mix64(seed)` — so one number reshuffles every source of the mixture. Seed 0
        /// walks each source exactly as its sampler alone would. It does not change which
        /// source a position takes (the weights alone decide that), nor a sequential source.
        seed(seed: u64) => settings.seed = seed;
        /// Shards the global sequence over `world_size` ranks (default: rank 0 of 1): rank `r`
        /// takes positions `r, r + W, r + 2W, ...`; with a [`batch_size`](Self::batch_size)
        /// `B`, step `k` of every rank covers positions `k·W·B .. (k + 1)·W·B` of the run, so
        /// every rank gets the same whole batches.
        shard(rank: u64, world_size: u64) => settings.run.rank = rank, settings.run.world_size = world_size;
        /// The batch size each rank's pipeline cuts its samples into: it numbers the steps
        /// ([`MixedSample::step`](crate::source::MixedSample::step), reported by
        /// [`Batch::step`](crate::Batch::step)), and a stop rule ends the mixture on a whole
        /// step. Give the pipeline the same batch size.
        batch_size(samples: u64) => settings.run.batch_size = Some(samples);
        /// When the mixture ends (default [`Stop::Never`]).
        stop(stop: Stop) => settings.stop = stop;
        /// Begins the run at step `k`: exactly where an uninterrupted run stands at step `k`,
        /// with the same samples from there on. Nothing before it is read or decoded: the
        /// mixture walks the blend rule over the positions before it (a few nanoseconds a
        /// position per source) and jumps each source to its count. A run resumed from a state
        /// before step `k` begins at `k` too. Needs a batch size.
        start_step(k: u64) => settings.run.start_step = k;
    }

    /// Leaves the batches of these steps out: each `(a, b)` is the half-open range `a..b`
    /// (steps `a` to `b - 1`, as Rust's `a..b` and Python's `range(a, b)` are). Every other batch keeps its step number, and a state records
    /// the ranges, so a run resumed from it keeps skipping them. Needs a batch size.
    pub fn skip_steps(mut self, ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        self.settings
            .run
            .skip_steps
            .extend(ranges.into_iter().map(|(a, b)| a..b));
        self
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
        let rules = SourceRules {
            own_setting: own_setting::<S>,
            shape: shape::<S>,
            run: Run::check,
        };
        let seed = self.settings.seed;
        let settings = self.settings.check(&self.sources, rules)?;
        let members = self
            .sources
            .into_iter()
            .map(|s| Member::new(s, seed))
            .collect::<Result<Vec<_>>>()?;
        Ok(Mixture {
            inner: Arc::new(MixInner { members, settings }),
        })
    }
}

/// The first setting `source` gives that belongs to the mixture: its ranks, batch size,
/// start step or skipped steps.
fn own_setting<S: Segmented>(source: &Sampler<S>) -> Option<&'static str> {
    if source.world_size() != 1 {
        Some("rank/world_size")
    } else if source.batch_size().is_some() {
        Some("batch_size")
    } else if source.start_step() != 0 {
        Some("start_step")
    } else if !source.skip_steps().is_empty() {
        Some("skip_steps")
    } else {
        None
    }
}

/// Where `source`'s samples differ from `first`'s: their window, or their record size.
fn shape<S: Segmented>(first: &Sampler<S>, source: &Sampler<S>) -> Option<ShapeDifference> {
    if source.window() != first.window() {
        Some(("window", first.window(), source.window()))
    } else if source.fingerprint().record_bytes != first.fingerprint().record_bytes {
        Some((
            "record size",
            first.fingerprint().record_bytes,
            source.fingerprint().record_bytes,
        ))
    } else {
        None
    }
}
