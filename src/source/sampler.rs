//! Sampling: which windows of a source an epoch visits, in which order, on which rank;
//! equal shares per rank; checkpoints that resume on another world size.

use std::fmt;
use std::sync::Arc;

use super::checkpoint::{Checkpoint, Fingerprint, CHECKPOINT_VERSION};
use super::error::SourceError;
use super::rng::{epoch_key, mix64, SplitMix64};
use crate::error::Result;

/// A source the [`Sampler`] can cut into windows: a list of segments (files), each a run
/// of units (tokens, records). Windows never cross a segment's end.
///
/// [`TokenShards`](super::TokenShards) and [`FixedRecords`](super::FixedRecords) implement
/// it; implement it for your own format to get the same sampling, sharding, ids and
/// resume:
///
/// ```
/// use pinring::source::{Fingerprint, Identified, Order, Sampler, Segmented, WindowSpec};
///
/// /// Lines of a text, as (line, first character, characters, id, epoch).
/// struct Lines(Vec<String>);
///
/// #[derive(Debug, PartialEq)]
/// struct Chars { line: usize, start: u64, len: u64, id: u64, epoch: u64 }
///
/// impl Identified for Chars {
///     fn id(&self) -> u64 { self.id }
///     fn epoch(&self) -> u64 { self.epoch }
/// }
///
/// impl Segmented for Lines {
///     type Window = Chars;
///     fn segments(&self) -> usize { self.0.len() }
///     fn units(&self, segment: usize) -> u64 { self.0[segment].len() as u64 }
///     fn window(&self, spec: WindowSpec) -> Chars {
///         let WindowSpec { segment, start, len, id, epoch } = spec;
///         Chars { line: segment, start, len, id, epoch }
///     }
///     fn fingerprint(&self) -> Fingerprint {
///         let mut print = Fingerprint::new("lines", 0);
///         for (i, line) in self.0.iter().enumerate() {
///             print.files.push(format!("line {i}"));
///             print.sizes.push(line.len() as u64);
///         }
///         print
///     }
/// }
///
/// let text = Lines(vec!["abcdef".into(), "gh".into(), "ijkl".into()]);
/// let sampler = Sampler::builder(text).window(2).order(Order::Shuffled { seed: 1 }).build()?;
/// let mut ids: Vec<u64> = sampler.epoch(0).map(|w| w.id()).collect();
/// ids.sort();
/// assert_eq!(ids, [0, 1, 2, 3, 4, 5]); // 3 + 1 + 2 windows of 2 characters
/// assert_eq!(sampler.by_id(3), Some(Chars { line: 1, start: 0, len: 2, id: 3, epoch: 0 }));
/// assert_eq!(sampler.checkpoint(0, 0).dataset.format, "lines");
/// # Ok::<(), pinring::Error>(())
/// ```
pub trait Segmented: Send + Sync + 'static {
    /// The cheap descriptor of one window that the sampler yields (and a
    /// [`Decode`](crate::Decode) impl turns into bytes).
    type Window: Send + 'static;

    /// How many segments there are.
    fn segments(&self) -> usize;

    /// Units in segment `segment` (`segment < self.segments()`).
    fn units(&self, segment: usize) -> u64;

    /// The descriptor of the window `spec` places: `spec.len` units from `spec.start` of
    /// segment `spec.segment`, carrying its stable id and the epoch it was drawn for
    /// (which [`TokenWindow::id`](super::TokenWindow::id) and
    /// [`epoch`](super::TokenWindow::epoch) give back). The sampler only asks for windows
    /// that lie inside the segment: `spec.start + spec.len <= units(spec.segment)`.
    fn window(&self, spec: WindowSpec) -> Self::Window;

    /// What identifies the dataset in a [`Checkpoint`]: format, file names and sizes.
    /// The default names segment `i` `"segment i"`, with its units as its size, and the
    /// format `"custom"`: override it so that a checkpoint of another dataset of the
    /// same lengths is refused.
    fn fingerprint(&self) -> Fingerprint {
        let mut print = Fingerprint::new("custom", 0);
        for s in 0..self.segments() {
            print.files.push(format!("segment {s}"));
            print.sizes.push(self.units(s));
        }
        print
    }
}

