//! [`DocumentsBuilder`]: a [`Documents`] source's settings, checked by `build`, which
//! indexes the shards the first step needs (every shard in shuffled order) and starts the
//! thread that indexes ahead of the walk.

use std::path::PathBuf;
use std::sync::Arc;

use rayon::prelude::*;

use super::ahead::IndexAhead;
use super::cache::IndexCache;
use super::inner::Inner;
use super::packed::Documents;
use super::index::{BosIndex, BuiltBy};
use super::layout::Layout;
use super::order::DocOrder;
use super::modes::{step_mode_setters, StepModes};
use super::packing::{packing_setters, Packing};
use super::problem::DocumentProblem;
use super::permutation::Permutation;
use super::schedule::Schedule;
use super::walk::Cursor;
use super::walker::Walker;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::setters::setters;
use crate::source::run::Run;
use crate::source::sampling::segmented::Segmented;
use crate::source::sampling::skip::SkipSteps;
use crate::source::tokens::{ShardFormat, TokenShards};

/// GPT-2's `<|endoftext|>`, which starts every document of modded-nanogpt's shards: the
/// default `bos` of `u16` shards.
pub const GPT2_BOS: u32 = 50256;
/// LLaMA-3's `<|begin_of_text|>`: the default `bos` of `u32` shards.
pub const LLAMA3_BOS: u32 = 128_000;

/// What [`Documents::bos`] (and a state's `bos`) says for documents taken from the files'
/// own indexes (Megatron's `.idx`, datatrove's `.ds.index`) rather than found by a `bos`
/// scan: `u32::MAX`, which no tokenizer's `bos` is (and which `bos` refuses).
pub const FILE_INDEX_BOS: u32 = u32::MAX;

impl Documents {
    /// A builder over `shards` (see [`DocumentsBuilder`] for the settings and defaults).
    pub fn builder(shards: TokenShards) -> DocumentsBuilder {
        DocumentsBuilder::new(shards)
    }
}

/// The settings of a [`Documents`] source; [`build`](Self::build) checks them.
///
/// | setting | default |
/// | --- | --- |
/// | [`packing`](Self::packing) | the next six settings at once, as one [`Packing`] |
/// | [`bos`](Self::bos) | [`GPT2_BOS`] (50256) for `u16` shards, [`LLAMA3_BOS`] (128000) if any shard is `u32` |
/// | [`tokens_per_batch`](Self::tokens_per_batch), [`max_seq_len`](Self::max_seq_len) | none: required (unless the schedule has an entry at step 0) |
/// | [`max_docs`](Self::max_docs) | modded-nanogpt's rule, step by step ([`modded_max_docs`](crate::source::modded_max_docs)) |
/// | [`schedule`](Self::schedule) | none: the same sizes every step |
/// | [`order`](Self::order) | [`DocOrder::Sequential`] |
/// | [`shard`](Self::shard) | rank 0 of 1 |
/// | [`token_type`](Self::token_type) | [`TokenType::I32`](crate::source::TokenType::I32) |
/// | [`positions`](Self::positions) | off |
/// | [`index_cache`](Self::index_cache) | none: every run scans the shards it needs |
/// | [`start_step`](Self::start_step), [`skip_steps`](Self::skip_steps) | none: from step 0, every step |
#[derive(Debug, Clone)]
#[must_use]
pub struct DocumentsBuilder {
    shards: TokenShards,
    bos: Option<u32>,
    /// The sizes of the steps, the token type and `positions`.
    packing: Packing,
    modes: StepModes,
    order: DocOrder,
    /// The rank and world size, start step and skipped steps (no batch size: a step is a
    /// batch).
    run: Run,
    index_cache: Option<PathBuf>,
    /// Tests: the thread ahead builds nothing until a test lets it.
    #[cfg(test)]
    gated: bool,
}

impl DocumentsBuilder {
    fn new(shards: TokenShards) -> Self {
        DocumentsBuilder {
            shards,
            bos: None,
            packing: Packing::default(),
            modes: StepModes::default(),
            order: DocOrder::Sequential,
            run: Run::default(),
            index_cache: None,
            #[cfg(test)]
            gated: false,
        }
    }

