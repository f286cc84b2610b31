//! [`MixtureBuilder`]: a [`Mixture`]'s settings as given — its sources, the weights, the
//! seed, the stop rule, the [`Run`] and the packing — their setters and their one check
//! ([`MixtureBuilder::checked`]), for every kind; [`Mixture::to_builder`]. Each kind adds
//! its own setters (a batch size for samplers, the packing for documents) and its `build`.

use std::fmt;

use super::blend::normalized;
use super::member::Member;
use super::mix::Mixture;
use super::mixable::Mixable;
use super::settings::MixSettings;
use super::stop::Stop;
use crate::error::mixture::MixtureProblem;
use crate::error::source::SourceError;
use crate::error::{ConfigError, Result};
use crate::setters::setters;
use crate::source::run::Run;

/// Builds a [`Mixture`]: of samplers ([`Mixture::builder`]), or of packed documents
/// ([`Mixture::documents`], whose builder is also called [`DocumentMixtureBuilder`]).
///
/// | setting | default |
/// | --- | --- |
/// | [`weights`](Self::weights) | equal |
/// | [`seed`](Self::seed) | 0: each source walks its own order as given |
/// | [`shard`](Self::shard) | rank 0 of 1 |
/// | [`stop`](Self::stop) | [`Stop::Never`] |
/// | [`start_step`](Self::start_step), [`skip_steps`](Self::skip_steps) | none |
/// | samplers: [`batch_size`](Self::batch_size) | none |
/// | documents: [`packing`](Self::packing) or its fields' setters | see [`DocumentMixtureBuilder`] |
#[must_use]
pub struct MixtureBuilder<S: Mixable> {
    sources: Vec<<S::Member as Member>::Given>,
    /// Each source's weight (`None`: equal).
    weights: Option<Vec<f64>>,
    seed: u64,
    stop: Stop,
    /// The rank and world size, batch size (samplers'), start step and skipped steps.
    pub(super) run: Run,
    /// How steps are packed (documents'; nothing for samplers).
    pub(super) packing: <S::Member as Member>::PackingGiven,
}

/// Builds a mixture of packed documents, `Mixture<Documents>`: the [`MixtureBuilder`] that
/// [`Mixture::documents`] makes.
///
/// | setting | default |
/// | --- | --- |
/// | [`weights`](MixtureBuilder::weights) | equal |
/// | [`seed`](MixtureBuilder::seed) | 0: each source walks its own order as given |
/// | [`shard`](MixtureBuilder::shard) | rank 0 of 1 |
/// | [`stop`](MixtureBuilder::stop) | [`Stop::Never`] |
/// | [`packing`](MixtureBuilder::packing) | the next six settings at once, as one [`Packing`](crate::source::Packing) |
/// | [`tokens_per_batch`](MixtureBuilder::tokens_per_batch), [`max_seq_len`](MixtureBuilder::max_seq_len) | none: required (unless the schedule has an entry at step 0) |
/// | [`max_docs`](MixtureBuilder::max_docs) | modded-nanogpt's rule, step by step |
/// | [`schedule`](MixtureBuilder::schedule) | none: the same sizes every step |
/// | [`token_type`](MixtureBuilder::token_type) | [`TokenType::I32`](crate::source::TokenType::I32) |
/// | [`positions`](MixtureBuilder::positions) | off |
/// | [`start_step`](MixtureBuilder::start_step), [`skip_steps`](MixtureBuilder::skip_steps) | none |
pub type DocumentMixtureBuilder = MixtureBuilder<crate::source::documents::packed::Documents>;

impl<S: Mixable> Clone for MixtureBuilder<S> {
    fn clone(&self) -> Self {
        MixtureBuilder {
            sources: self.sources.clone(),
            weights: self.weights.clone(),
            seed: self.seed,
            stop: self.stop,
            run: self.run.clone(),
            packing: self.packing.clone(),
        }
    }
}

impl<S: Mixable> fmt::Debug for MixtureBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MixtureBuilder")
            .field("sources", &self.sources.len())
            .field("weights", &self.weights)
            .field("seed", &self.seed)
            .field("stop", &self.stop)
            .field("run", &self.run)
            .field("packing", &self.packing)
            .finish()
    }
}

impl<S: Mixable> Mixture<S> {
    /// A builder with every setting of this mixture (its sources as given too): change
    /// what differs — new weights for a [`reweight`](Mixture::reweight), another rank or
    /// world size — and build again.
    pub fn to_builder(&self) -> MixtureBuilder<S> {
        let i = &*self.inner;
        let s = &i.settings;
        MixtureBuilder {
            sources: i.members.iter().map(|m| m.given().clone()).collect(),
            weights: Some(s.weights.clone()),
            seed: s.seed,
            stop: s.stop,
            run: s.run.run(),
            packing: S::Member::packing_given(&i.packing),
        }
    }
}

impl<S: Mixable> MixtureBuilder<S> {
    /// A builder over `sources` with the defaults.
    pub(super) fn new(sources: impl IntoIterator<Item = <S::Member as Member>::Given>) -> Self {
        MixtureBuilder {
            sources: sources.into_iter().collect(),
            weights: None,
            seed: 0,
            stop: Stop::Never,
            run: Run::default(),
            packing: Default::default(),
        }
    }