/// One window the [`Sampler`] asks a [`Segmented`] source for: where it lies, its stable
/// id, and the epoch it is drawn for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WindowSpec {
    /// The segment (file) it lies in.
    pub segment: usize,
    /// Its first unit in the segment.
    pub start: u64,
    /// Units in it.
    pub len: u64,
    /// Its stable id: its index in the dataset's fixed enumeration, the same whatever
    /// the order's seed, the epoch, the rank and the world size. For the grid orders
    /// ([`Order::Sequential`], [`Order::Shuffled`]) the grid index `g`: window `g` of the
    /// concatenated segments' grids, in segment order. For [`Order::Random`] the index
    /// of its start among all possible starts of all segments, in segment order (so ids
    /// then number starts, not grid windows). See [`Sampler::by_id`].
    pub id: u64,
    /// The epoch it was drawn for (0 for [`Sampler::by_id`]).
    pub epoch: u64,
}

/// A sample that knows its stable id and the epoch it was drawn for: the windows a
/// [`Sampler`] yields ([`TokenWindow`](super::TokenWindow),
/// [`RecordWindow`](super::RecordWindow)), so that code generic over a decoder's
/// [`Sample`](crate::Decode::Sample) can record which samples a batch holds.
pub trait Identified {
    /// The stable id ([`WindowSpec::id`]).
    fn id(&self) -> u64;
    /// The epoch it was drawn for.
    fn epoch(&self) -> u64;
}

/// The order in which an epoch visits windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// The window grid in file order: window `i` of a segment starts at unit
    /// `i × stride`. Every epoch is the same.
    #[default]
    Sequential,
    /// The same window grid, in a fresh order each epoch: a Fisher–Yates shuffle
    /// (Durstenfeld's: for `i` from `n-1` down to 1, swap `i` with
    /// [`below`](SplitMix64::below)`(i+1)`) of the `n` grid windows, drawn from
    /// `SplitMix64::new(epoch_key(seed, epoch))`. The whole epoch's permutation is held
    /// (4 bytes a window while the grid has fewer than 2^32 windows, 8 above).
    Shuffled {
        /// The run's seed.
        seed: u64,
    },
    /// Windows at uniformly random offsets, drawn with replacement and not on the grid:
    /// draw `j` of epoch `e` starts at unit `SplitMix64::new(mix64(epoch_key(seed, e) ^
    /// j)).below(starts)` of the concatenated list of every possible start. An epoch has
    /// as many draws as the grid has windows. Needs no memory, and any draw is found in
    /// O(log segments).
    Random {
        /// The run's seed.
        seed: u64,
    },
}

impl Order {
    /// The order's name, as a [`Checkpoint`] records it: `"sequential"`, `"shuffled"` or
    /// `"random"`.
    ///
    /// ```
    /// use pinring::source::Order;
    /// assert_eq!(Order::Random { seed: 5 }.name(), "random");
    /// assert_eq!(Order::Sequential.name(), "sequential");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Order::Sequential => "sequential",
            Order::Shuffled { .. } => "shuffled",
            Order::Random { .. } => "random",
        }
    }

    /// The seed, or 0 for [`Order::Sequential`] (which has none).
    ///
    /// ```
    /// use pinring::source::Order;
    /// assert_eq!((Order::Shuffled { seed: 5 }.seed(), Order::Sequential.seed()), (5, 0));
    /// ```
    pub const fn seed(self) -> u64 {
        match self {
            Order::Sequential => 0,
            Order::Shuffled { seed } | Order::Random { seed } => seed,
        }
    }

    /// The order of this [`name`](Self::name) and seed (ignored for `"sequential"`);
    /// `None` for an unknown name.
    ///
    /// ```
    /// use pinring::source::Order;
    /// let order = Order::Shuffled { seed: 1337 };
    /// assert_eq!(Order::from_name(order.name(), order.seed()), Some(order));
    /// assert_eq!(Order::from_name("sorted", 0), None);
    /// ```
    pub fn from_name(name: &str, seed: u64) -> Option<Self> {
        match name {
            "sequential" => Some(Order::Sequential),
            "shuffled" => Some(Order::Shuffled { seed }),
            "random" => Some(Order::Random { seed }),
            _ => None,
        }
    }
}

