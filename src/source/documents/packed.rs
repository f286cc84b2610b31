//! [`Documents`]: packed documents from token shards, a step of one rank per batch, as
//! modded-nanogpt's `distributed_data_generator(align_to_bos=True)` makes them.

use std::fmt;
use std::sync::Arc;

use super::checkpoint::{cursor_text, DocumentsCheckpoint};
use super::decoder::PackDocuments;
use super::index::{BosIndex, BuiltBy, IndexStats};
use super::inner::Inner;
use super::order::DocOrder;
use super::modes::StepModes;
use super::packing::Packing;
use super::schedule::Schedule;
use super::steps::Steps;
use super::walk::Cursor;
use super::walker::Walker;
use crate::config::ConfigBuilder;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::fields::Fields;
use crate::source::run::Run;
use crate::source::sampling::skip::SkipSteps;
use crate::source::tokens::{TokenShards, TokenType};

/// Packed documents from llm.c token shards, for variable-length attention: each batch is
/// one step of one rank, `tokens_per_batch + 1` tokens of whole documents (each starting
/// at a `bos` token, cut at `max_seq_len`), with `inputs` and `targets` as views of them
/// and `cu_seqlens` marking where each document starts — exactly what modded-nanogpt's
/// `distributed_data_generator(pattern, num_tokens = tokens_per_batch × W, max_seq_len,
/// grad_accum_steps = 1, align_to_bos = True)` yields on rank `r` of `W` at each step (its
/// full-index walk), then on past the last shard into the next epoch.
///
/// Build one with [`Documents::builder`]; run it with a config from
/// [`config`](Self::config), the decoder from [`decoder`](Self::decoder) and the steps
/// from [`iter`](Self::iter) (or [`iter_from`](Self::iter_from) a checkpoint) — from a
/// [`start_step`](crate::source::DocumentsBuilder::start_step) if given, leaving out the
/// [`skip_steps`](crate::source::DocumentsBuilder::skip_steps). A batch
/// then has the fields `tokens` (`N + 1`, the token type), `inputs` and `targets` (views,
/// `N` each), `cu_seqlens` (int32, `max_docs` long: `[0, end of each document…, N, N…]`,
/// the last document ending at `N`) and, with
/// [`positions`](crate::source::DocumentsBuilder::positions), `positions` (int32, `N`:
/// each input's position in its document); its dims are
/// `[N + 1, max_docs, N]`; its rows are the documents (`id`: the document's id, the global
/// offset of its `bos` token; `len`: its length in `cu_seqlens`); its
/// [`step`](crate::Batch::step) the step number and its [`epoch`](crate::Batch::epoch) the
/// walk's.
///
/// Where documents start is found once per shard (a scan for `bos`, about 11 GB/s from
/// the page cache): the first shard at
/// [`build`](crate::source::DocumentsBuilder::build), the next ones by a thread ahead of
/// the walk, so no step waits for an index
/// ([`index_stats`](Self::index_stats) says so); in shuffled order every shard at build, in
/// parallel.
///
/// Cheap to clone (a handle on the shared source).
///
/// ```
/// use pinring::source::{write_shard, Documents, TokenShards};
/// use pinring::{Fence, Pipeline};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-documents-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// // Documents of 7 tokens: 50256 (GPT-2's end of text starts each), then 6 others.
/// let tokens: Vec<u16> = (0..7000u16).map(|i| if i % 7 == 0 { 50256 } else { i % 7 }).collect();
/// write_shard(dir.join("train_000.bin"), &tokens)?;
/// let docs = Documents::builder(TokenShards::glob(dir.join("train_*.bin"))?)
///     .tokens_per_batch(16) // N: inputs per step (17 tokens packed)
///     .max_seq_len(5)       // documents cut at 5 tokens
///     .build()?;
/// let config = docs.config().decode_threads(1).build()?;
/// let mut pipeline = Pipeline::new(config, docs.decoder(), docs.iter().take(2))?;
/// while let Some(batch) = pipeline.pop()? {
///     let cu: Vec<i32> = batch.field_bytes("cu_seqlens").unwrap()
///         .chunks_exact(4).map(|b| i32::from_le_bytes(b.try_into().unwrap())).collect();
///     // Four documents cut at 5 tokens fill 17 = 5 + 5 + 5 + 2: the last one less 1 ends at N.
///     assert_eq!(&cu[..6], &[0, 5, 10, 15, 16, 16]);
///     assert_eq!(batch.row_lens(), &[5, 5, 5, 1]);
///     assert_eq!(batch.sample_ids()[0], 28 * batch.step().unwrap()); // 4 documents a step
///     batch.release(Fence::Sync).expect("a Sync fence always captures");
/// }
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Clone)]
pub struct Documents {
    pub(super) inner: Arc<Inner>,
    /// The step a run begins at, at the earliest (`DocumentsBuilder::start_step`; 0: the
    /// start).
    pub(super) start_step: u64,
    /// The steps a run leaves out (`DocumentsBuilder::skip_steps`).
    pub(super) skip: SkipSteps,
    /// The first epoch a run does not reach ([`until_epoch`](Self::until_epoch); `None`:
    /// endless).
    pub(super) end_epoch: Option<u64>,
}

