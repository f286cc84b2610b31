//! [`DocumentMixtureBuilder`]: the settings of a mixture of packed documents, checked by
//! [`build`](DocumentMixtureBuilder::build); [`Mixture::documents`] and
//! [`Mixture::to_builder`].

use std::sync::Arc;

use super::inner::{keyed, DocMember, DocMixInner};
use super::lists::PieceLists;
use crate::error::Result;
use crate::setters::setters;
use crate::source::documents::builder::DocumentsBuilder;
use crate::source::documents::packed::Documents;
use crate::source::documents::packing::Packing;
use crate::source::mixture::builder_settings::{BuilderSettings, ShapeDifference, SourceRules};
use crate::source::mixture::mix::Mixture;
use crate::source::mixture::stop::Stop;
use crate::source::run::Run;
use crate::source::tokens::TokenType;

/// Builds a mixture of packed documents, `Mixture<Documents>`; see [`Mixture::documents`].
///
/// | setting | default |
/// | --- | --- |
/// | [`weights`](Self::weights) | equal |
/// | [`seed`](Self::seed) | 0: each source walks its own order as given |
/// | [`shard`](Self::shard) | rank 0 of 1 |
/// | [`stop`](Self::stop) | [`Stop::Never`] |
/// | [`tokens_per_batch`](Self::tokens_per_batch), [`max_seq_len`](Self::max_seq_len) | none: required (unless the schedule has an entry at step 0) |
/// | [`max_docs`](Self::max_docs) | modded-nanogpt's rule, step by step |
/// | [`schedule`](Self::schedule) | none: the same sizes every step |
/// | [`token_type`](Self::token_type) | [`TokenType::I32`] |
/// | [`positions`](Self::positions) | off |
/// | [`start_step`](Self::start_step), [`skip_steps`](Self::skip_steps) | none |
#[derive(Debug, Clone)]
#[must_use]
pub struct DocumentMixtureBuilder {
    sources: Vec<DocumentsBuilder>,
    /// The weights, seed, stop rule, ranks, start step and skipped steps (no batch size:
    /// a step is a batch).
    settings: BuilderSettings,
    /// The sizes of the steps, the token type and `positions`.
    packing: Packing,
}

impl Mixture<Documents> {
    /// A builder of a mixture of packed documents over `sources`, each a
    /// [`Documents::builder`] with the settings of the source alone — its shards, `bos`,
    /// [`order`](crate::source::DocumentsBuilder::order) and
    /// [`index_cache`](crate::source::DocumentsBuilder::index_cache) — and nothing of the
    /// packing or the ranks: the step sizes, `max_docs`, the schedule, the token type,
    /// `positions`, the rank and the world size belong to the mixture, which packs the
    /// mixed documents into steps (a source that sets one of them is a
    /// [`ConfigError::Mixture`](crate::ConfigError::Mixture)). See [`Mixture<Documents>`]
    /// for what a run is.
    ///
    /// ```
    /// use pinring::source::{write_shard, DocOrder, Documents, Mixture, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-docmix-builder-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// // Documents of 7 tokens (1s) and of 3 tokens (2s), each starting at 50256.
    /// let docs = |len: usize, t: u16, n: usize| -> Vec<u16> {
    ///     (0..n * len).map(|i| if i % len == 0 { 50256 } else { t }).collect()
    /// };
    /// write_shard(dir.join("web.bin"), &docs(7, 1, 100))?;
    /// write_shard(dir.join("code.bin"), &docs(3, 2, 100))?;
    /// let source = |f: &str| -> pinring::Result<_> {
    ///     Ok(Documents::builder(TokenShards::open([dir.join(f)])?))
    /// };
    /// let mix = Mixture::documents([
    ///     source("web.bin")?.order(DocOrder::Shuffled { seed: 1 }),
    ///     source("code.bin")?,
    /// ])
    /// .weights([3.0, 1.0])
    /// .tokens_per_batch(64)
    /// .max_seq_len(16)
    /// .build()?;
    /// // Three documents of web.bin for one of code.bin, packed into steps of 65 tokens.
    /// let step = mix.iter().next().unwrap();
    /// let sources: Vec<u16> = step.pieces().iter().map(|p| p.source).collect();
    /// assert_eq!(&sources[..4], &[0, 0, 0, 1]);
    /// assert_eq!(step.pieces().iter().map(|p| p.piece.len).sum::<u64>(), 65);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn documents(
        sources: impl IntoIterator<Item = DocumentsBuilder>,
    ) -> DocumentMixtureBuilder {
        DocumentMixtureBuilder {
            sources: sources.into_iter().collect(),
            settings: BuilderSettings::default(),
            packing: Packing::default(),
        }
    }

    /// A builder with every setting of this mixture (its sources' builders too): change
    /// what differs — new weights for a [`reweight`](Mixture::reweight), another rank or
    /// world size — and build again.
    pub fn to_builder(&self) -> DocumentMixtureBuilder {
        let i = &*self.inner;
        DocumentMixtureBuilder {
            sources: i.members.iter().map(|m| m.given.clone()).collect(),
            settings: BuilderSettings::of(&i.settings),
            packing: Packing::of(&i.schedule, &i.layout),
        }
    }
}