/// Where a sampler's iterator stands: the epoch, and how many of this rank's samples of
/// that epoch were already yielded. Positions order by epoch, then index.
///
/// Positions count this rank's own samples, so they do not carry over to another world
/// size; a [`Checkpoint`] does. In the epoch an iterator resumed from a checkpoint,
/// [`Samples::position`]'s index counts from the resume point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Position {
    /// The epoch, from 0.
    pub epoch: u64,
    /// This rank's next sample within the epoch, from 0.
    pub index: u64,
}

/// Builds a [`Sampler`]; see [`Sampler::builder`].
#[must_use]
pub struct SamplerBuilder<S> {
    source: S,
    window: u64,
    stride: Option<u64>,
    order: Order,
    rank: u64,
    world_size: u64,
    even_ranks: bool,
    batch_size: Option<u64>,
    drop_last: bool,
}

impl<S> fmt::Debug for SamplerBuilder<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SamplerBuilder")
            .field("window", &self.window)
            .field("stride", &self.stride)
            .field("order", &self.order)
            .field("rank", &self.rank)
            .field("world_size", &self.world_size)
            .field("even_ranks", &self.even_ranks)
            .field("batch_size", &self.batch_size)
            .field("drop_last", &self.drop_last)
            .finish_non_exhaustive()
    }
}

impl<S: Segmented> SamplerBuilder<S> {
    /// Units per window (default 1). For next-token training on token shards this is
    /// `T + 1`.
    pub fn window(mut self, units: u64) -> Self {
        self.window = units;
        self
    }

    /// Units from one grid window's start to the next (default: the window, so windows
    /// do not overlap). Token windows of `T + 1` use a stride of `T`, so that each token
    /// is a target exactly once, as llm.c does.
    pub fn stride(mut self, units: u64) -> Self {
        self.stride = Some(units);
        self
    }

    /// The order of each epoch (default [`Order::Sequential`]).
    pub fn order(mut self, order: Order) -> Self {
        self.order = order;
        self
    }

    /// Shards each epoch over `world_size` ranks (default: rank 0 of 1): rank `r` takes
    /// the positions `r, r + world_size, r + 2·world_size, …` of the epoch's order, so
    /// ranks see disjoint samples and together the whole epoch. Ranks' epoch lengths
    /// differ by at most one unless [`batch_size`](Self::batch_size) or
    /// [`even_ranks`](Self::even_ranks) is set, which make them equal.
    pub fn shard(mut self, rank: u64, world_size: u64) -> Self {
        self.rank = rank;
        self.world_size = world_size;
        self
    }

    /// Drops the last `windows % world_size` positions of each epoch's order so that
    /// every rank has the same epoch length, as data-parallel training needs to stay in
    /// step (default off). With [`Order::Shuffled`] the dropped windows change from epoch
    /// to epoch.
    ///
    /// [`batch_size`](Self::batch_size) with [`drop_last(false)`](Self::drop_last) does
    /// the same; with a batch size set, this setting changes nothing.
    pub fn even_ranks(mut self, on: bool) -> Self {
        self.even_ranks = on;
        self
    }

    /// The batch size each rank's pipeline cuts its samples into (its
    /// `samples_per_batch`), so that every rank gets the same number of batches per
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
    pub fn batch_size(mut self, samples: u64) -> Self {
        self.batch_size = Some(samples);
        self
    }

