//! `Mixture<Documents>`: sources of packed documents mixed document by document, packed
//! into steps as one source packs its own; its runs, states and resumes.

use std::fmt;

use super::decoder::PackMixedDocuments;
use super::inner::DocMixInner;
use super::steps::MixedSteps;
use super::stream::{walk_step, MixedStream};
use crate::config::ConfigBuilder;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::fields::Fields;
use crate::source::documents::by_count::DocsByCount;
use crate::source::documents::checkpoint::DocumentsCheckpoint;
use crate::source::documents::index::{BuiltBy, IndexStats};
use crate::source::documents::order::DocOrder;
use crate::source::documents::packed::Documents;
use crate::source::documents::schedule::Schedule;
use crate::source::mixture::mix::Mixture;
use crate::source::mixture::settings::MixShared;
use crate::source::mixture::state::{MixtureState, WeightSpan};
use crate::source::sampling::skip::SkipSteps;
use crate::source::tokens::{TokenShards, TokenType};

impl fmt::Debug for Mixture<Documents> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.settings();
        f.debug_struct("Mixture<Documents>")
            .field("sources", &self.len())
            .field("weights", &i.weights)
            .field("seed", &i.seed)
            .field("rank", &i.run.rank)
            .field("world_size", &i.run.world)
            .field("stop", &i.stop)
            .field("schedule", &self.inner.schedule)
            .field("start_step", &i.run.start_step)
            .field("skip_steps", &i.run.skip.ranges())
            .finish()
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
        &self.inner.schedule
    }

    /// The token that starts a document, in every source.
    pub fn bos(&self) -> u32 {
        self.inner.bos
    }

    /// The type tokens are written as.
    pub fn token_type(&self) -> TokenType {
        self.inner.layout.token_type
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
        self.inner.layout.fields.clone()
    }

    /// A config builder for its batches: batch size 1 (a batch is a step of this rank),
    /// its [`fields`](Self::fields), and `rows_per_batch` the schedule's largest
    /// `max_docs`. Add the rest (the backend, decode threads, a
    /// [`locator`](crate::ConfigBuilder::locator)) and build it.
    pub fn config(&self) -> ConfigBuilder {
        self.inner.layout.config()
    }

    /// The decoder that packs its steps into batches.
    pub fn decoder(&self) -> PackMixedDocuments {
        PackMixedDocuments::new(self.len())
    }

    /// This rank's steps from the start (or from the
    /// [`start_step`](crate::source::DocumentMixtureBuilder::start_step)), leaving out the
    /// skipped steps: endless with [`Stop::Never`](crate::source::Stop::Never).
    pub fn iter(&self) -> MixedSteps {
        MixedSteps::new(self.inner.clone(), self.fresh())
    }

    /// This rank's steps resumed from `state` (checked as [`check_state`](Self::check_state)
    /// checks it) on this mixture's rank and world size, which may differ from the saved
    /// run's: the document sequence goes on from `state.consumed`, the steps from
    /// `state.step`, skipping the state's skipped steps and this mixture's.
    pub fn iter_from(&self, state: &MixtureState<DocumentsCheckpoint>) -> Result<MixedSteps> {
        Ok(MixedSteps::new(self.inner.clone(), self.origin(state)?))
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
        let i = &*self.inner;
        let origin = self.origin_or_fresh(from)?;
        let run = &i.settings.run;
        let (start_step, rank, world) = (run.start_step, run.rank, run.world);
        let target = origin.skip.after_kept(start_step.max(origin.step), steps);
        let mut stream = MixedStream::new(i, &origin, BuiltBy::Start);
        let mut step = origin.step;
        let mut at = stream.walk().clone();
        while step < target {
            let sizes = i.schedule.at(step);
            let Some(walked) = walk_step(&mut stream, sizes, world, rank, None, 0)? else {
                break;
            };
            if origin.skip.delivers(start_step, step) {
                sizes.check_pieces(step, walked.most_pieces)?;
            }
            step += 1;
            at = stream.walk().clone();
        }
        let sources = stream.sources_mut();
        self.state_at(
            origin.history,
            at.position(),
            step,
            &at.counts(),
            &origin.skip,
            sources,
        )
    }

    /// Checks that this mixture can resume from `state`: the same state version, seed,
    /// stop rule and number of sources; each source's part checked against that source
    /// ([`SourceError::DocumentsCheckpointMismatch`] naming the source: its dataset, `bos`,
    /// order as given and seed, and the mixture's schedule and `max_docs`, with a cursor
    /// inside the source); a consistent weights' history; and the weights in force the
    /// same as this mixture's ([`SourceError::MixtureMismatch`] otherwise:
    /// [`reweight`](Self::reweight) switches to this mixture's weights at the saved point).
    /// Rank and world size may differ.
    pub fn check_state(&self, state: &MixtureState<DocumentsCheckpoint>) -> Result<()> {
        self.origin(state).map(|_| ())
    }

    /// `state` with this mixture's weights from its point on (the rule applies them to the
    /// documents after `state.consumed`, counting from there), the new span joining the
    /// history: build the mixture with the new weights (`to_builder().weights(...)`),
    /// reweight the saved state, resume from the result. The state as it is when its
    /// weights are this mixture's already.
    pub fn reweight(
        &self,
        state: &MixtureState<DocumentsCheckpoint>,
    ) -> Result<MixtureState<DocumentsCheckpoint>> {
        let counts = self.inner.check_run(state)?;
        let Some((history, skip)) = self.settings().reweighted(state, &counts) else {
            return Ok(state.clone());
        };
        let mut sources: Vec<DocsByCount> = self
            .inner
            .members
            .iter()
            .map(|m| DocsByCount::new(&m.walked, BuiltBy::Start))
            .collect();
        self.state_at(
            history,
            state.consumed,
            state.step,
            &counts,
            &skip,
            &mut sources,
        )
    }

    /// The state at global position `at`, step `step`, where each source's count is
    /// `counts` (their places found by `sources`).
    fn state_at(
        &self,
        history: Vec<WeightSpan>,
        at: u64,
        step: u64,
        counts: &[u64],
        skip: &SkipSteps,
        sources: &mut [DocsByCount],
    ) -> Result<MixtureState<DocumentsCheckpoint>> {
        let i: &DocMixInner = &self.inner;
        let sources = i
            .members
            .iter()
            .zip(sources.iter_mut())
            .zip(counts)
            .map(|((m, docs), &n)| m.checkpoint(docs, n, step, i.settings.run.world))
            .collect::<Result<Vec<_>, SourceError>>()?;
        Ok(i.settings.state(history, (at, step), skip, sources))
    }
}