    /// The sources, as given.
    pub(super) fn sources(&self) -> &[<S::Member as Member>::Given] {
        &self.sources
    }

    /// The builder with a loader's run in place of its own.
    pub(crate) fn with_run(mut self, run: &Run) -> Self {
        self.run = run.clone();
        self
    }

    setters! {
        /// Each source's weight, one per source (default: equal): finite, at least 0, not all
        /// 0; they need not sum to 1 (each is taken over their sum). The share of the global
        /// sequence (of samples, or of documents) each source gets; see
        /// [`Blend`](crate::source::Blend) for the rule, which keeps every source within one
        /// sample (or document) of its share at every point.
        weights(weights: impl Into<Vec<f64>>) => weights = Some(weights.into());
        /// The mixture's seed (default 0): it keys each source's shuffled (or random) order
        /// together with the source's own seed — a source of order seed `q` is walked as seed
        /// `q ^ mix64(seed)` — so one number reshuffles every source of the mixture. Seed 0
        /// walks each source exactly as it is alone. It does not change which source a
        /// position takes (the weights alone decide that), nor a sequential source.
        seed(seed: u64) => seed = seed;
        /// Shards the global sequence over `world_size` ranks (default: rank 0 of 1): rank `r`
        /// takes positions `r, r + W, r + 2W, ...`; with a [`batch_size`](Self::batch_size)
        /// `B`, step `k` of every rank covers positions `k·W·B .. (k + 1)·W·B` of the run, so
        /// every rank gets the same whole batches. A mixture of documents packs each step's
        /// documents rank after rank from its one sequence, as one
        /// [`Documents`](crate::source::Documents) source's ranks do.
        shard(rank: u64, world_size: u64) => run.rank = rank, run.world_size = world_size;
        /// When the mixture ends (default [`Stop::Never`]), counted in each source's own
        /// items (samples, or documents). The step the end would cut short is left out on
        /// every rank. In a mixture of documents a stop rule indexes every source's shards at
        /// build (it needs their document counts).
        stop(stop: Stop) => stop = stop;
        /// Begins the run at step `k`: exactly where an uninterrupted run stands at step `k`,
        /// with the same items from there on. Nothing before it is read or decoded: the
        /// mixture walks the blend rule over the positions before it (a few nanoseconds a
        /// position per source; for documents, the packing too, over the sources' indexes:
        /// about a microsecond a step for 8 ranks) and jumps each source to its count. A run
        /// resumed from a state before step `k` begins at `k` too. A mixture of samplers
        /// needs a batch size for it.
        start_step(k: u64) => run.start_step = k;
    }

    /// Leaves the batches of these steps out: each `(a, b)` is the half-open range `a..b`
    /// (steps `a` to `b - 1`, as Rust's `a..b` and Python's `range(a, b)` are). Every
    /// other batch keeps its step number, and a state records the ranges, so a run resumed
    /// from it keeps skipping them. The skipped steps' items are used up as they would be
    /// (they are walked, not delivered). A mixture of samplers needs a batch size for it.
    pub fn skip_steps(mut self, ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        self.run.skip_too(ranges);
        self
    }

    /// Checks the sources and the settings for them, in this order: no source or more
    /// than 65536 ([`MixtureProblem::NoSources`], [`MixtureProblem::TooManySources`]), a
    /// source setting what belongs to the mixture ([`MixtureProblem::SourceSetting`]), a
    /// source unlike source 0 ([`MixtureProblem::Shape`]), weights that cannot be
    /// normalized (all these [`ConfigError::Mixture`]), then the run as the kind checks
    /// it ([`Run::check`], or [`Run::check_own_steps`] for documents). The mixture's
    /// settings.
    pub(super) fn checked(&self) -> Result<MixSettings> {
        let problem = |p: MixtureProblem| crate::error::Error::Config(ConfigError::Mixture(p));
        let sources = &self.sources;
        let n = sources.len();
        if n == 0 {
            return Err(problem(MixtureProblem::NoSources));
        }
        if n > usize::from(u16::MAX) + 1 {
            return Err(problem(MixtureProblem::TooManySources(n)));
        }
        for (index, source) in sources.iter().enumerate() {
            if let Some(setting) = S::Member::own_setting(source) {
                return Err(problem(MixtureProblem::SourceSetting { index, setting }));
            }
        }
        let first = &sources[0];
        for (index, source) in sources.iter().enumerate().skip(1) {
            if let Some((what, first, here)) = S::Member::shape(first, source) {
                return Err(problem(MixtureProblem::Shape {
                    index,
                    what,
                    first,
                    here,
                }));
            }
        }
        let weights = self.weights.clone().unwrap_or_else(|| vec![1.0; n]);
        let norm = normalized(&weights, Some(n)).map_err(problem)?;
        let run: Result<_, SourceError> = if S::Member::STEPS_NEED_BATCH_SIZE {
            self.run.check()
        } else {
            self.run.check_own_steps()
        };
        Ok(MixSettings {
            weights,
            norm,
            seed: self.seed,
            stop: self.stop,
            run: run?,
        })
    }
}