    /// With a [`batch_size`](Self::batch_size): whether each epoch drops what does not
    /// fill a whole batch on every rank (default `true`), or only what does not give
    /// every rank the same number of samples. The default keeps every batch full, so
    /// that the endless iterator, cut into batches by count, never mixes two epochs in
    /// one batch; with `false` each rank's last batch of an epoch may be short, which
    /// needs one pipeline per epoch ([`Sampler::epoch`]) to stay aligned. (Examples at
    /// [`batch_size`](Self::batch_size).)
    pub fn drop_last(mut self, on: bool) -> Self {
        self.drop_last = on;
        self
    }

    /// Checks the settings against the source and returns the sampler: a zero window,
    /// stride, world size or batch size is [`SourceError::Zero`], a rank not below the
    /// world size [`SourceError::BadRank`], a window longer than every file
    /// [`SourceError::NoWindows`], and an epoch that would give this rank nothing
    /// [`SourceError::EmptyShare`] (fewer windows than ranks) or, with a batch size,
    /// [`SourceError::TooFewForBatches`].
    pub fn build(self) -> Result<Sampler<S>> {
        let window = nonzero(self.window, "window")?;
        let stride = nonzero(self.stride.unwrap_or(window), "stride")?;
        let world = nonzero(self.world_size, "world_size")?;
        let batch = self
            .batch_size
            .map(|b| nonzero(b, "batch_size"))
            .transpose()?;
        if self.rank >= world {
            return Err(SourceError::BadRank {
                rank: self.rank,
                world_size: world,
            }
            .into());
        }
        let segments = self.source.segments();
        let mut cum_windows = Vec::with_capacity(segments + 1);
        let mut cum_starts = Vec::with_capacity(segments + 1);
        let (mut windows, mut starts, mut longest) = (0u64, 0u64, 0u64);
        cum_windows.push(0);
        cum_starts.push(0);
        for s in 0..segments {
            let units = self.source.units(s);
            longest = longest.max(units);
            if units >= window {
                windows = windows.saturating_add((units - window) / stride + 1);
                starts = starts.saturating_add(units - window + 1);
            }
            cum_windows.push(windows);
            cum_starts.push(starts);
        }
        if windows == 0 {
            return Err(SourceError::NoWindows { window, longest }.into());
        }
        let grain = match batch {
            Some(b) if self.drop_last => world.saturating_mul(b),
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
            rank: self.rank,
            world,
            batch,
            drop_last: self.drop_last,
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
                    drop_last: self.drop_last,
                },
                None => SourceError::EmptyShare {
                    rank: self.rank,
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

fn nonzero(n: u64, what: &'static str) -> Result<u64, SourceError> {
    if n == 0 {
        Err(SourceError::Zero(what))
    } else {
        Ok(n)
    }
}

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
/// ([`epoch_windows`](Self::epoch_windows); see [`SamplerBuilder::batch_size`] for `M`)
/// and drops the tail. Rank `r` of `W` takes positions `r, r + W, r + 2W, …` below `M`
/// (interleaved by sample), so that once every rank has consumed `k` samples, the
/// consumed windows are exactly positions `0..W·k` of the epoch's order. That global
/// count is what a [`Checkpoint`] holds.
///
/// # Ids
///
/// Every window a sampler yields carries its stable id and its epoch
/// ([`TokenWindow::id`](super::TokenWindow::id),
/// [`TokenWindow::epoch`](super::TokenWindow::epoch)): see [`WindowSpec::id`].
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
    inner: Arc<Inner<S>>,
}

struct Inner<S> {
    source: S,
    window: u64,
    stride: u64,
    order: Order,
    rank: u64,
    world: u64,
    /// The batch size, if set.
    batch: Option<u64>,
    drop_last: bool,
    /// Each epoch (or the rest of a resumed one) uses a multiple of this many positions:
    /// `world·batch` (batch size, drop_last), `world` (batch size, or even_ranks) or 1.
    grain: u64,
    /// `cum_windows[s]`: grid windows in segments before `s`; one entry more than segments.
    cum_windows: Vec<u64>,
    /// `cum_starts[s]`: possible window starts in segments before `s`.
    cum_starts: Vec<u64>,
    /// Grid windows in the whole source: `N`, positions in an epoch's order.
    windows: u64,
    /// Positions a fresh epoch uses over all ranks: `M`.
    epoch_windows: u64,
    /// Samples per fresh epoch for this rank.
    len: u64,
    fingerprint: Fingerprint,
}

impl<S> Inner<S> {
    /// The part of an epoch from global position `base` on (0 for a fresh epoch, a
    /// checkpoint's `consumed` for a resumed one), as (end, this rank's samples): the
    /// positions `base..end` are used, `end - base` being the largest multiple of the
    /// grain that fits, and this rank takes `base + rank + world·i` below `end`.
    fn share(&self, base: u64) -> (u64, u64) {
        let rest = self.windows.saturating_sub(base);
        let used = rest - rest % self.grain;
        let len = used / self.world + u64::from(self.rank < used % self.world);
        (base + used, len)
    }

    /// The global state after this rank consumed `k` of its samples of an epoch part
    /// from `base` to `end`, `k` at most its share: position `base + world·k` (capped
    /// at `end`), the epoch's end being the next epoch's start.
    fn settle(&self, epoch: u64, base: u64, end: u64, k: u64) -> (u64, u64) {
        let at = u128::from(base) + u128::from(self.world) * u128::from(k);
        if at >= u128::from(end) {
            (epoch.saturating_add(1), 0)
        } else {
            (epoch, at as u64)
        }
    }

    /// The global (epoch, consumed) after this rank consumed `k` samples from position
    /// `base` of `epoch`, across epoch ends.
    fn advance(&self, epoch: u64, base: u64, k: u64) -> (u64, u64) {
        let (end, len) = self.share(base);
        if k <= len {
            return self.settle(epoch, base, end, k);
        }
        // Past this epoch: whole fresh epochs of `len` (at least 1) each; `k` ends in
        // epoch `epoch + 1 + skip`, as its `k`-th sample, `k` in `1..=len`.
        let k = k - len;
        let skip = (k - 1) / self.len;
        let k = k - skip * self.len;
        let epoch = epoch.saturating_add(1).saturating_add(skip);
        self.settle(epoch, 0, self.epoch_windows, k)
    }

    /// The checkpoint at (epoch, consumed).
    fn checkpoint_at(&self, epoch: u64, consumed: u64) -> Checkpoint {
        Checkpoint {
            version: CHECKPOINT_VERSION,
            dataset: self.fingerprint.clone(),
            window: self.window,
            stride: self.stride,
            order: self.order.name().to_owned(),
            seed: self.order.seed(),
            windows: self.windows,
            epoch,
            consumed,
            world_size: self.world,
            batch_size: self.batch.unwrap_or(0),
        }
    }

    /// Checks that `c` belongs to this run and lies inside its epoch.
    fn check(&self, c: &Checkpoint) -> Result<(), SourceError> {
        let here = self.checkpoint_at(c.epoch, c.consumed);
        let same_run = Checkpoint {
            world_size: here.world_size,
            batch_size: here.batch_size,
            ..c.clone()
        };
        if let Some((what, saved, here)) = same_run.difference(&here) {
            return Err(SourceError::CheckpointMismatch { what, saved, here });
        }
        if c.consumed > self.windows {
            return Err(SourceError::CheckpointPastEpoch {
                epoch: c.epoch,
                consumed: c.consumed,
                windows: self.windows,
            });
        }
        Ok(())
    }
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
            .field("rank", &i.rank)
            .field("world_size", &i.world)
            .field("batch_size", &i.batch)
            .field("drop_last", &i.drop_last)
            .field("windows", &i.windows)
            .field("epoch_windows", &i.epoch_windows)
            .field("epoch_len", &i.len)
            .finish()
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
            rank: 0,
            world_size: 1,
            even_ranks: false,
            batch_size: None,
            drop_last: true,
        }
    }

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
        self.inner.rank
    }

    /// Ranks the epoch is sharded over.
    pub fn world_size(&self) -> u64 {
        self.inner.world
    }

    /// The batch size set with [`SamplerBuilder::batch_size`], if any.
    pub fn batch_size(&self) -> Option<u64> {
        self.inner.batch
    }

    /// Whether an epoch drops what does not fill whole batches on every rank
    /// ([`SamplerBuilder::drop_last`]; matters only with a batch size).
    pub fn drop_last(&self) -> bool {
        self.inner.drop_last
    }

    /// Grid windows in the whole source: `N`, the positions of each epoch's order (every
    /// rank, before any is dropped).
    pub fn grid_windows(&self) -> u64 {
        self.inner.windows
    }

    /// Positions each epoch uses over all ranks together: `M` (see
    /// [`SamplerBuilder::batch_size`]); the other `N - M` are dropped.
    pub fn epoch_windows(&self) -> u64 {
        self.inner.epoch_windows
    }

    /// Samples per epoch for this rank (at least 1). Equal on every rank when a batch
    /// size or [`even_ranks`](SamplerBuilder::even_ranks) is set.
    pub fn epoch_len(&self) -> u64 {
        self.inner.len
    }

    /// Batches per epoch for this rank, the same on every rank: `epoch_len / B` with
    /// [`drop_last`](SamplerBuilder::drop_last), `⌈epoch_len / B⌉` without (the last one
    /// short). `None` without a batch size.
    pub fn epoch_batches(&self) -> Option<u64> {
        self.inner.batch.map(|b| self.inner.len.div_ceil(b))
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

    /// An endless iterator from epoch 0, index 0.
    pub fn iter(&self) -> Samples<S> {
        Samples::new(self.inner.clone(), Position::default(), None)
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
    /// batch size, or [`even_ranks`](SamplerBuilder::even_ranks), the ranks' shares are
    /// equal; without, the ranks with the smaller share end their epoch one sample
    /// early, and [`Checkpoint::merge`] refuses the ranks' differing states there).
    /// A finished epoch is the next one's start: (`epoch + 1`, consumed 0).
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
        let (epoch, consumed) = self.inner.advance(epoch, 0, consumed_by_this_rank);
        self.inner.checkpoint_at(epoch, consumed)
    }

    /// The checkpoint of a run resumed from `from` (by
    /// [`iter_from_checkpoint`](Self::iter_from_checkpoint)) after this rank consumed
    /// `consumed_by_this_rank` of its samples since: in `from`'s epoch its share of the
    /// rest (see [`iter_from_checkpoint`](Self::iter_from_checkpoint)), then whole
    /// epochs. `from` is checked as `iter_from_checkpoint` checks it. With
    /// `from = self.checkpoint(e, 0)` it is [`checkpoint`](Self::checkpoint)`(e, n)`.
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
        self.inner.check(from)?;
        let (epoch, consumed) =
            self.inner
                .advance(from.epoch, from.consumed, consumed_by_this_rank);
        Ok(self.inner.checkpoint_at(epoch, consumed))
    }

    /// Checks that this sampler can resume from `checkpoint`: the same checkpoint
    /// version, dataset ([`Fingerprint`]: format, file names and sizes), window, stride,
    /// order and seed, or [`SourceError::CheckpointMismatch`] naming the first
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
    /// `M' = c + ⌊(N - c) / (W'·B')⌋ · W'·B'` with [`drop_last`](SamplerBuilder::drop_last)
    /// (`c + ⌊(N - c) / W'⌋ · W'` without it, or with
    /// [`even_ranks`](SamplerBuilder::even_ranks) and no batch size; `N` with neither),
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
        ))
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
        Ok(self.inner.batch.map(|b| left.div_ceil(b)))
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