    setters! {
        /// The token that starts a document. A shard that never holds it is an error at
        /// build (or when the walk reaches it, in sequential order). Not given, files that
        /// keep an index of their documents (Megatron's `.idx`, datatrove's `.ds.index`)
        /// give the documents from it, and other files' `bos` is GPT-2's (`u16` tokens) or
        /// LLaMA-3's (`u32`); given, every file is scanned for it, whatever its format.
        bos(bos: u32) => bos = Some(bos);
        /// The order of the documents: modded-nanogpt's walk, or shuffled per epoch.
        order(order: DocOrder) => order = order;
        /// This process's rank among `world_size` data-parallel ranks: ranks take the
        /// documents of each step in rank order from one walk.
        shard(rank: u64, world_size: u64) => run.rank = rank, run.world_size = world_size;
    }

    packing_setters!();

    step_mode_setters!();

    /// Keeps each shard's index in `dir` across runs (made if missing), so that a later run
    /// loads it instead of scanning the shard again (in shuffled order, every shard is
    /// scanned at build). An index is used only if it was made for this very shard — its
    /// canonical path, size and modification time — and `bos`, holds together (a
    /// checksum), and a sample of its document starts are `bos` in the shard now; else
    /// the shard is scanned and the index written anew, atomically (a temporary file
    /// renamed into place). A folder that cannot be read or written is no error: the
    /// shards are scanned. Off by default.
    pub fn index_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.index_cache = Some(dir.into());
        self
    }

    /// Begins the run at step `k` (default 0): [`iter`](Documents::iter) yields exactly
    /// what an uninterrupted run yields from step `k` on — the same steps, numbered from
    /// `k` — found by walking the shards' indexes through the steps before it (about a
    /// microsecond a step, when the first step is pulled; shards not indexed yet are
    /// indexed, and no token is read or packed). A run resumed from a checkpoint that
    /// stands before step `k` begins at `k` too
    /// ([`iter_from`](Documents::iter_from)), and its checkpoints
    /// ([`checkpoint_after`](Documents::checkpoint_after)) count the steps walked over.
    /// A step before `k` that packs too many documents for its `cu_seqlens` is walked
    /// over, not an error (it is never packed); one that fits nowhere is
    /// ([`SourceError::NoStepFits`]).
    ///
    /// ```
    /// use pinring::source::{write_shard, Documents, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-docstart-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// // Documents of 1 to 9 tokens, each starting at 50256.
    /// let tokens: Vec<u16> = (0..9000u16).map(|i| if i % 9 == i / 9 % 9 { 50256 } else { 1 }).collect();
    /// write_shard(dir.join("train_000.bin"), &tokens)?;
    /// let shards = TokenShards::open([dir.join("train_000.bin")])?;
    /// let docs = |start| Documents::builder(shards.clone()).tokens_per_batch(31).max_seq_len(8)
    ///     .shard(1, 2).start_step(start).build();
    /// let ids = |step: pinring::source::DocStep| (step.step(), step.pieces().map(|p| p.doc).collect::<Vec<_>>());
    /// let whole: Vec<_> = docs(0)?.iter().take(40).map(ids).collect();
    /// let from_25: Vec<_> = docs(25)?.iter().take(15).map(ids).collect();
    /// assert_eq!(from_25, whole[25..]);
    /// assert_eq!(from_25[0].0, 25);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn start_step(mut self, k: u64) -> Self {
        self.run.start_step = k;
        self
    }

    /// Leaves the batches of these steps out of the run (default: none): each `(a, b)` is
    /// the half-open range `a..b` (steps `a` to `b - 1`, as Rust's `a..b` and Python's
    /// `range(a, b)` are). The walk goes through a skipped step as through any other —
    /// its documents are used up, on every rank, but not delivered (nothing of them is
    /// read) — so every other step keeps its number and its documents. A checkpoint
    /// records the skipped ranges, so a run resumed from it keeps skipping them (with any
    /// its own builder adds). The "roll back and skip the bad data" recovery after a loss
    /// spike: resume from the last good checkpoint with the steps of the spike skipped. A
    /// skipped step that packs too many documents is no error. A range that ends before
    /// it starts is [`SourceError::BadSkip`] at [`build`](Self::build).
    ///
    /// ```
    /// use pinring::source::{write_shard, Documents, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-docskip-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// let tokens: Vec<u16> = (0..2000u16).map(|i| if i % 10 == 0 { 50256 } else { 1 }).collect();
    /// write_shard(dir.join("train_000.bin"), &tokens)?;
    /// let shards = TokenShards::open([dir.join("train_000.bin")])?;
    /// let docs = Documents::builder(shards).tokens_per_batch(19).max_seq_len(64)
    ///     .skip_steps([(2, 4), (6, 7)]).build()?;
    /// // Two documents of 10 tokens a step: step k starts at document 2k, skipped or not.
    /// let steps: Vec<(u64, u64)> = docs.iter().take(5)
    ///     .map(|s| (s.step(), s.pieces().next().unwrap().doc)).collect();
    /// assert_eq!(steps, [(0, 0), (1, 20), (4, 80), (5, 100), (7, 140)]);
    /// // The checkpoint after them records the skips.
    /// let state = docs.checkpoint_after(None, 5)?;
    /// assert_eq!((state.step, state.doc, state.skip.clone()), (8, 16, vec![(2, 4), (6, 7)]));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn skip_steps(mut self, ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        self.run.skip_too(ranges);
        self
    }

    /// Tests: the thread ahead builds nothing until the test opens its gate.
    #[cfg(test)]
    pub(super) fn gated(mut self) -> Self {
        self.gated = true;
        self
    }

    /// Checks the settings and makes the source. Indexes the shards the first step needs
    /// (every shard in shuffled order, in parallel) and starts the thread that indexes the
    /// rest ahead of the walk.
    ///
    /// Errors: a world size of 0 or a rank not below it ([`SourceError::Zero`],
    /// [`SourceError::BadRank`]); a token type that cannot hold a shard's tokens
    /// ([`ShardProblem::TokenTypeTooNarrow`](crate::source::ShardProblem::TokenTypeTooNarrow));
    /// a `bos` a shard's format cannot hold
    /// ([`DocumentProblem::BosOutOfRange`](crate::source::DocumentProblem::BosOutOfRange));
    /// sizes of 0, too large, or a schedule that is not increasing
    /// ([`Schedule::new`]'s errors); a shard indexed here without a `bos`
    /// ([`DocumentProblem::NoBos`](crate::source::DocumentProblem::NoBos)); no first
    /// step fitting in a whole epoch ([`SourceError::NoStepFits`]); a skipped range that
    /// ends before it starts ([`SourceError::BadSkip`]).
    pub fn build(self) -> Result<Documents> {
        let run = self.run.check_own_steps()?;
        let (schedule, layout) = self.packing.check_with(&self.modes)?;
        if !schedule.align_to_bos() && self.order != DocOrder::Sequential {
            return Err(SourceError::BadPacking {
                setting: "align_to_bos",
                why: "contiguous windows (align_to_bos=false) walk the shards in order: use \
                      order sequential, or align_to_bos=true for shuffled documents"
                    .to_owned(),
            }
            .into());
        }
        let inner = self.assemble(schedule, layout, run.rank, run.world, false)?;
        // The first step, found now: its shards are indexed here, and a dataset where no
        // step fits is refused now rather than at the first pop.
        Walker::new(&inner, BuiltBy::Start, inner.epoch0.clone()).locate(Cursor::default(), 0)?;
        Ok(Documents {
            inner: Arc::new(inner),
            start_step: run.start_step,
            skip: run.skip,
            end_epoch: None,
        })
    }

    /// The first setting given that belongs to a mixture of documents rather than to one
    /// of its sources: `"rank/world_size"`, `"tokens_per_batch"`, `"max_seq_len"`,
    /// `"max_docs"`, `"schedule"`, `"token_type"`, `"positions"`, `"start_step"`,
    /// `"skip_steps"` (the mixture's steps are its own); `None` when the source sets none
    /// of them.
    pub(crate) fn mixture_setting(&self) -> Option<&'static str> {
        let run = &self.run;
        (run.rank != 0 || run.world_size != 1)
            .then_some("rank/world_size")
            .or_else(|| self.packing.first_given())
            .or_else(|| self.modes.first_given())
            .or_else(|| (run.start_step > 0).then_some("start_step"))
            .or_else(|| (!run.skip_steps.is_empty()).then_some("skip_steps"))
    }

    /// The order given.
    pub(crate) fn given_order(&self) -> DocOrder {
        self.order
    }

    /// The widest format among the shards.
    pub(crate) fn format(&self) -> ShardFormat {
        self.shards.format()
    }

    /// The `bos` given; without one, [`FILE_INDEX_BOS`] when the files' own indexes give
    /// the documents ([`uses_file_index`](Self::uses_file_index)), else the default for the
    /// shards' format.
    pub(crate) fn resolved_bos(&self) -> u32 {
        if self.uses_file_index() {
            return FILE_INDEX_BOS;
        }
        self.bos.unwrap_or(match self.shards.format() {
            ShardFormat::U16 => GPT2_BOS,
            ShardFormat::U32 => LLAMA3_BOS,
        })
    }

    /// Whether the documents come from the files' own indexes: no `bos` given, and some
    /// file keeps one (every file must then: `assemble` checks).
    pub(crate) fn uses_file_index(&self) -> bool {
        self.bos.is_none() && self.shards.shards().iter().any(|s| s.has_document_index())
    }

    /// Builds the source as a mixture of documents walks it (document by document, by
    /// count, at world size 1; never packed into steps of its own): with the mixture's
    /// `schedule` and `layout` (which its checkpoints record and check), walked in `order`
    /// (its own keyed by the mixture's seed). Indexes every shard now when
    /// `index_every_shard` (a stop rule needs each source's epoch length) or the order is
    /// shuffled; else the first shard now (a `bos` missing from it is found at build) and
    /// the rest ahead of the walk.
    pub(crate) fn build_member(
        self,
        schedule: Schedule,
        layout: Layout,
        order: DocOrder,
        index_every_shard: bool,
    ) -> Result<Documents> {
        let inner = self
            .order(order)
            .assemble(schedule, layout, 0, 1, index_every_shard)?;
        inner.index.ensure(0, BuiltBy::Start)?;
        Ok(Documents {
            inner: Arc::new(inner),
            start_step: 0,
            skip: SkipSteps::default(),
            end_epoch: None,
        })
    }

    /// The source's shared state for `schedule` and `layout` on `rank` of `world`: the
    /// index (every shard indexed now in shuffled order, or with `index_every_shard`), the
    /// thread indexing ahead of a sequential walk (when some shard is left to it), epoch
    /// 0's permutation. Checks the token type against the shards and `bos` against their
    /// formats.
    fn assemble(
        self,
        schedule: Schedule,
        layout: Layout,
        rank: u64,
        world: u64,
        index_every_shard: bool,
    ) -> Result<Inner> {
        self.shards.check_token_type(layout.token_type)?;
        let bos = self.resolved_bos();
        let from_files = self.uses_file_index();
        if let Some(s) = self.shards.shards().iter().find(|s| from_files && !s.has_document_index()) {
            return Err(SourceError::file(s.path(), DocumentProblem::NoDocumentIndex).into());
        }
        if let (Some(bos), Some(s)) = (self.bos.filter(|&b| b == FILE_INDEX_BOS), self.shards.shards().first()) {
            return Err(SourceError::file(s.path(), DocumentProblem::ReservedBos { bos }).into());
        }
        // Documents from the files' own indexes need no cache: reading the index is the
        // whole cost.
        let cache = self.index_cache.filter(|_| !from_files).map(IndexCache::new);
        let index = Arc::new(BosIndex::new(&self.shards, bos, from_files, cache)?);
        let (first_doc, epoch0, ahead) = match self.order {
            DocOrder::Shuffled { seed } => {
                let first_doc = index_all(&index)?;
                let documents = first_doc.last().copied().unwrap_or(0);
                let epoch0 = Arc::new(Permutation::new(documents, seed, 0));
                (first_doc, Some(epoch0), None)
            }
            DocOrder::Sequential if index_every_shard => (index_all(&index)?, None, None),
            // Contiguous windows need no index: where they lie is arithmetic.
            DocOrder::Sequential if !schedule.align_to_bos() => (Box::default(), None, None),
            DocOrder::Sequential => {
                #[cfg(test)]
                let gated = self.gated;
                #[cfg(not(test))]
                let gated = false;
                let ahead = (index.shards() > 1)
                    .then(|| IndexAhead::start(index.clone(), gated).map(Arc::new))
                    .transpose()?;
                (Box::default(), None, ahead)
            }
        };
        Ok(Inner {
            fingerprint: self.shards.fingerprint(),
            shards: self.shards,
            index,
            ahead,
            first_doc,
            epoch0,
            bos,
            order: self.order,
            schedule,
            rank,
            world,
            layout,
        })
    }
}

/// Indexes every shard, in parallel on rayon's pool; returns the documents before each
/// shard and in all. The first shard in order that fails is the error.
fn index_all(index: &BosIndex) -> Result<Box<[u64]>, SourceError> {
    let counts: Vec<Result<u64, SourceError>> = (0..index.shards())
        .into_par_iter()
        .map(|s| index.ensure(s, BuiltBy::Start).map(|b| b.len() as u64))
        .collect();
    let mut first_doc = Vec::with_capacity(counts.len() + 1);
    let mut total = 0;
    first_doc.push(0);
    for count in counts {
        total += count?;
        first_doc.push(total);
    }
    Ok(first_doc.into())
}
