//! [`SamplerBuilder`]: a [`Sampler`]'s settings, checked against its source by
//! [`build`](SamplerBuilder::build); [`Sampler::builder`] and [`Sampler::to_builder`],
//! which make one.

use std::fmt;
use std::sync::Arc;

use super::order::Order;
use super::sampler::Sampler;
use super::sampler_inner::Inner;
use super::segmented::Segmented;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::setters::setters;
use crate::source::run::{nonzero, Run};

/// Builds a [`Sampler`]; see [`Sampler::builder`] (a fresh one) and
/// [`Sampler::to_builder`] (one with a sampler's settings).
#[must_use]
pub struct SamplerBuilder<S> {
    source: S,
    window: u64,
    stride: Option<u64>,
    order: Order,
    even_ranks: bool,
    /// The rank and world size, batch size, `drop_last`, start step and skipped steps.
    run: Run,
}

impl<S> fmt::Debug for SamplerBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SamplerBuilder")
            .field("window", &self.window)
            .field("stride", &self.stride)
            .field("order", &self.order)
            .field("even_ranks", &self.even_ranks)
            .field("run", &self.run)
            .finish_non_exhaustive()
    }
}

impl<S: Segmented> Sampler<S> {
    /// A builder over `source`: windows of 1 unit, stride = window, sequential, rank 0
    /// of 1, no batch size.
    pub fn builder(source: S) -> SamplerBuilder<S> {
        SamplerBuilder {
            source,
            window: 1,
            stride: None,
            order: Order::Sequential,
            even_ranks: false,
            run: Run::default(),
        }
    }

    /// A builder with every setting of this sampler (its source, window, stride, order,
    /// rank and world size, `even_ranks`, batch size, `drop_last`, start step and skipped
    /// steps): change what differs
    /// and [`build`](SamplerBuilder::build) again. Its `build` gives a sampler equal to this
    /// one.
    ///
    /// ```
    /// use pinring::source::{write_shard, Order, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-tobuilder-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 1001])?;
    /// let sampler = TokenShards::open([dir.join("a.bin")])?
    ///     .windows(11).order(Order::Shuffled { seed: 5 }).shard(1, 3).even_ranks(true).build()?;
    /// // The same sampler, cut into batches of 4 on every rank.
    /// let batched = sampler.to_builder().batch_size(4).build()?;
    /// assert_eq!((batched.window(), batched.order(), batched.rank(), batched.even_ranks()),
    ///            (11, Order::Shuffled { seed: 5 }, 1, true));
    /// assert_eq!((batched.batch_size(), batched.epoch_batches()), (Some(4), Some(8)));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn to_builder(&self) -> SamplerBuilder<S>
    where
        S: Clone,
    {
        let i = &*self.inner;
        SamplerBuilder {
            source: i.source.clone(),
            window: i.window,
            stride: Some(i.stride),
            order: i.order,
            even_ranks: i.even_ranks,
            run: Run {
                drop_last: i.drop_last,
                ..i.run.run()
            },
        }
    }
}