/// One epoch's shuffled order, its buffer reused from epoch to epoch.
enum Perm {
    Small(Vec<u32>),
    Large(Vec<u64>),
}

impl Perm {
    fn shuffle(&mut self, n: u64, key: u64) {
        let mut rng = SplitMix64::new(key);
        match self {
            Perm::Small(v) => {
                v.clear();
                v.extend(0..n as u32);
                fisher_yates(v, &mut rng);
            }
            Perm::Large(v) => {
                v.clear();
                v.extend(0..n);
                fisher_yates(v, &mut rng);
            }
        }
    }

    fn get(&self, i: u64) -> u64 {
        match self {
            Perm::Small(v) => v.get(i as usize).map_or(0, |&x| u64::from(x)),
            Perm::Large(v) => v.get(i as usize).copied().unwrap_or(0),
        }
    }
}

fn fisher_yates<T>(v: &mut [T], rng: &mut SplitMix64) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

/// The samples of a [`Sampler`], in order, from a [`Position`] or a [`Checkpoint`].
/// Endless, unless made by [`Sampler::epoch`] or bounded with
/// [`until_epoch`](Self::until_epoch). Each item is the source's cheap window descriptor.
pub struct Samples<S> {
    inner: Arc<Inner<S>>,
    pos: Position,
    /// Global position where the current epoch's part starts: 0, or a resumed
    /// checkpoint's `consumed` in its epoch.
    base: u64,
    /// This rank's samples in the current epoch (from `base`).
    len: u64,
    only_epoch: Option<u64>,
    /// The first epoch not yielded, with [`until_epoch`](Self::until_epoch).
    end_epoch: Option<u64>,
    /// The shuffled order of `perm_epoch` (with [`Order::Shuffled`]).
    perm: Option<Perm>,
    perm_epoch: u64,
}