impl fmt::Debug for Documents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let inner = &*self.inner;
        f.debug_struct("Documents")
            .field("shards", &inner.index.shards())
            .field("bos", &inner.bos)
            .field("order", &inner.order)
            .field("schedule", &inner.schedule)
            .field("rank", &inner.rank)
            .field("world_size", &inner.world)
            .field("token_type", &inner.layout.token_type)
            .field("positions", &inner.layout.positions.is_some())
            .field("start_step", &self.start_step)
            .field("skip_steps", &self.skip.ranges())
            .field("end_epoch", &self.end_epoch)
            .finish()
    }
}

impl Documents {
    /// A config builder for this source: batch size 1 (a batch is a step), its
    /// [`fields`](Self::fields) (which size the slot), and `rows_per_batch` the schedule's
    /// largest `max_docs` (a row per document). Add the rest (the backend, decode threads)
    /// and build it.
    pub fn config(&self) -> ConfigBuilder {
        self.inner.layout.config()
    }

    /// The decoder that packs this source's steps into batches.
    pub fn decoder(&self) -> PackDocuments {
        PackDocuments::new()
    }

    /// This rank's steps: endless, epoch after epoch (or to the start of
    /// [`until_epoch`](Self::until_epoch)'s epoch) — from step 0, or from the
    /// [`start_step`](crate::source::DocumentsBuilder::start_step) (the steps before it
    /// walked over when the first step is pulled), leaving out the
    /// [`skip_steps`](crate::source::DocumentsBuilder::skip_steps).
    pub fn iter(&self) -> Steps {
        Steps::new(
            self.inner.clone(),
            Cursor::default(),
            0,
            self.inner.epoch0.clone(),
            self.start_step,
            self.skip.clone(),
            self.end_epoch,
        )
    }

    /// This rank's steps from `checkpoint` (which [`check_checkpoint`](Self::check_checkpoint)
    /// checks first): the walk goes on from its cursor, at its step, with this source's
    /// world size — to this source's
    /// [`start_step`](crate::source::DocumentsBuilder::start_step) first if the checkpoint
    /// stands before it — leaving out the checkpoint's skipped steps and this source's.
    /// The shards the next step needs are indexed here, off the steps' path; a next step
    /// that fits nowhere is [`SourceError::NoStepFits`].
    pub fn iter_from(&self, checkpoint: &DocumentsCheckpoint) -> Result<Steps> {
        self.check_checkpoint(checkpoint)?;
        let mut walker = Walker::new(&self.inner, BuiltBy::Start, self.inner.epoch0.clone());
        walker.locate(checkpoint.cursor(), checkpoint.step)?;
        Ok(Steps::new(
            self.inner.clone(),
            checkpoint.cursor(),
            checkpoint.step,
            walker.into_perm(),
            self.start_step,
            self.skip.union(&checkpoint.skip),
            self.end_epoch,
        ))
    }

