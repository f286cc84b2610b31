//! Sampling: which windows of a source an epoch visits, in which order, on which rank;
//! equal shares per rank; checkpoints that resume on another world size.

use std::fmt;
use std::sync::Arc;

use super::checkpoint::{Checkpoint, Fingerprint};
use super::order::Order;
use super::sampler_inner::Inner;
use super::samples::{Position, Samples};
use super::segmented::{Segmented, WindowSpec};
use super::steps::Origin;
use crate::error::source::SourceError;
use crate::error::Result;

/// Cuts a [`Segmented`] source into windows and yields them epoch after epoch: in file
/// order, shuffled per epoch, or at random offsets ([`Order`]); sharded by
/// `(rank, world_size)` with equal shares per rank; resumable from a [`Position`] on the
/// same ranks, or from a rank-agnostic [`Checkpoint`] on any number of ranks.
///
/// The iterators it makes ([`iter`](Self::iter), [`iter_from`](Self::iter_from),
/// [`iter_from_checkpoint`](Self::iter_from_checkpoint), [`epoch`](Self::epoch)) own what
/// they need, so they go straight into [`Pipeline::new`](crate::Pipeline::new). Cloning a
/// sampler is cheap.
///
/// # Epochs, positions, ranks
///
/// Each epoch has a global order of `N` windows ([`grid_windows`](Self::grid_windows)):
/// the grid for [`Order::Sequential`], a permutation of it for [`Order::Shuffled`], `N`
/// draws for [`Order::Random`]. An epoch uses its first `M` positions
/// ([`epoch_windows`](Self::epoch_windows); see [`SamplerBuilder::batch_size`](crate::source::SamplerBuilder::batch_size) for `M`)
/// and drops the tail. Rank `r` of `W` takes positions `r, r + W, r + 2W, …` below `M`
/// (interleaved by sample), so that once every rank has consumed `k` samples, the
/// consumed windows are exactly positions `0..W·k` of the epoch's order. That global
/// count is what a [`Checkpoint`] holds.
///
/// # Ids
///
/// Every window a sampler yields carries its stable id and its epoch
/// ([`Window::id`](crate::source::Window::id),
/// [`Window::epoch`](crate::source::Window::epoch)): see [`WindowSpec::id`].
///
/// ```
/// use pinring::source::{Order, Position, Sampler, TokenShards};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-sampler-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// # let path = dir.join("shard.bin");
/// pinring::source::write_shard(&path, &(0..1000u16).collect::<Vec<_>>())?;
/// let shards = TokenShards::open([&path])?;
/// // Windows of T + 1 = 9 tokens, stride 8: 124 per epoch; rank 1 of 2 gets 62.
/// let sampler = shards
///     .windows(9)
///     .order(Order::Shuffled { seed: 42 })
///     .shard(1, 2)
///     .build()?;
/// assert_eq!(sampler.epoch_len(), 62);
///
/// // A run that stops after 70 samples resumes where it was.
/// let mut run = sampler.iter();
/// let first: Vec<_> = run.by_ref().take(70).map(|w| w.start()).collect();
/// let at = sampler.position_after(Position::default(), 70);
/// assert_eq!(at, Position { epoch: 1, index: 8 });
/// assert_eq!(run.position(), at);
/// let resumed: Vec<_> = sampler.iter_from(at)?.take(5).map(|w| w.start()).collect();
/// let continued: Vec<_> = run.take(5).map(|w| w.start()).collect();
/// assert_eq!(resumed, continued);
/// # let _ = first;
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
///
/// Resuming on another world size, from a [`Checkpoint`]:
///
/// ```
/// use std::collections::BTreeSet;
/// use pinring::source::{write_shard, Checkpoint, Order, TokenShards};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-elastic-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// write_shard(dir.join("train_000.bin"), &(0..10_000u16).collect::<Vec<_>>())?;
/// let shards = TokenShards::open([dir.join("train_000.bin")])?;
/// let sampler = |rank, world, batch| {
///     shards.clone().windows(9).order(Order::Shuffled { seed: 3 })
///         .shard(rank, world).batch_size(batch).build()
/// };
/// // 1249 windows. Two ranks with batches of 8: 78 batches each, 1248 windows used.
/// assert_eq!(sampler(0, 2, 8)?.epoch_batches(), Some(78));
///
/// // Both ranks consume 10 batches, then the run stops and saves.
/// let mut seen = BTreeSet::new();
/// let mut states = Vec::new();
/// for rank in 0..2 {
///     let s = sampler(rank, 2, 8)?;
///     seen.extend(s.iter().take(80).map(|w| w.id()));
///     states.push(s.checkpoint(0, 80));
/// }
/// let state = Checkpoint::merge(&states)?;
/// assert_eq!((state.epoch, state.consumed), (0, 160));
///
/// // Three ranks with batches of 4 finish the epoch: 1089 windows left, 90 batches each.
/// for rank in 0..3 {
///     let s = sampler(rank, 3, 4)?;
///     assert_eq!(s.samples_left(&state)?, 360);
///     for w in s.iter_from_checkpoint(&state)?.take(360) {
///         assert_eq!(w.epoch(), 0);
///         assert!(seen.insert(w.id()), "window {} twice", w.id());
///     }
/// }
/// // Every window of the epoch exactly once, but for the last 9 (fewer than 3 × 4).
/// assert_eq!(seen.len(), 160 + 3 * 360);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
pub struct Sampler<S> {
    pub(super) inner: Arc<Inner<S>>,
}