impl<S> fmt::Debug for Samples<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Samples")
            .field("position", &self.pos)
            .field("base", &self.base)
            .field("len", &self.len)
            .field("only_epoch", &self.only_epoch)
            .field("end_epoch", &self.end_epoch)
            .finish()
    }
}

impl<S: Segmented> Samples<S> {
    fn new(inner: Arc<Inner<S>>, pos: Position, only_epoch: Option<u64>) -> Self {
        let len = inner.len;
        Self::at(inner, pos, 0, len, only_epoch)
    }

    /// From the start of the rest of `epoch` at global position `base`.
    fn resumed(inner: Arc<Inner<S>>, epoch: u64, base: u64) -> Self {
        let len = inner.share(base).1;
        Self::at(inner, Position { epoch, index: 0 }, base, len, None)
    }

    fn at(
        inner: Arc<Inner<S>>,
        mut pos: Position,
        mut base: u64,
        mut len: u64,
        only_epoch: Option<u64>,
    ) -> Self {
        if pos.index >= len && only_epoch.is_none() {
            if let Some(next) = pos.epoch.checked_add(1) {
                pos = Position {
                    epoch: next,
                    index: 0,
                };
                base = 0;
                len = inner.len;
            }
        }
        Samples {
            inner,
            pos,
            base,
            len,
            only_epoch,
            end_epoch: None,
            perm: None,
            perm_epoch: 0,
        }
    }

