//! [`MixtureBuilder`]: a [`Mixture`]'s settings, checked by
//! [`build`](MixtureBuilder::build); [`Mixture::builder`] and [`Mixture::to_builder`].

use std::fmt;
use std::sync::Arc;

use super::blend::normalized;
use super::inner::MixInner;
use super::member::Member;
use super::mix::Mixture;
use super::stop::Stop;
use crate::error::source::MixtureProblem;
use crate::error::{ConfigError, Result};
use crate::setters::setters;
use crate::source::sampling::run_settings::RunSettings;
use crate::source::sampling::sampler::Sampler;
use crate::source::sampling::segmented::Segmented;

/// Builds a [`Mixture`]; see [`Mixture::builder`].
#[must_use]
pub struct MixtureBuilder<S> {
    sources: Vec<Sampler<S>>,
    weights: Option<Vec<f64>>,
    seed: u64,
    stop: Stop,
    run: RunSettings,
}

impl<S> fmt::Debug for MixtureBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MixtureBuilder")
            .field("sources", &self.sources.len())
            .field("weights", &self.weights)
            .field("seed", &self.seed)
            .field("stop", &self.stop)
            .field("run", &self.run)
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
            weights: None,
            seed: 0,
            stop: Stop::Never,
            run: RunSettings::default(),
        }
    }

    /// A builder with every setting of this mixture: change what differs (new weights for
    /// a [`reweight`](Mixture::reweight), another world size) and build again.
    pub fn to_builder(&self) -> MixtureBuilder<S> {
        let i = &*self.inner;
        MixtureBuilder {
            sources: i.members.iter().map(|m| m.given.clone()).collect(),
            weights: Some(i.weights.clone()),
            seed: i.seed,
            stop: i.stop,
            run: RunSettings::of(i.rank, i.world, i.batch, i.start_step, &i.skip),
        }
    }
}

impl<S: Segmented + Clone> MixtureBuilder<S> {
    setters! {
        /// Each source's weight, one per source (default: equal): finite, at least 0, not all
        /// 0; they need not sum to 1 (each is taken over their sum). The share of the global
        /// sequence each source gets; see [`Blend`](crate::source::Blend) for the rule, which
        /// keeps every source within one sample of its share at every point.
        weights(weights: impl Into<Vec<f64>>) => weights = Some(weights.into());
        /// The mixture's seed (default 0): it keys each source's shuffled (or random) order
        /// together with the source's own seed — a source of order seed `q` is walked as seed
        /// `q ^ mix64(seed)` — so one number reshuffles every source of the mixture. Seed 0
        /// walks each source exactly as its sampler alone would. It does not change which
        /// source a position takes (the weights alone decide that), nor a sequential source.
        seed(seed: u64) => seed = seed;
        /// Shards the global sequence over `world_size` ranks (default: rank 0 of 1): rank `r`
        /// takes positions `r, r + W, r + 2W, ...`; with a [`batch_size`](Self::batch_size)
        /// `B`, step `k` of every rank covers positions `k·W·B .. (k + 1)·W·B` of the run, so
        /// every rank gets the same whole batches.
        shard(rank: u64, world_size: u64) => run.rank = rank, run.world_size = world_size;
        /// The batch size each rank's pipeline cuts its samples into: it numbers the steps
        /// ([`MixedSample::step`](crate::source::MixedSample::step), reported by
        /// [`Batch::step`](crate::Batch::step)), and a stop rule ends the mixture on a whole
        /// step. Give the pipeline the same batch size.
        batch_size(samples: u64) => run.batch_size = Some(samples);
        /// When the mixture ends (default [`Stop::Never`]).
        stop(stop: Stop) => stop = stop;
        /// Begins the run at step `k`: exactly where an uninterrupted run stands at step `k`,
        /// with the same samples from there on. Nothing before it is read or decoded: the
        /// mixture walks the blend rule over the positions before it (a few nanoseconds a
        /// position per source) and jumps each source to its count. A run resumed from a state
        /// before step `k` begins at `k` too. Needs a batch size.
        start_step(k: u64) => run.start_step = Some(k);
    }

    /// Leaves the batches of these steps out: each `(a, b)` is the half-open range `a..b`
    /// (steps `a` to `b - 1`, as Rust's `a..b` and Python's `range(a, b)` are). Every other batch keeps its step number, and a state records
    /// the ranges, so a run resumed from it keeps skipping them. Needs a batch size.
    pub fn skip_steps(mut self, ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        self.run.skip_steps.extend(ranges);
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
    /// [`SourceError::Zero`]: crate::error::source::SourceError::Zero
    /// [`SourceError::BadRank`]: crate::error::source::SourceError::BadRank
    /// [`SourceError::StepsNeedBatchSize`]: crate::error::source::SourceError::StepsNeedBatchSize
    /// [`SourceError::BadSkip`]: crate::error::source::SourceError::BadSkip
    pub fn build(self) -> Result<Mixture<S>> {
        let problem = |p: MixtureProblem| crate::Error::Config(ConfigError::Mixture(p));
        let n = self.sources.len();
        if n == 0 {
            return Err(problem(MixtureProblem::NoSources));
        }
        if n > usize::from(u16::MAX) + 1 {
            return Err(problem(MixtureProblem::TooManySources(n)));
        }
        for (index, s) in self.sources.iter().enumerate() {
            let setting = if s.world_size() != 1 {
                Some("rank/world_size")
            } else if s.batch_size().is_some() {
                Some("batch_size")
            } else if s.start_step() != 0 {
                Some("start_step")
            } else if !s.skip_steps().is_empty() {
                Some("skip_steps")
            } else {
                None
            };
            if let Some(setting) = setting {
                return Err(problem(MixtureProblem::SourceSetting { index, setting }));
            }
        }
        let first = &self.sources[0];
        for (index, s) in self.sources.iter().enumerate().skip(1) {
            let shape = if s.window() != first.window() {
                Some(("window", first.window(), s.window()))
            } else if s.fingerprint().record_bytes != first.fingerprint().record_bytes {
                Some((
                    "record size",
                    first.fingerprint().record_bytes,
                    s.fingerprint().record_bytes,
                ))
            } else {
                None
            };
            if let Some((what, first, here)) = shape {
                return Err(problem(MixtureProblem::Shape {
                    index,
                    what,
                    first,
                    here,
                }));
            }
        }
        let weights = self.weights.unwrap_or_else(|| vec![1.0; n]);
        let norm = normalized(&weights, Some(n)).map_err(problem)?;
        let run = self.run.check()?;
        let members = self
            .sources
            .into_iter()
            .map(|s| Member::new(s, self.seed))
            .collect::<Result<Vec<_>>>()?;
        Ok(Mixture {
            inner: Arc::new(MixInner {
                members,
                weights,
                norm,
                seed: self.seed,
                rank: run.rank,
                world: run.world,
                batch: run.batch,
                stop: self.stop,
                start_step: run.start_step,
                skip: run.skip,
            }),
        })
    }
}
