//! `Mixture<Documents>`: sources of packed documents mixed document by document and
//! packed into steps as one source packs its own — what is its own: its builder and
//! packing, its accessors, its run of steps and the state after a count of them, its
//! decoder and rows.

use super::builder::{DocumentMixtureBuilder, MixtureBuilder};
use super::documents_decoder::PackMixedDocuments;
use super::documents_member::{keyed, DocMember, DocPacking};
use super::documents_steps::MixedSteps;
use super::member::Member;
use super::mix::Mixture;
use super::piece_lists::PieceLists;
use super::state::MixtureState;
use super::stop::Stop;
use crate::config::ConfigBuilder;
use crate::error::Result;
use crate::fields::Fields;
use crate::locate::{Locate, Location};
use crate::row::Row;
use crate::source::documents::builder::DocumentsBuilder;
use crate::source::documents::by_count::DocsByCount;
use crate::source::documents::checkpoint::DocumentsCheckpoint;
use crate::source::documents::index::{BuiltBy, IndexStats};
use crate::source::documents::order::DocOrder;
use crate::source::documents::packed::Documents;
use crate::source::documents::packing::{packing_setters, Packing};
use crate::source::documents::schedule::Schedule;
use crate::source::tokens::{TokenShards, TokenType};

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
        MixtureBuilder::new(sources)
    }
}