impl<S> Clone for Sampler<S> {
    fn clone(&self) -> Self {
        Sampler {
            inner: self.inner.clone(),
        }
    }
}

impl<S> fmt::Debug for Sampler<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &*self.inner;
        f.debug_struct("Sampler")
            .field("window", &i.window)
            .field("stride", &i.stride)
            .field("order", &i.order)
            .field("run", &i.run)
            .field("even_ranks", &i.even_ranks)
            .field("drop_last", &i.drop_last)
            .field("windows", &i.windows)
            .field("epoch_windows", &i.epoch_windows)
            .field("epoch_len", &i.len)
            .finish()
    }
}

impl<S: Segmented> Sampler<S> {
    /// The source.
    pub fn source(&self) -> &S {
        &self.inner.source
    }

    /// Units per window.
    pub fn window(&self) -> u64 {
        self.inner.window
    }

    /// Units between grid windows' starts.
    pub fn stride(&self) -> u64 {
        self.inner.stride
    }

    /// The order of each epoch.
    pub fn order(&self) -> Order {
        self.inner.order
    }

    /// This sampler's rank.
    pub fn rank(&self) -> u64 {
        self.inner.run.rank
    }

    /// Ranks the epoch is sharded over.
    pub fn world_size(&self) -> u64 {
        self.inner.run.world
    }

    /// The batch size set with [`SamplerBuilder::batch_size`](crate::source::SamplerBuilder::batch_size), if any.
    pub fn batch_size(&self) -> Option<u64> {
        self.inner.run.batch
    }

    /// Whether an epoch drops what does not fill whole batches on every rank
    /// ([`SamplerBuilder::drop_last`](crate::source::SamplerBuilder::drop_last); matters only with a batch size).
    pub fn drop_last(&self) -> bool {
        self.inner.drop_last
    }

    /// The step a run begins at, at the earliest
    /// ([`SamplerBuilder::start_step`](crate::source::SamplerBuilder::start_step); 0 when not set).
    pub fn start_step(&self) -> u64 {
        self.inner.run.start_step
    }

    /// The steps a run leaves out ([`SamplerBuilder::skip_steps`](crate::source::SamplerBuilder::skip_steps)),
    /// as sorted, disjoint half-open `(start, end)` ranges.
    pub fn skip_steps(&self) -> &[(u64, u64)] {
        self.inner.run.skip.ranges()
    }