    /// The rank-agnostic state after this rank popped `steps` steps since `from` (`None`:
    /// since the start), which is checked first: the walk's cursor after them, the step
    /// count and the skipped steps. The run is the one [`iter`](Self::iter) (or
    /// [`iter_from`](Self::iter_from)`(from)`) yields: it begins at the
    /// [`start_step`](crate::source::DocumentsBuilder::start_step) if `from` stands before
    /// it and leaves out `from`'s skipped steps and this source's, so the steps walked
    /// over count as walked, and the checkpoint's `step` is the next step delivered (past
    /// a skipped range that follows the last step popped). Every rank of a run makes the
    /// same one ([`DocumentsCheckpoint::merge`] checks that). It walks the steps again
    /// (about a microsecond a step; indexing shards not indexed yet): pass the last
    /// checkpoint as `from` to keep it short. A delivered step that cannot be made (too
    /// many documents, none fits) is its error: a pipeline never delivers it; a step
    /// walked over is an error only if it fits nowhere.
    ///
    /// With an [`until_epoch`](Self::until_epoch), the walk stops where the run ends: at
    /// the first step that would start in the end epoch, which may come before the steps
    /// asked for are walked (a skipped range that runs past the end, a start step past
    /// it). The checkpoint then stands there — its cursor in the end epoch, where that
    /// step would start, and its `step` the number of steps the run has — so a run resumed
    /// from it with the same end delivers nothing more.
    pub fn checkpoint_after(
        &self,
        from: Option<&DocumentsCheckpoint>,
        steps: u64,
    ) -> Result<DocumentsCheckpoint> {
        let (mut cursor, mut step, skip) = match from {
            Some(from) => {
                self.check_checkpoint(from)?;
                (from.cursor(), from.step, self.skip.union(&from.skip))
            }
            None => (Cursor::default(), 0, self.skip.clone()),
        };
        let first = self.start_step.max(step);
        let target = skip.after_kept(first, steps);
        let mut walker = Walker::new(&self.inner, BuiltBy::Start, self.inner.epoch0.clone());
        let past_end = |cursor: Cursor| self.end_epoch.is_some_and(|end| cursor.epoch >= end);
        let pops = self.inner.schedule.grad_accum_steps();
        'steps: while step < target && !past_end(cursor) {
            // Each of the step's micro-steps (its pops) walked.
            for _ in 0..pops {
                let located = walker.locate(cursor, step)?;
                if past_end(located.start) {
                    cursor = located.start;
                    break 'steps;
                }
                if skip.delivers(first, step) {
                    self.inner.schedule.at(step).check_pieces(step, located.walk.most_pieces)?;
                }
                cursor = located.after();
            }
            step += 1;
        }
        // The run's end, where it falls right after the steps walked: say so in the cursor.
        if step == target && self.end_epoch.is_some() && !past_end(cursor)
            && let Ok(next) = walker.locate(cursor, step)
                && past_end(next.start) {
                    cursor = next.start;
                }
        Ok(self.inner.checkpoint_at(cursor, step, &skip))
    }

    /// This source again — sharing its shards and their index: nothing is scanned again —
    /// its runs ending at the start of epoch `end`: [`iter`](Self::iter) and
    /// [`iter_from`](Self::iter_from) yield no step of epoch `end` or later, and walk no
    /// step there either while they walk over the steps before the start step and the
    /// skipped ones (a skipped range that runs past the end ends the run after the steps
    /// before it); [`checkpoint_after`](Self::checkpoint_after) stops there too. For a run
    /// of `E` epochs from epoch 0, resumed or not: `until_epoch(E)` (as
    /// [`Samples::until_epoch`](crate::source::Samples::until_epoch) for windows).
    ///
    /// ```
    /// use pinring::source::{write_shard, Documents, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-until-docs-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// // 100 documents of 10 tokens; a step of 19 + 1 tokens packs 2: 50 steps an epoch.
    /// let tokens: Vec<u16> = (0..1000u16).map(|i| if i % 10 == 0 { 50256 } else { i }).collect();
    /// write_shard(dir.join("train_000.bin"), &tokens)?;
    /// let docs = Documents::builder(TokenShards::open([dir.join("train_000.bin")])?)
    ///     .tokens_per_batch(19).max_seq_len(64).build()?;
    /// let epochs: Vec<u64> = docs.until_epoch(2).iter().map(|s| s.epoch()).collect();
    /// assert_eq!(epochs, [[0; 50], [1; 50]].concat());
    /// // Skipping from step 5 to far past the end: steps 0 to 4, then the run ends.
    /// let skipping = docs.with_steps(0, [(5, 1 << 62)])?.until_epoch(1);
    /// assert_eq!(skipping.iter().map(|s| s.step()).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
    /// let end = skipping.checkpoint_after(None, 5)?;
    /// assert_eq!((end.epoch, end.step), (1, 50)); // the run's 50 steps walked, no more
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn until_epoch(&self, end: u64) -> Documents {
        Documents {
            end_epoch: Some(end),
            ..self.clone()
        }
    }

    /// The first epoch a run does not reach ([`until_epoch`](Self::until_epoch)); `None`
    /// when runs are endless.
    pub fn end_epoch(&self) -> Option<u64> {
        self.end_epoch
    }

    /// This source again — sharing its shards and their index: nothing is scanned again —
    /// beginning at step `start_step` and leaving out `skip_steps` (in place of its own),
    /// as [`DocumentsBuilder::start_step`](crate::source::DocumentsBuilder::start_step) and
    /// [`DocumentsBuilder::skip_steps`](crate::source::DocumentsBuilder::skip_steps) set
    /// them. A range that ends before it starts is [`SourceError::BadSkip`].
    pub fn with_steps(
        &self,
        start_step: u64,
        skip_steps: impl IntoIterator<Item = (u64, u64)>,
    ) -> Result<Documents> {
        Ok(Documents {
            inner: self.inner.clone(),
            start_step,
            skip: SkipSteps::new(skip_steps)?,
            end_epoch: self.end_epoch,
        })
    }

    /// The same source walked as `rank` of `world_size` ranks, from `start_step`, leaving
    /// out `skip_steps`, to the start of epoch `end_epoch` (a loader's run): the index, the
    /// thread indexing ahead and the settings shared. The first step is located as [`DocumentsBuilder::build`] locates
    /// it, so that a world size at which no step fits is refused here.
    pub(crate) fn on_run(
        &self,
        rank: u64,
        world_size: u64,
        start_step: u64,
        skip_steps: impl IntoIterator<Item = (u64, u64)>,
        end_epoch: Option<u64>,
    ) -> Result<Documents> {
        let run = Run {
            rank,
            world_size,
            start_step,
            skip_steps: skip_steps.into_iter().map(|(a, b)| a..b).collect(),
            ..Run::default()
        }
        .check_own_steps()?;
        let inner = if (run.rank, run.world) == (self.inner.rank, self.inner.world) {
            self.inner.clone()
        } else {
            let inner = self.inner.on_ranks(run.rank, run.world);
            Walker::new(&inner, BuiltBy::Start, inner.epoch0.clone())
                .locate(Cursor::default(), 0)?;
            Arc::new(inner)
        };
        Ok(Documents {
            inner,
            start_step: run.start_step,
            skip: run.skip,
            end_epoch,
        })
    }

    /// The skipped steps of a run from `from`: this source's and `from`'s.
    pub(crate) fn skip_union(&self, from: Option<&DocumentsCheckpoint>) -> SkipSteps {
        match from {
            Some(c) => self.skip.union(&c.skip),
            None => self.skip.clone(),
        }
    }

    /// The step a run begins at, at the earliest
    /// ([`DocumentsBuilder::start_step`](crate::source::DocumentsBuilder::start_step); 0
    /// when not set).
    pub fn start_step(&self) -> u64 {
        self.start_step
    }

    /// The steps a run leaves out
    /// ([`DocumentsBuilder::skip_steps`](crate::source::DocumentsBuilder::skip_steps)), as
    /// half-open ranges `(start, end)`, sorted and disjoint (overlapping or touching
    /// ranges merged, empty ones dropped).
    pub fn skip_steps(&self) -> &[(u64, u64)] {
        self.skip.ranges()
    }

    /// Checks that this source can resume from `checkpoint`: the same checkpoint version,
    /// dataset ([`Fingerprint`](crate::source::Fingerprint): format, file names, sizes and
    /// content fingerprints — the same files, in any folder), `bos`, order, seed, schedule
    /// and `max_docs`, and a cursor inside this
    /// dataset, or
    /// [`SourceError::DocumentsCheckpointMismatch`] naming the first difference. Rank,
    /// world size and the skipped steps may differ (a run resumed from it skips its
    /// steps and this source's).
    pub fn check_checkpoint(&self, checkpoint: &DocumentsCheckpoint) -> Result<()> {
        let inner = &*self.inner;
        let here = inner.checkpoint_at(Cursor::default(), 0, &SkipSteps::default());
        if let Some((what, saved, here)) = checkpoint.run_difference(&here) {
            return Err(SourceError::DocumentsCheckpointMismatch { what, saved, here }.into());
        }
        let cursor = checkpoint.cursor();
        let outside = |here: String| {
            Err(SourceError::DocumentsCheckpointMismatch {
                what: "the cursor".to_owned(),
                saved: cursor_text(cursor),
                here,
            }
            .into())
        };
        match inner.order {
            DocOrder::Sequential if !inner.schedule.align_to_bos() => {
                let shards = inner.index.shards() as u64;
                if cursor.shard >= shards {
                    return outside(format!("past the last of {shards} shards"));
                }
                let tokens = inner.index.tokens(cursor.shard as usize);
                if cursor.doc > tokens {
                    return outside(format!(
                        "past the last of the {tokens} tokens of shard {} (a contiguous walk's \
                         cursor is a token)",
                        cursor.shard
                    ));
                }
            }
            DocOrder::Sequential => {
                let shards = inner.index.shards() as u64;
                if cursor.shard >= shards {
                    return outside(format!("past the last of {shards} shards"));
                }
                let docs = inner.index.ensure(cursor.shard as usize, BuiltBy::Start)?.len() as u64;
                if cursor.doc > docs {
                    return outside(format!(
                        "past the last of the {docs} documents of shard {}",
                        cursor.shard
                    ));
                }
            }
            DocOrder::Shuffled { .. } => {
                let docs = inner.documents();
                if cursor.shard != 0 || cursor.doc > docs {
                    return outside(format!(
                        "past the last of the epoch's {docs} documents (shard 0 in shuffled order)"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The fields of this source's batches (see [`Documents`]): what
    /// [`config`](Self::config) gives the config.
    pub fn fields(&self) -> Fields {
        self.inner.layout.fields.clone()
    }

    /// The step sizes over the run.
    pub fn schedule(&self) -> &Schedule {
        &self.inner.schedule
    }

    /// The packing it was built with, every field given (the defaults filled in).
    pub fn packing(&self) -> Packing {
        Packing::of(&self.inner.schedule, &self.inner.layout)
    }

    /// The walk and derived fields it was built with
    /// ([`DocumentsBuilder::modes`](crate::source::DocumentsBuilder::modes)), each `None`
    /// where at its default.
    pub fn modes(&self) -> StepModes {
        StepModes::of(&self.inner.schedule, &self.inner.layout)
    }

    /// How the shards were indexed so far: up front, ahead of the walk, or by the walk
    /// itself (a step waited).
    pub fn index_stats(&self) -> IndexStats {
        self.inner.index.stats()
    }

    /// The token that starts a document; [`FILE_INDEX_BOS`](crate::source::FILE_INDEX_BOS)
    /// when the documents come from the files' own indexes (Megatron's `.idx`, datatrove's
    /// `.ds.index`, with no `bos` given).
    pub fn bos(&self) -> u32 {
        self.inner.bos
    }

    /// The order.
    pub fn order(&self) -> DocOrder {
        self.inner.order
    }

    /// This source's rank.
    pub fn rank(&self) -> u64 {
        self.inner.rank
    }

    /// The world size.
    pub fn world_size(&self) -> u64 {
        self.inner.world
    }

    /// The type tokens are written as.
    pub fn token_type(&self) -> TokenType {
        self.inner.layout.token_type
    }

    /// The shards.
    pub fn shards(&self) -> &TokenShards {
        &self.inner.shards
    }

    /// The checkpoint of this source's walk at `cursor`, `step` steps done, skipping its
    /// skipped steps.
    pub(crate) fn checkpoint_at(&self, cursor: Cursor, step: u64) -> DocumentsCheckpoint {
        self.inner.checkpoint_at(cursor, step, &self.skip)
    }

    /// Its shards' index.
    pub(crate) fn bos_index(&self) -> &BosIndex {
        &self.inner.index
    }

    /// The documents in the dataset, when they are counted up front (shuffled order, which
    /// indexes every shard at build); `None` in sequential order.
    pub fn documents(&self) -> Option<u64> {
        match self.inner.order {
            DocOrder::Sequential => None,
            DocOrder::Shuffled { .. } => Some(self.inner.documents()),
        }
    }
}