impl MixtureBuilder<Documents> {
    packing_setters!();

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
    /// [`MixtureProblem::SourceSetting`]: crate::error::mixture::MixtureProblem::SourceSetting
    /// [`MixtureProblem::Shape`]: crate::error::mixture::MixtureProblem::Shape
    /// [`SourceError::Zero`]: crate::error::source::SourceError::Zero
    /// [`SourceError::BadRank`]: crate::error::source::SourceError::BadRank
    /// [`SourceError::BadSkip`]: crate::error::source::SourceError::BadSkip
    pub fn build(self) -> Result<Mixture<Documents>> {
        let settings = self.checked()?;
        let (schedule, layout) = self.packing.check()?;
        let index_every_shard = settings.stop != Stop::Never;
        let members = (self.sources().iter())
            .map(|source| {
                let given_order = source.given_order();
                let walked = source.clone().build_member(
                    schedule.clone(),
                    layout.clone(),
                    keyed(given_order, settings.seed),
                    index_every_shard,
                )?;
                Ok(DocMember {
                    given: source.clone(),
                    walked,
                    given_order,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let packing = DocPacking {
            bos: self.sources()[0].resolved_bos(),
            lists: PieceLists::new(layout.max_docs),
            schedule,
            layout,
        };
        Ok(Mixture::new(members, settings, packing))
    }
}

/// A mixture of packed documents: sources of documents (each a
/// [`Documents::builder`]'s shards, `bos` and order) mixed document by document into one
/// global document sequence, packed into steps exactly as one [`Documents`] source packs
/// its own, sharded over ranks, resumable on any world size. Built by
/// [`Mixture::documents`].
///
/// - **Which source**: document `g` of the global sequence comes from the source that
///   [`Blend`](crate::source::Blend) gives for the weights at `g`, so after any `g`
///   documents every source's count is within one of its share.
/// - **Which document**: a source's `n`-th document is position `n mod D` of epoch
///   `⌊n / D⌋` of its own walk (`D` its documents): in sequential order its shards one after
///   the other, document by document (nothing dropped at a shard's end: inside a mixture a
///   source has no steps of its own to cut short, so, unlike one [`Documents`] source,
///   there is no partial-step drop at its shards' ends); shuffled, its own permutation of
///   every document per epoch (its seed keyed by the mixture's
///   [`seed`](crate::source::DocumentMixtureBuilder::seed)).
/// - **Steps**: step `k` takes the next documents of the sequence, rank after rank: each
///   rank fills `N + 1` tokens (`N` the step's `tokens_per_batch`), each document cut at
///   `max_seq_len` and the rank's last cut to fill exactly `N + 1`, what a cut leaves
///   dropped; `cu_seqlens` padded to the step's `max_docs`, the schedule giving each
///   step's sizes, a rank needing more than `max_docs - 1` documents an error at that step
///   — all as [`Documents`].
/// - **Rows**: a row per piece: its `source` the source's index, its `id` the document's id
///   within that source (its `bos`'s global offset over that source's shards), its `len`
///   its length in `cu_seqlens`; [`Batch::step`](crate::Batch::step) the step;
///   [`Batch::locate`](crate::Batch::locate) with the mixture as the locator gives each
///   row's source, file, token offset and length.
/// - **State**: a `MixtureState<DocumentsCheckpoint>` — the documents all ranks consumed
///   (`consumed`, whole steps), each source's place (its [`DocumentsCheckpoint`] at its
///   count: epoch, shard, document), the weights' history, the step and the skipped steps
///   — from [`checkpoint_after`](Self::checkpoint_after); [`iter_from`](Self::iter_from)
///   resumes it on any rank and world size, so that every document is used at most once
///   across the runs and none is skipped but what the packing drops (the cut-off tails).
///
/// ```
/// use std::sync::Arc;
/// use pinring::source::{write_shard, Documents, Mixture, MixtureState, TokenShards};
/// use pinring::{Fence, Pipeline};
/// # let dir = std::env::temp_dir().join(format!("pinring-docmix-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// // Documents of 5 tokens: 50256, then four of the source's token (1 or 2).
/// let docs = |t: u16| -> Vec<u16> { (0..500).map(|i| if i % 5 == 0 { 50256 } else { t }).collect() };
/// write_shard(dir.join("web.bin"), &docs(1))?;
/// write_shard(dir.join("code.bin"), &docs(2))?;
/// let source = |f: &str| -> pinring::Result<_> { Ok(Documents::builder(TokenShards::open([dir.join(f)])?)) };
/// let rank = |r| -> pinring::Result<_> {
///     Mixture::documents([source("web.bin")?, source("code.bin")?])
///         .weights([0.5, 0.5]).tokens_per_batch(19).max_seq_len(64).shard(r, 2).build()
/// };
/// let mix = rank(0)?;
/// let config = mix.config().decode_threads(1).locator(Arc::new(mix.clone())).build()?;
/// let mut pipeline = Pipeline::new(config, mix.decoder(), mix.iter().take(3))?;
/// while let Some(batch) = pipeline.pop()? {
///     // 20 tokens a rank: four documents, alternating sources.
///     assert_eq!(batch.row_sources(), &[0, 1, 0, 1]);
///     assert_eq!(batch.row_lens(), &[5, 5, 5, 4]);
///     for (row, at) in batch.locate()?.iter().enumerate() {
///         assert_eq!((at.source, at.len), (batch.row_sources()[row], u64::from(batch.row_lens()[row])));
///     }
///     batch.release(Fence::Sync).expect("a Sync fence always captures");
/// }
/// // Both ranks popped 3 steps: 8 documents a step, 4 of each source.
/// let state = MixtureState::merge(&[
///     rank(0)?.checkpoint_after(None, 3)?, rank(1)?.checkpoint_after(None, 3)?,
/// ])?;
/// assert_eq!((state.consumed, state.step, state.sources[1].doc), (24, 3, 12));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
impl Mixture<Documents> {
    /// The step sizes over the run.
    pub fn schedule(&self) -> &Schedule {
        &self.inner.packing.schedule
    }

    /// The packing of its steps, every field given (the defaults filled in): what
    /// [`packing`](MixtureBuilder::packing) takes.
    pub fn packing(&self) -> Packing {
        DocMember::packing_given(&self.inner.packing)
    }

    /// The token that starts a document, in every source.
    pub fn bos(&self) -> u32 {
        self.inner.packing.bos
    }

    /// The type tokens are written as.
    pub fn token_type(&self) -> TokenType {
        self.inner.packing.layout.token_type
    }

    /// Each source's order, as given (the mixture walks a shuffled one keyed by its seed).
    pub fn orders(&self) -> Vec<DocOrder> {
        self.inner.members.iter().map(|m| m.given_order).collect()
    }

    /// Each source's shards.
    pub fn shards(&self) -> Vec<&TokenShards> {
        self.inner
            .members
            .iter()
            .map(|m| m.walked.shards())
            .collect()
    }

    /// Each source's documents in one epoch, where counted already (every shard indexed:
    /// shuffled order, a stop rule, or a walk that went through every shard).
    pub fn epoch_lens(&self) -> Vec<Option<u64>> {
        self.inner
            .members
            .iter()
            .map(|m| DocsByCount::new(&m.walked, BuiltBy::Start).known_epoch_len())
            .collect()
    }

    /// How each source's shards were indexed so far.
    pub fn index_stats(&self) -> Vec<IndexStats> {
        self.inner
            .members
            .iter()
            .map(|m| m.walked.index_stats())
            .collect()
    }

    /// The fields of its batches: those of a [`Documents`] source of its token type,
    /// schedule and `positions`.
    pub fn fields(&self) -> Fields {
        self.inner.packing.layout.fields.clone()
    }

    /// A config builder for its batches: batch size 1 (a batch is a step of this rank),
    /// its [`fields`](Self::fields), and `rows_per_batch` the schedule's largest
    /// `max_docs`. Add the rest (the backend, decode threads, a
    /// [`locator`](crate::ConfigBuilder::locator)) and build it.
    pub fn config(&self) -> ConfigBuilder {
        self.inner.packing.layout.config()
    }

    /// The decoder that packs its steps into batches.
    pub fn decoder(&self) -> PackMixedDocuments {
        PackMixedDocuments::new(self.len())
    }

    /// This rank's steps from the start (or from the
    /// [`start_step`](crate::source::MixtureBuilder::start_step)), leaving out the
    /// skipped steps: endless with [`Stop::Never`](crate::source::Stop::Never).
    pub fn iter(&self) -> MixedSteps {
        MixedSteps::new(self.run())
    }

    /// This rank's steps resumed from `state` (checked as [`check_state`](Self::check_state)
    /// checks it) on this mixture's rank and world size, which may differ from the saved
    /// run's: the document sequence goes on from `state.consumed`, the steps from
    /// `state.step`, skipping the state's skipped steps and this mixture's.
    pub fn iter_from(&self, state: &MixtureState<DocumentsCheckpoint>) -> Result<MixedSteps> {
        Ok(MixedSteps::new(self.run_from(state)?))
    }

    /// The state of a run from `from` (the start when `None`) after this rank popped
    /// `steps` steps since: the documents consumed by the steps walked (those before the
    /// start step and the skipped ones included), each source's place there, the weights'
    /// history, the step (the next one delivered) and the skipped steps. Every rank makes
    /// the same state ([`MixtureState::merge`] checks that). It walks the steps again over
    /// the sources' indexes (no tokens read): pass the last state as `from` to keep it
    /// short. A delivered step that cannot be made (too many documents) is its error; where
    /// the stop rule ends the run first, the state at its end (a resume from it delivers
    /// nothing).
    pub fn checkpoint_after(
        &self,
        from: Option<&MixtureState<DocumentsCheckpoint>>,
        steps: u64,
    ) -> Result<MixtureState<DocumentsCheckpoint>> {
        self.inner.state_after(from, steps, 0)
    }

    /// Where a row of `len` tokens of document `id` of source `source` lies (see
    /// [`Documents::location`]); `None` for a source or document the mixture does not have.
    pub fn location(&self, source: u16, id: u64, len: u64) -> Option<Location> {
        let len = u32::try_from(len).ok()?;
        self.locate(&Row { id, len, source })
    }
}