    /// Ends the iterator at the start of epoch `end`: it yields nothing of epoch `end`
    /// or later (nothing at all if it stands there already). For a run of `E` epochs
    /// from epoch 0, resumed or not: `until_epoch(E)`.
    ///
    /// ```
    /// use pinring::source::{write_shard, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-until-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 101])?;
    /// let sampler = TokenShards::open([dir.join("a.bin")])?.windows(11).build()?; // 10 windows
    /// let state = sampler.checkpoint(0, 13); // epoch 1, 3 consumed
    /// let rest = sampler.iter_from_checkpoint(&state)?.until_epoch(3);
    /// assert_eq!(rest.size_hint(), (7 + 10, Some(7 + 10)));
    /// let epochs: Vec<u64> = rest.map(|w| w.epoch()).collect();
    /// assert_eq!(epochs, [[1; 7].as_slice(), &[2; 10]].concat());
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn until_epoch(mut self, end: u64) -> Self {
        self.end_epoch = Some(end);
        self
    }

    /// The position of the next sample this iterator yields.
    pub fn position(&self) -> Position {
        self.pos
    }

    /// The sampler this iterator walks.
    pub fn sampler(&self) -> Sampler<S> {
        Sampler {
            inner: self.inner.clone(),
        }
    }

    /// Samples left before [`until_epoch`](Self::until_epoch)'s end or the end of
    /// [`Sampler::epoch`]'s epoch; `None` when endless (or beyond `u64`).
    fn remaining(&self) -> Option<u64> {
        let here = self.len.saturating_sub(self.pos.index);
        match (self.only_epoch, self.end_epoch) {
            (Some(e), end) if end.is_none_or(|end| e < end) => Some(here),
            (Some(_), _) => Some(0),
            (None, Some(end)) if self.pos.epoch >= end => Some(0),
            (None, Some(end)) => {
                let whole = u128::from(end - self.pos.epoch - 1) * u128::from(self.inner.len);
                u64::try_from(whole + u128::from(here)).ok()
            }
            (None, None) => None,
        }
    }