impl<S: Segmented> SamplerBuilder<S> {
    setters! {
        /// Units per window (default 1). For next-token training on token shards this is
        /// `T + 1`.
        window(units: u64) => window = units;
        /// Units from one grid window's start to the next (default: the window, so windows
        /// do not overlap). Token windows of `T + 1` use a stride of `T`, so that each token
        /// is a target exactly once, as llm.c does.
        stride(units: u64) => stride = Some(units);
        /// The order of each epoch (default [`Order::Sequential`]).
        order(order: Order) => order = order;
        /// Shards each epoch over `world_size` ranks (default: rank 0 of 1): rank `r` takes
        /// the positions `r, r + world_size, r + 2·world_size, …` of the epoch's order, so
        /// ranks see disjoint samples and together the whole epoch. Ranks' epoch lengths
        /// differ by at most one unless [`batch_size`](Self::batch_size) or
        /// [`even_ranks`](Self::even_ranks) is set, which make them equal.
        shard(rank: u64, world_size: u64) => run.rank = rank, run.world_size = world_size;
        /// Drops the last `windows % world_size` positions of each epoch's order so that
        /// every rank has the same epoch length, as data-parallel training needs to stay in
        /// step (default off). With [`Order::Shuffled`] the dropped windows change from epoch
        /// to epoch.
        ///
        /// [`batch_size`](Self::batch_size) with [`drop_last(false)`](Self::drop_last) does
        /// the same; with a batch size set, this setting changes nothing.
        even_ranks(on: bool) => even_ranks = on;
        /// The batch size each rank's pipeline cuts its samples into (its
        /// `batch_size`), so that every rank gets the same number of batches per
        /// epoch (a rank with one batch fewer hangs data-parallel training's all-reduce).
        /// Default: none, and the ranks' shares may differ by one sample.
        ///
        /// With `B` set and `W` ranks, each epoch uses the first `M` positions of its order
        /// of `N` windows and drops the rest (its tail):
        /// - [`drop_last(true)`](Self::drop_last) (the default): `M = ⌊N / (W·B)⌋ · W·B`.
        ///   Every rank gets `M / W` samples, a whole number of full batches; fewer than
        ///   `W·B` windows are dropped.
        /// - `drop_last(false)`: `M = ⌊N / W⌋ · W`. Every rank gets `M / W` samples, and its
        ///   last batch may be short (the same size on every rank); fewer than `W` windows
        ///   are dropped.
        ///
        /// Which windows the tail holds changes from epoch to epoch with
        /// [`Order::Shuffled`] and [`Order::Random`]; with [`Order::Sequential`] it is always
        /// the grid's last windows.
        ///
        /// ```
        /// use pinring::source::{write_shard, Order, TokenShards};
        /// # let dir = std::env::temp_dir().join(format!("pinring-batch-doc-{}", std::process::id()));
        /// # std::fs::create_dir_all(&dir).unwrap();
        /// write_shard(dir.join("a.bin"), &[0; 1001])?;
        /// let shards = TokenShards::open([dir.join("a.bin")])?; // 100 windows of 11
        /// let rank = |r, drop_last| {
        ///     shards.clone().windows(11).order(Order::Shuffled { seed: 1 })
        ///         .shard(r, 3).batch_size(8).drop_last(drop_last).build()
        /// };
        /// // drop_last: 4 full batches on each of 3 ranks, 96 windows used, 4 dropped.
        /// let s = rank(2, true)?;
        /// assert_eq!((s.epoch_windows(), s.epoch_len(), s.epoch_batches()), (96, 32, Some(4)));
        /// // Without: 33 samples each, 5 batches (the last of 1), 99 used, 1 dropped.
        /// let s = rank(2, false)?;
        /// assert_eq!((s.epoch_windows(), s.epoch_len(), s.epoch_batches()), (99, 33, Some(5)));
        /// assert_eq!((s.batch_size(), s.drop_last()), (Some(8), false));
        /// # std::fs::remove_dir_all(&dir).unwrap();
        /// # Ok::<(), pinring::Error>(())
        /// ```
        batch_size(samples: u64) => run.batch_size = Some(samples);
        /// With a [`batch_size`](Self::batch_size): whether each epoch drops what does not
        /// fill a whole batch on every rank (default `true`), or only what does not give
        /// every rank the same number of samples. The default keeps every batch full, so
        /// that the endless iterator, cut into batches by count, never mixes two epochs in
        /// one batch; with `false` each rank's last batch of an epoch may be short, which
        /// needs one pipeline per epoch ([`Sampler::epoch`]) to stay aligned. (Examples at
        /// [`batch_size`](Self::batch_size).)
        drop_last(on: bool) => run.drop_last = on;
        /// Begins the run at step `k` (default 0): [`Sampler::iter`] starts exactly where an
        /// uninterrupted run from epoch 0 stands at step `k` (the `k`-th batch of this rank,
        /// counted across epochs), and yields the same windows from there on, with the same
        /// step numbers ([`Window::step`](crate::source::Window::step), which
        /// [`Batch::step`](crate::Batch::step) reports). Finding the place is arithmetic on
        /// the epoch lengths: nothing before it is read, decoded or even enumerated. A run
        /// resumed from a [`Checkpoint`](crate::source::Checkpoint)
        /// ([`Sampler::iter_from_checkpoint`]) begins at step `k` too if the checkpoint stands
        /// before it, else at the checkpoint. Needs a [`batch_size`](Self::batch_size) (steps
        /// are batches): without one, `build` fails with [`SourceError::StepsNeedBatchSize`].
        ///
        /// A checkpoint of such a run is `checkpoint_after(&sampler.checkpoint(0, 0), popped)`
        /// ([`Sampler::checkpoint_after`]), which counts the steps `iter` left out;
        /// [`Sampler::checkpoint`] describes a run from an epoch's start.
        ///
        /// ```
        /// use pinring::source::{write_shard, Order, TokenShards};
        /// # let dir = std::env::temp_dir().join(format!("pinring-start-doc-{}", std::process::id()));
        /// # std::fs::create_dir_all(&dir).unwrap();
        /// write_shard(dir.join("a.bin"), &[0; 1001])?; // 100 windows of 11
        /// let shards = TokenShards::open([dir.join("a.bin")])?;
        /// let sampler = |start| shards.clone().windows(11).order(Order::Shuffled { seed: 2 })
        ///     .shard(1, 2).batch_size(4).start_step(start).build();
        /// // 12 steps an epoch on each rank; step 30 is epoch 2's seventh batch.
        /// let whole: Vec<_> = sampler(0)?.iter().take(40 * 4).map(|w| (w.id(), w.step())).collect();
        /// let from_30: Vec<_> = sampler(30)?.iter().take(10 * 4).map(|w| (w.id(), w.step())).collect();
        /// assert_eq!(from_30, whole[30 * 4..]);
        /// assert_eq!(from_30[0].1, Some(30));
        /// # std::fs::remove_dir_all(&dir).unwrap();
        /// # Ok::<(), pinring::Error>(())
        /// ```
        start_step(k: u64) => run.start_step = k;
    }