impl DocumentMixtureBuilder {
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
        /// 0, taken over their sum. The share of the mixture's documents each source gives
        /// (see [`Blend`](crate::source::Blend): every source stays within one document of its
        /// share at every point of the document sequence).
        weights(weights: impl Into<Vec<f64>>) => settings.weights = Some(weights.into());
        /// The mixture's seed (default 0): it keys each shuffled source's order with its own
        /// seed — a source shuffled with seed `q` is walked as seed `q ^ mix64(seed)` — so one
        /// number reshuffles every source. Seed 0 walks each source exactly as it is alone; a
        /// sequential source has no seed. It does not change which source a document comes
        /// from (the weights alone decide that).
        seed(seed: u64) => settings.seed = seed;
        /// This process's rank among `world_size` data-parallel ranks (default: rank 0 of 1):
        /// every rank walks the mixture's one document sequence, and the ranks take each
        /// step's documents in rank order, as one [`Documents`] source's ranks do.
        shard(rank: u64, world_size: u64) =>
            settings.run.rank = rank, settings.run.world_size = world_size;
        /// When the mixture ends (default [`Stop::Never`]), counted in each source's documents:
        /// [`Stop::First`] before the first document that would start any source's second
        /// epoch, [`Stop::All`] once every source of positive weight finished its first. The
        /// step the end would cut short is left out on every rank. A stop rule indexes every
        /// source's shards at build (it needs their document counts).
        stop(stop: Stop) => settings.stop = stop;
        /// Begins the run at step `k`: exactly where an uninterrupted run stands at step `k`,
        /// the same steps from there on. Nothing before it is read or decoded: the steps
        /// before it are walked over the sources' indexes (the blend rule and the packing,
        /// about a microsecond a step for 8 ranks).
        start_step(k: u64) => settings.run.start_step = k;
        /// How steps are sized and laid out, every field at once (see
        /// [`Packing`](crate::source::Packing); the six setters that follow each set one of
        /// its fields).
        packing(packing: Packing) => packing = packing;
        /// Tokens of inputs per rank per step (`N`): each step of each rank packs `N + 1`
        /// tokens of the mixed documents.
        tokens_per_batch(n: u64) => packing.tokens_per_batch = n;
        /// Where documents are cut: a document longer than this gives its first `max_seq_len`
        /// tokens, and its tail is dropped.
        max_seq_len(n: u64) => packing.max_seq_len = n;
        /// The length of `cu_seqlens` in every step (at most `max_docs - 1` documents per rank
        /// a step; a step needing more is an error at that step). Unset: each step's is
        /// modded-nanogpt's rule for its tokens.
        max_docs(n: u64) => packing.max_docs = Some(n);
        /// Changes of the step sizes known up front: `(from_step, tokens_per_batch,
        /// max_seq_len)` entries, strictly increasing in step, as
        /// [`DocumentsBuilder::schedule`](crate::source::DocumentsBuilder::schedule).
        schedule(entries: Vec<(u64, u64, u64)>) => packing.schedule = entries;
        /// The type tokens are written as (`tokens`, `inputs`, `targets`).
        token_type(ty: TokenType) => packing.token_type = Some(ty);
        /// Whether batches carry `positions`: each input token's position in its document.
        positions(on: bool) => packing.positions = Some(on);
    }

    /// Leaves the batches of these steps out: each `(a, b)` is the half-open range `a..b`.
    /// Every other step keeps its number; a state records the ranges, so a run resumed from
    /// it keeps skipping them. The skipped steps' documents are used up as they would be
    /// (they are walked, not delivered).
    pub fn skip_steps(mut self, ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        self.settings
            .run
            .skip_steps
            .extend(ranges.into_iter().map(|(a, b)| a..b));
        self
    }

    /// Checks the settings, builds every source (indexing what each needs up front: its
    /// first shard, or every shard in shuffled order or under a stop rule) and returns the
    /// mixture.
    ///
    /// Sources that cannot be mixed are [`ConfigError::Mixture`]: none, more than 65536, a
    /// source that sets what belongs to the mixture
    /// ([`MixtureProblem::SourceSetting`]: its rank and world size, `tokens_per_batch`,
    /// `max_seq_len`, `max_docs`, the schedule, the token type, `positions`), a source
    /// whose shards hold tokens of another width than source 0's or whose `bos` differs
    /// ([`MixtureProblem::Shape`], `"token width"` in bytes, `"bos"`: sources of one
    /// tokenizer), weights that are not one per source, negative, NaN, infinite or all 0.
    /// The packing settings are checked as [`DocumentsBuilder::build`] checks them
    /// (sizes of 0, a schedule not increasing, ...), the ranks as a sampler's
    /// ([`SourceError::Zero`], [`SourceError::BadRank`]), a reversed skipped range is
    /// [`SourceError::BadSkip`]; a source's own problem (a shard without `bos`, a token
    /// type too narrow for its shards) is its error, naming the file.
    ///
    /// [`ConfigError::Mixture`]: crate::ConfigError::Mixture
    /// [`MixtureProblem::SourceSetting`]: crate::error::source::MixtureProblem::SourceSetting
    /// [`MixtureProblem::Shape`]: crate::error::source::MixtureProblem::Shape
    /// [`SourceError::Zero`]: crate::error::source::SourceError::Zero
    /// [`SourceError::BadRank`]: crate::error::source::SourceError::BadRank
    /// [`SourceError::BadSkip`]: crate::error::source::SourceError::BadSkip
    pub fn build(self) -> Result<Mixture<Documents>> {
        let rules = SourceRules {
            own_setting: DocumentsBuilder::mixture_setting,
            shape,
            run: Run::check_own_steps,
        };
        let (seed, stop) = (self.settings.seed, self.settings.stop);
        let settings = self.settings.check(&self.sources, rules)?;
        let (schedule, layout) = self.packing.check()?;
        let index_every_shard = stop != Stop::Never;
        let members = self
            .sources
            .iter()
            .map(|source| {
                let given_order = source.given_order();
                let walked = source.clone().build_member(
                    schedule.clone(),
                    layout.clone(),
                    keyed(given_order, seed),
                    index_every_shard,
                )?;
                Ok(DocMember {
                    given: source.clone(),
                    walked,
                    given_order,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let bos = self.sources[0].resolved_bos();
        let lists = PieceLists::new(layout.max_docs);
        Ok(Mixture {
            inner: Arc::new(DocMixInner {
                members,
                settings,
                schedule,
                layout,
                bos,
                lists,
            }),
        })
    }
}

/// Where `source`'s documents differ from `first`'s: the width of their tokens (in bytes),
/// or their `bos` (sources of one tokenizer).
fn shape(first: &DocumentsBuilder, source: &DocumentsBuilder) -> Option<ShapeDifference> {
    let width = |b: &DocumentsBuilder| b.format().token_bytes() as u64;
    if width(source) != width(first) {
        Some(("token width", width(first), width(source)))
    } else if source.resolved_bos() != first.resolved_bos() {
        Some((
            "bos",
            u64::from(first.resolved_bos()),
            u64::from(source.resolved_bos()),
        ))
    } else {
        None
    }
}