    /// The window at global position `j` of epoch `epoch`, as (segment, start unit, id).
    fn locate(&mut self, epoch: u64, j: u64) -> (usize, u64, u64) {
        let inner = &*self.inner;
        let g = match inner.order {
            Order::Sequential => j,
            Order::Shuffled { seed } => {
                let stale = self.perm.is_none() || self.perm_epoch != epoch;
                if stale {
                    let perm = self.perm.get_or_insert_with(|| {
                        if inner.windows <= u64::from(u32::MAX) {
                            Perm::Small(Vec::new())
                        } else {
                            Perm::Large(Vec::new())
                        }
                    });
                    perm.shuffle(inner.windows, epoch_key(seed, epoch));
                    self.perm_epoch = epoch;
                }
                self.perm.as_ref().map_or(j, |p| p.get(j))
            }
            Order::Random { seed } => {
                let starts = inner.cum_starts.last().copied().unwrap_or(0);
                let u = SplitMix64::new(mix64(epoch_key(seed, epoch) ^ j)).below(starts);
                let (seg, start) = inner.start_of(u);
                return (seg, start, u);
            }
        };
        let (seg, start) = inner.grid(g);
        (seg, start, g)
    }
}

impl<S> Inner<S> {
    /// Grid window `g` as (segment, start unit).
    fn grid(&self, g: u64) -> (usize, u64) {
        let seg = segment_of(&self.cum_windows, g);
        (seg, (g - self.cum_windows[seg]) * self.stride)
    }

    /// Start `u` of all possible starts as (segment, start unit).
    fn start_of(&self, u: u64) -> (usize, u64) {
        let seg = segment_of(&self.cum_starts, u);
        (seg, u - self.cum_starts[seg])
    }
}

/// The segment `s` with `cum[s] <= x < cum[s + 1]` (for `x` below `cum`'s last entry).
fn segment_of(cum: &[u64], x: u64) -> usize {
    cum.partition_point(|&c| c <= x)
        .saturating_sub(1)
        .min(cum.len().saturating_sub(2))
}

impl<S: Segmented> Iterator for Samples<S> {
    type Item = S::Window;

    fn next(&mut self) -> Option<S::Window> {
        if self.pos.index >= self.len {
            if self.only_epoch.is_some() {
                return None;
            }
            self.pos = Position {
                epoch: self.pos.epoch.checked_add(1)?,
                index: 0,
            };
            self.base = 0;
            self.len = self.inner.len;
        }
        if self.end_epoch.is_some_and(|end| self.pos.epoch >= end) {
            return None;
        }
        let Position { epoch, index } = self.pos;
        let j = self.base + self.inner.rank + self.inner.world * index;
        let (segment, start, id) = self.locate(epoch, j);
        self.pos.index += 1;
        if self.pos.index == self.len && self.only_epoch.is_none() {
            // Keep the position canonical: an epoch's end is the next one's start.
            if let Some(next) = self.pos.epoch.checked_add(1) {
                self.pos = Position {
                    epoch: next,
                    index: 0,
                };
                self.base = 0;
                self.len = self.inner.len;
            }
        }
        Some(self.inner.source.window(WindowSpec {
            segment,
            start,
            len: self.inner.window,
            id,
            epoch,
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.remaining() {
            Some(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                (n, Some(n))
            }
            None => (usize::MAX, None),
        }
    }
}