    /// Leaves the batches of these steps out of the run (default: none): each `(a, b)` is
    /// the half-open range `a..b` (steps `a` to `b - 1`, as Rust's `a..b` and Python's
    /// `range(a, b)` are).
    /// The iterators skip them by arithmetic (nothing in them is read); every other
    /// batch keeps its step number; a checkpoint records the skipped ranges, so a run
    /// resumed from it keeps skipping them (with any its own builder adds). The
    /// "roll back and skip the bad data" recovery after a loss spike: resume from the
    /// last good checkpoint with the steps of the spike skipped. Needs a
    /// [`batch_size`](Self::batch_size); a range that ends before it starts is
    /// [`SourceError::BadSkip`].
    ///
    /// ```
    /// use pinring::source::{write_shard, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-skip-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 1001])?; // 100 windows of 11
    /// let sampler = TokenShards::open([dir.join("a.bin")])?.windows(11).batch_size(10)
    ///     .skip_steps([(2, 4), (11, 12)]).build()?;
    /// let steps: Vec<u64> = sampler.iter().step_by(10).take(8).map(|w| w.step().unwrap()).collect();
    /// assert_eq!(steps, [0, 1, 4, 5, 6, 7, 8, 9]);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn skip_steps(mut self, ranges: impl IntoIterator<Item = (u64, u64)>) -> Self {
        self.run.skip_too(ranges);
        self
    }

    /// The builder with its source changed by `f`.
    pub(crate) fn map_source(mut self, f: impl FnOnce(S) -> S) -> Self {
        self.source = f(self.source);
        self
    }

    /// Replaces the run (rank, world size, batch size, `drop_last`, start step, skipped
    /// steps) with a loader's, whole.
    pub(crate) fn run(mut self, run: Run) -> Self {
        self.run = run;
        self
    }

    /// Checks the settings against the source and returns the sampler: a zero window,
    /// stride, world size or batch size is [`SourceError::Zero`], a rank not below the
    /// world size [`SourceError::BadRank`], a window longer than every file
    /// [`SourceError::NoWindows`], and an epoch that would give this rank nothing
    /// [`SourceError::EmptyShare`] (fewer windows than ranks) or, with a batch size,
    /// [`SourceError::TooFewForBatches`]; `start_step` or `skip_steps` without a batch size
    /// [`SourceError::StepsNeedBatchSize`], a reversed skipped range
    /// [`SourceError::BadSkip`].
    pub fn build(self) -> Result<Sampler<S>> {
        let window = nonzero(self.window, "window")?;
        let stride = nonzero(self.stride.unwrap_or(window), "stride")?;
        let run = self.run.check()?;
        let segments = self.source.segments();
        let mut cum_windows = Vec::with_capacity(segments + 1);
        let mut cum_starts = Vec::with_capacity(segments + 1);
        let (mut windows, mut starts) = (0u64, 0u64);
        // The longest segment, as (units, segment): the one a "no window fits" names.
        let mut longest = (0u64, 0usize);
        cum_windows.push(0);
        cum_starts.push(0);
        for s in 0..segments {
            let units = self.source.units(s);
            if units > longest.0 {
                longest = (units, s);
            }
            if units >= window {
                windows = windows.saturating_add((units - window) / stride + 1);
                starts = starts.saturating_add(units - window + 1);
            }
            cum_windows.push(windows);
            cum_starts.push(starts);
        }
        if windows == 0 {
            return Err(SourceError::NoWindows {
                window,
                longest: longest.0,
                unit: self.source.unit_name(),
                path: self.source.segment_path(longest.1).map(|p| p.to_owned()),
            }
            .into());
        }
        let (rank, world, batch) = (run.rank, run.world, run.batch);
        let drop_last = self.run.drop_last;
        let grain = match batch {
            Some(b) if drop_last => world.saturating_mul(b),
            Some(_) => world,
            None if self.even_ranks => world,
            None => 1,
        };
        let fingerprint = self.source.fingerprint();
        let mut inner = Inner {
            source: self.source,
            window,
            stride,
            order: self.order,
            run,
            drop_last,
            even_ranks: self.even_ranks,
            grain,
            cum_windows,
            cum_starts,
            windows,
            epoch_windows: 0,
            len: 0,
            fingerprint,
        };
        let (epoch_windows, len) = inner.share(0);
        if len == 0 {
            return Err(match batch {
                Some(batch_size) => SourceError::TooFewForBatches {
                    windows,
                    world_size: world,
                    batch_size,
                    drop_last,
                },
                None => SourceError::EmptyShare {
                    rank,
                    world_size: world,
                    windows,
                    even_ranks: self.even_ranks,
                },
            }
            .into());
        }
        inner.epoch_windows = epoch_windows;
        inner.len = len;
        Ok(Sampler {
            inner: Arc::new(inner),
        })
    }
}