    /// Whether the ranks' epochs are made equal without a batch size
    /// ([`SamplerBuilder::even_ranks`](crate::source::SamplerBuilder::even_ranks)).
    pub fn even_ranks(&self) -> bool {
        self.inner.even_ranks
    }

    /// Grid windows in the whole source: `N`, the positions of each epoch's order (every
    /// rank, before any is dropped).
    pub fn grid_windows(&self) -> u64 {
        self.inner.windows
    }

    /// Positions each epoch uses over all ranks together: `M` (see
    /// [`SamplerBuilder::batch_size`](crate::source::SamplerBuilder::batch_size)); the other `N - M` are dropped.
    pub fn epoch_windows(&self) -> u64 {
        self.inner.epoch_windows
    }

    /// Samples per epoch for this rank (at least 1). Equal on every rank when a batch
    /// size or [`even_ranks`](crate::source::SamplerBuilder::even_ranks) is set.
    pub fn epoch_len(&self) -> u64 {
        self.inner.len
    }

    /// Batches per epoch for this rank, the same on every rank: `epoch_len / B` with
    /// [`drop_last`](crate::source::SamplerBuilder::drop_last), `⌈epoch_len / B⌉` without (the last one
    /// short). `None` without a batch size.
    pub fn epoch_batches(&self) -> Option<u64> {
        self.inner.run.batch.map(|b| self.inner.len.div_ceil(b))
    }

    /// How many ids exist: [`grid_windows`](Self::grid_windows) for the grid orders, the
    /// number of possible window starts for [`Order::Random`].
    pub fn id_count(&self) -> u64 {
        match self.inner.order {
            Order::Random { .. } => self.inner.cum_starts.last().copied().unwrap_or(0),
            _ => self.inner.windows,
        }
    }

    /// The window whose id is `id` (see [`WindowSpec::id`]), with epoch 0; `None` when
    /// `id` is not below [`id_count`](Self::id_count).
    ///
    /// ```
    /// use pinring::source::{write_shard, Order, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-byid-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &(0..100u16).collect::<Vec<_>>())?;
    /// let sampler = TokenShards::open([dir.join("a.bin")])?
    ///     .windows(11).order(Order::Shuffled { seed: 1 }).build()?;
    /// for w in sampler.epoch(3) {
    ///     assert_eq!(sampler.by_id(w.id()).unwrap().start(), w.start());
    /// }
    /// assert!(sampler.by_id(sampler.id_count()).is_none());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn by_id(&self, id: u64) -> Option<S::Window> {
        if id >= self.id_count() {
            return None;
        }
        let inner = &*self.inner;
        let (segment, start) = match inner.order {
            Order::Random { .. } => inner.start_of(id),
            _ => inner.grid(id),
        };
        Some(inner.source.window(WindowSpec {
            segment,
            start,
            len: inner.window,
            id,
            epoch: 0,
            step: None,
            batch_size: None,
        }))
    }

    /// The dataset's fingerprint, as checkpoints record it.
    ///
    /// ```
    /// use pinring::source::{FixedRecords, Sampler};
    /// # let path = std::env::temp_dir().join(format!("pinring-samplerprint-doc-{}.bin", std::process::id()));
    /// std::fs::write(&path, [0u8; 64]).unwrap();
    /// let sampler = Sampler::builder(FixedRecords::open([&path], 16)?).build()?;
    /// let print = sampler.fingerprint();
    /// assert_eq!((print.format.as_str(), print.record_bytes, print.sizes.as_slice()), ("records", 16, &[64][..]));
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.inner.fingerprint
    }

    /// The position reached after yielding `samples` more samples from `from`. With
    /// `B` samples per batch, a run started at `from` that has consumed `n` full
    /// batches resumes at `position_after(from, n * B)`.
    pub fn position_after(&self, from: Position, samples: u64) -> Position {
        let len = u128::from(self.inner.len);
        let total = u128::from(from.index) + u128::from(samples);
        let epoch = u128::from(from.epoch) + total / len;
        Position {
            epoch: u64::try_from(epoch).unwrap_or(u64::MAX),
            index: (total % len) as u64,
        }
    }

    /// The sample this rank yields at `position`, without iterating to it (building the
    /// epoch's permutation first with [`Order::Shuffled`]). `None` when `position.index`
    /// is not below [`epoch_len`](Self::epoch_len).
    pub fn sample_at(&self, position: Position) -> Option<S::Window> {
        let mut it = self.iter_from(position).ok()?;
        if position.index >= self.inner.len {
            return None;
        }
        it.next()
    }

    /// An endless iterator: the run from epoch 0, index 0 — or, with a
    /// [`start_step`](crate::source::SamplerBuilder::start_step) `k`, from where that run
    /// stands at step `k` — leaving out the
    /// [`skip_steps`](crate::source::SamplerBuilder::skip_steps).
    pub fn iter(&self) -> Samples<S> {
        Samples::new(self.inner.clone(), Position::default(), None)
            .start_at_step(self.inner.run.start_step)
    }

    /// An endless iterator from `position`. An index equal to the epoch length means the
    /// start of the next epoch; a larger one is [`SourceError::BadPosition`].
    pub fn iter_from(&self, position: Position) -> Result<Samples<S>> {
        if position.index > self.inner.len {
            return Err(SourceError::BadPosition {
                index: position.index,
                len: self.inner.len,
            }
            .into());
        }
        Ok(Samples::new(self.inner.clone(), position, None))
    }

    /// An iterator over epoch `epoch` alone: [`epoch_len`](Self::epoch_len) samples.
    pub fn epoch(&self, epoch: u64) -> Samples<S> {
        Samples::new(
            self.inner.clone(),
            Position { epoch, index: 0 },
            Some(epoch),
        )
    }

    /// The rank-agnostic checkpoint of a run that started at the beginning of epoch
    /// `epoch` after this rank consumed (popped) `consumed_by_this_rank` of its samples
    /// since. Its [`consumed`](Checkpoint::consumed) is `W · consumed_by_this_rank`
    /// (capped at the epoch's used windows `M`; counts past this rank's share of the
    /// epoch go on into the next epochs), so every rank makes the same checkpoint when
    /// the ranks consumed the same count, as data-parallel training keeps them (with a
    /// batch size, or [`even_ranks`](crate::source::SamplerBuilder::even_ranks), the ranks' shares are
    /// equal; without, the ranks with the smaller share end their epoch one sample
    /// early, and [`Checkpoint::merge`] refuses the ranks' differing states there).
    /// A finished epoch is the next one's start: (`epoch + 1`, consumed 0).
    ///
    /// With a batch size it records the steps done (those of a run from epoch `epoch`'s
    /// start, which is step `epoch × epoch_batches`) and the sampler's skipped steps,
    /// counting the skipped steps' samples as walked; it knows no
    /// [`start_step`](crate::source::SamplerBuilder::start_step): for the run of
    /// [`iter`](Self::iter) with one, use `checkpoint_after(&sampler.checkpoint(0, 0), popped)`.
    ///
    /// For a run resumed from a checkpoint, use [`checkpoint_after`](Self::checkpoint_after).
    ///
    /// ```
    /// use pinring::source::{write_shard, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-ckpt-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 1001])?;
    /// // 100 windows of 11; 4 ranks with batches of 5: 5 batches each, 100 used.
    /// let sampler = TokenShards::open([dir.join("a.bin")])?
    ///     .windows(11).stride(10).shard(2, 4).batch_size(5).build()?;
    /// assert_eq!((sampler.epoch_len(), sampler.epoch_batches()), (25, Some(5)));
    /// let state = sampler.checkpoint(0, 2 * 5); // two batches popped on every rank
    /// assert_eq!((state.epoch, state.consumed), (0, 40));
    /// let state = sampler.checkpoint(0, 5 * 5); // the whole epoch
    /// assert_eq!((state.epoch, state.consumed), (1, 0));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn checkpoint(&self, epoch: u64, consumed_by_this_rank: u64) -> Checkpoint {
        let inner = &*self.inner;
        let step = inner
            .run
            .batch
            .map_or(0, |b| epoch.saturating_mul(inner.len.div_ceil(b)));
        let origin = Origin {
            epoch,
            base: 0,
            step,
        };
        let (epoch, consumed, step) = inner.after_popped(
            origin,
            inner.run.batch,
            step,
            &inner.run.skip,
            consumed_by_this_rank,
        );
        inner.checkpoint_at(epoch, consumed, step, &inner.run.skip)
    }

    /// The checkpoint of a run resumed from `from` (by
    /// [`iter_from_checkpoint`](Self::iter_from_checkpoint)) after this rank consumed
    /// `consumed_by_this_rank` of its samples since: in `from`'s epoch its share of the
    /// rest (see [`iter_from_checkpoint`](Self::iter_from_checkpoint)), then whole
    /// epochs. `from` is checked as `iter_from_checkpoint` checks it. With
    /// `from = self.checkpoint(e, 0)` it is [`checkpoint`](Self::checkpoint)`(e, n)` (when no
    /// start step is set). Steps: the run is the one `iter_from_checkpoint(from)` yields —
    /// begun at the [`start_step`](crate::source::SamplerBuilder::start_step) if `from` stands
    /// before it, leaving out `from`'s and this sampler's skipped steps — so the samples it
    /// jumped over count as walked, and the checkpoint records the step reached and the
    /// skipped ranges. Save between steps (whole batches popped): a run resumed from a
    /// checkpoint inside a step cuts its batches from there.
    ///
    /// ```
    /// use pinring::source::{write_shard, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-after-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 1001])?; // 100 windows of 11
    /// let shards = TokenShards::open([dir.join("a.bin")])?;
    /// let on = |rank, world, batch| shards.clone().windows(11).stride(10)
    ///     .shard(rank, world).batch_size(batch).build();
    /// let saved = on(0, 2, 5)?.checkpoint(0, 10); // 20 consumed by 2 ranks
    /// // Resumed on 4 ranks with batches of 4: 80 more positions, 20 per rank.
    /// let rank = on(3, 4, 4)?;
    /// assert_eq!(rank.samples_left(&saved)?, 20);
    /// assert_eq!(rank.checkpoint_after(&saved, 8)?.consumed, 20 + 4 * 8);
    /// let next = rank.checkpoint_after(&saved, 20 + 6)?; // the epoch, then 6 of epoch 1
    /// assert_eq!((next.epoch, next.consumed), (1, 4 * 6));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn checkpoint_after(
        &self,
        from: &Checkpoint,
        consumed_by_this_rank: u64,
    ) -> Result<Checkpoint> {
        let inner = &*self.inner;
        inner.check(from)?;
        let origin = Origin {
            epoch: from.epoch,
            base: from.consumed,
            step: from.step,
        };
        let skip = inner.run.skip.union(&from.skip);
        let first = inner.run.start_step.max(from.step);
        let (epoch, consumed, step) =
            inner.after_popped(origin, inner.run.batch, first, &skip, consumed_by_this_rank);
        Ok(inner.checkpoint_at(epoch, consumed, step, &skip))
    }

    /// The checkpoint of the run from `from` (a fresh run from step 0 when `None`) once
    /// every batch before step `step` was consumed: the next batch is the first step at or
    /// after `step` that the run keeps (past its start step and its skipped ranges, this
    /// sampler's and `from`'s). Arithmetic on the steps, nothing walked: the same
    /// checkpoint [`checkpoint_after`](Self::checkpoint_after) gives for the samples of
    /// those batches. Without a batch size there are no steps: the run's origin.
    ///
    /// ```
    /// use pinring::source::{write_shard, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-at-step-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 1001])?; // 100 windows of 11
    /// let sampler = TokenShards::open([dir.join("a.bin")])?.windows(11).stride(10)
    ///     .shard(0, 2).batch_size(5).skip_steps([(3, 5)]).build()?;
    /// let at = sampler.checkpoint_at_step(None, 3)?; // steps 3 and 4 skipped
    /// assert_eq!((at.step, at.consumed), (5, 50));
    /// assert_eq!(at, sampler.checkpoint_after(&sampler.checkpoint(0, 0), 15)?);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn checkpoint_at_step(&self, from: Option<&Checkpoint>, step: u64) -> Result<Checkpoint> {
        let inner = &*self.inner;
        let (origin, skip) = match from {
            Some(c) => {
                inner.check(c)?;
                let origin = Origin {
                    epoch: c.epoch,
                    base: c.consumed,
                    step: c.step,
                };
                (origin, inner.run.skip.union(&c.skip))
            }
            None => (Origin::default(), inner.run.skip.clone()),
        };
        let Some(b) = inner.run.batch else {
            return Ok(inner.checkpoint_at(origin.epoch, origin.base, origin.step, &skip));
        };
        let first = inner.run.start_step.max(origin.step);
        let next = skip.next_kept(step.max(first));
        let walked = inner.samples_to_step(origin, b, next);
        let (epoch, consumed) = inner.advance(
            origin.epoch,
            origin.base,
            u64::try_from(walked).unwrap_or(u64::MAX),
        );
        Ok(inner.checkpoint_at(epoch, consumed, next, &skip))
    }

    /// Checks that this sampler can resume from `checkpoint`: the same checkpoint
    /// version, dataset ([`Fingerprint`]: format, file names, sizes and content
    /// fingerprints — the same files, in any folder), window, stride, order and seed, or
    /// [`SourceError::CheckpointMismatch`] naming the first
    /// difference; `consumed` at most the epoch's windows, or
    /// [`SourceError::CheckpointPastEpoch`]. Rank, world size and batch size may differ.
    ///
    /// ```
    /// use pinring::source::{write_shard, SourceError, TokenShards};
    /// use pinring::Error;
    /// # let dir = std::env::temp_dir().join(format!("pinring-check-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 5000])?;
    /// let shards = TokenShards::open([dir.join("a.bin")])?;
    /// let state = shards.clone().windows(65).shard(0, 2).batch_size(4).build()?.checkpoint(0, 8);
    /// // Another world size and batch size: fine. Another sequence length: refused.
    /// shards.clone().windows(65).shard(1, 3).batch_size(2).build()?.check_checkpoint(&state)?;
    /// let err = shards.windows(129).build()?.check_checkpoint(&state).unwrap_err();
    /// assert!(matches!(err, Error::Source(SourceError::CheckpointMismatch { .. })));
    /// assert!(err.to_string().contains("is 65 in the checkpoint but 129 here"), "{err}");
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn check_checkpoint(&self, checkpoint: &Checkpoint) -> Result<()> {
        Ok(self.inner.check(checkpoint)?)
    }

    /// An endless iterator that resumes from `checkpoint`, on this sampler's rank, world
    /// size `W'` and batch size `B'` (which may differ from the saved run's), after
    /// checking it as [`check_checkpoint`](Self::check_checkpoint) does.
    ///
    /// In the checkpoint's epoch, the rest of its order, positions `c..N` (`c` its
    /// `consumed`), is split as a fresh epoch is: the ranks use `c..M'` with
    /// `M' = c + ⌊(N - c) / (W'·B')⌋ · W'·B'` with [`drop_last`](crate::source::SamplerBuilder::drop_last)
    /// (`c + ⌊(N - c) / W'⌋ · W'` without it, or with
    /// [`even_ranks`](crate::source::SamplerBuilder::even_ranks) and no batch size; `N` with neither),
    /// and rank `r'` takes positions `c + r', c + r' + W', …` below `M'`. So across the
    /// saved run's consumed part and the new run every position up to `M'` is delivered
    /// exactly once (fewer than `W'·B'` dropped, from the tail), and every later epoch is
    /// the one an uninterrupted run at the new world size has. The resumed epoch may give
    /// this rank nothing; the iterator then starts with the next epoch.
    ///
    /// ```
    /// use pinring::source::{write_shard, Order, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-resume-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 1001])?; // 100 windows of 11
    /// let shards = TokenShards::open([dir.join("a.bin")])?;
    /// let on = |rank, world| shards.clone().windows(11).stride(10)
    ///     .order(Order::Shuffled { seed: 8 }).shard(rank, world).batch_size(2).build();
    /// let saved = on(0, 1)?.checkpoint(0, 10); // one rank consumed 10
    /// // Rank 1 of 3 takes positions 11, 14, 17, ... of epoch 0's order, below 10 + 90.
    /// let order: Vec<u64> = on(0, 1)?.epoch(0).map(|w| w.id()).collect();
    /// let rank1: Vec<u64> = on(1, 3)?.iter_from_checkpoint(&saved)?.take(30).map(|w| w.id()).collect();
    /// let want: Vec<u64> = (0..30).map(|i| order[11 + 3 * i]).collect();
    /// assert_eq!(rank1, want);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn iter_from_checkpoint(&self, checkpoint: &Checkpoint) -> Result<Samples<S>> {
        self.inner.check(checkpoint)?;
        Ok(Samples::resumed(
            self.inner.clone(),
            checkpoint.epoch,
            checkpoint.consumed,
            checkpoint.step,
            &checkpoint.skip,
        )
        .start_at_step(self.inner.run.start_step))
    }

    /// Samples this rank has left in `checkpoint`'s epoch when it resumes from it (its
    /// share of positions `consumed..M'`, see
    /// [`iter_from_checkpoint`](Self::iter_from_checkpoint)); later epochs each hold
    /// [`epoch_len`](Self::epoch_len). The checkpoint is checked first.
    pub fn samples_left(&self, checkpoint: &Checkpoint) -> Result<u64> {
        self.inner.check(checkpoint)?;
        Ok(self.inner.share(checkpoint.consumed).1)
    }

    /// Batches this rank has left in `checkpoint`'s epoch when it resumes from it, the
    /// same on every rank: [`samples_left`](Self::samples_left) over the batch size,
    /// rounded up (a whole number with `drop_last`). `None` without a batch size.
    ///
    /// ```
    /// use pinring::source::{write_shard, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-left-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 1001])?; // 100 windows of 11
    /// let shards = TokenShards::open([dir.join("a.bin")])?;
    /// let on = |rank, world, drop_last| shards.clone().windows(11).stride(10)
    ///     .shard(rank, world).batch_size(4).drop_last(drop_last).build();
    /// let saved = on(0, 2, true)?.checkpoint(0, 12); // 24 consumed, 76 left
    /// // Three ranks: 72 used with full batches (6 each), 75 without (25 each: 7 batches).
    /// assert_eq!((on(2, 3, true)?.samples_left(&saved)?, on(2, 3, true)?.batches_left(&saved)?), (24, Some(6)));
    /// assert_eq!((on(2, 3, false)?.samples_left(&saved)?, on(2, 3, false)?.batches_left(&saved)?), (25, Some(7)));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn batches_left(&self, checkpoint: &Checkpoint) -> Result<Option<u64>> {
        let left = self.samples_left(checkpoint)?;
        Ok(self.inner.run.batch.map(|b| left.div_ceil(b)))
    }
}

impl<S: Segmented> IntoIterator for &Sampler<S> {
    type Item = S::Window;
    type IntoIter = Samples<S>;

    fn into_iter(self) -> Samples<S> {
        self.iter()
    }
}

impl<S: Segmented> IntoIterator for Sampler<S> {
    type Item = S::Window;
    type IntoIter = Samples<S>;

    fn into_iter(self) -> Samples<S> {
        self.iter()
    }
}

impl<S> Samples<S> {
    /// The sampler this iterator walks.
    pub fn sampler(&self) -> Sampler<S> {
        Sampler {
            inner: self.inner.clone(),
        }
    }
}
