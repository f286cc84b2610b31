//! Sampling: which windows of a source an epoch visits, in which order, on which rank.

use std::fmt;
use std::sync::Arc;

use super::error::SourceError;
use super::rng::{epoch_key, mix64, SplitMix64};
use crate::error::Result;

/// A source the [`Sampler`] can cut into windows: a list of segments (files), each a run
/// of units (tokens, records). Windows never cross a segment's end.
///
/// [`TokenShards`](super::TokenShards) and [`FixedRecords`](super::FixedRecords) implement
/// it; implement it for your own format to get the same sampling, sharding and resume.
pub trait Segmented: Send + Sync + 'static {
    /// The cheap descriptor of one window that the sampler yields (and a
    /// [`Decode`](crate::Decode) impl turns into bytes).
    type Window: Send + 'static;

    /// How many segments there are.
    fn segments(&self) -> usize;

    /// Units in segment `segment` (`segment < self.segments()`).
    fn units(&self, segment: usize) -> u64;

    /// The descriptor of the `len` units from `start` of segment `segment`. The sampler
    /// only asks for windows that lie inside the segment: `start + len <= units(segment)`.
    fn window(&self, segment: usize, start: u64, len: u64) -> Self::Window;
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

/// Where a sampler stands: the epoch, and how many of this rank's samples of that epoch
/// were already yielded. Positions order by epoch, then index.
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
    /// the epoch's samples `r, r + world_size, r + 2·world_size, …`, so ranks see
    /// disjoint samples and together the whole epoch. Ranks' epoch lengths differ by at
    /// most one unless [`even_ranks`](Self::even_ranks) is set.
    pub fn shard(mut self, rank: u64, world_size: u64) -> Self {
        self.rank = rank;
        self.world_size = world_size;
        self
    }

    /// Drops the last `windows % world_size` samples of each epoch so that every rank has
    /// the same epoch length, as data-parallel training needs to stay in step (default
    /// off). With [`Order::Shuffled`] the dropped windows change from epoch to epoch.
    pub fn even_ranks(mut self, on: bool) -> Self {
        self.even_ranks = on;
        self
    }

    /// Checks the settings against the source and returns the sampler: a zero window,
    /// stride or world size is [`SourceError::Zero`], a rank not below the world size
    /// [`SourceError::BadRank`], a window longer than every file
    /// [`SourceError::NoWindows`], and fewer windows than ranks (so that this rank would
    /// get none) [`SourceError::EmptyShare`].
    pub fn build(self) -> Result<Sampler<S>> {
        let window = nonzero(self.window, "window")?;
        let stride = nonzero(self.stride.unwrap_or(window), "stride")?;
        let world = nonzero(self.world_size, "world_size")?;
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
        let epoch_windows = if self.even_ranks {
            windows - windows % world
        } else {
            windows
        };
        if windows == 0 {
            return Err(SourceError::NoWindows { window, longest }.into());
        }
        let len = epoch_windows / world + u64::from(self.rank < epoch_windows % world);
        if len == 0 {
            return Err(SourceError::EmptyShare {
                rank: self.rank,
                world_size: world,
                windows,
                even_ranks: self.even_ranks,
            }
            .into());
        }
        Ok(Sampler {
            inner: Arc::new(Inner {
                source: self.source,
                window,
                stride,
                order: self.order,
                rank: self.rank,
                world,
                cum_windows,
                cum_starts,
                windows,
                epoch_windows,
                len,
            }),
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
/// `(rank, world_size)`; from any [`Position`], so a run resumes exactly.
///
/// The iterators it makes ([`iter`](Self::iter), [`iter_from`](Self::iter_from),
/// [`epoch`](Self::epoch)) own what they need, so they go straight into
/// [`Pipeline::new`](crate::Pipeline::new). Cloning a sampler is cheap.
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
    /// `cum_windows[s]`: grid windows in segments before `s`; one entry more than segments.
    cum_windows: Vec<u64>,
    /// `cum_starts[s]`: possible window starts in segments before `s`.
    cum_starts: Vec<u64>,
    /// Grid windows in the whole source.
    windows: u64,
    /// Samples per epoch over all ranks (`windows`, less the tail with `even_ranks`).
    epoch_windows: u64,
    /// Samples per epoch for this rank.
    len: u64,
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
            .field("windows", &i.windows)
            .field("epoch_len", &i.len)
            .finish()
    }
}

impl<S: Segmented> Sampler<S> {
    /// A builder over `source`: windows of 1 unit, stride = window, sequential, rank 0
    /// of 1.
    pub fn builder(source: S) -> SamplerBuilder<S> {
        SamplerBuilder {
            source,
            window: 1,
            stride: None,
            order: Order::Sequential,
            rank: 0,
            world_size: 1,
            even_ranks: false,
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

    /// Grid windows in the whole source (every rank, before `even_ranks` drops any).
    pub fn grid_windows(&self) -> u64 {
        self.inner.windows
    }

    /// Samples per epoch over all ranks together.
    pub fn epoch_windows(&self) -> u64 {
        self.inner.epoch_windows
    }

    /// Samples per epoch for this rank (at least 1).
    pub fn epoch_len(&self) -> u64 {
        self.inner.len
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

/// The samples of a [`Sampler`], in order, from a [`Position`]. Endless, unless made by
/// [`Sampler::epoch`]. Each item is the source's cheap window descriptor.
pub struct Samples<S> {
    inner: Arc<Inner<S>>,
    pos: Position,
    only_epoch: Option<u64>,
    /// The shuffled order of `perm_epoch` (with [`Order::Shuffled`]).
    perm: Option<Perm>,
    perm_epoch: u64,
}

impl<S> fmt::Debug for Samples<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Samples")
            .field("position", &self.pos)
            .field("only_epoch", &self.only_epoch)
            .finish()
    }
}

impl<S: Segmented> Samples<S> {
    fn new(inner: Arc<Inner<S>>, mut pos: Position, only_epoch: Option<u64>) -> Self {
        if pos.index >= inner.len && only_epoch.is_none() {
            if let Some(next) = pos.epoch.checked_add(1) {
                pos = Position {
                    epoch: next,
                    index: 0,
                };
            }
        }
        Samples {
            inner,
            pos,
            only_epoch,
            perm: None,
            perm_epoch: 0,
        }
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

    /// The global grid window (or random draw) at index `j` of epoch `epoch`, as
    /// (segment, start unit).
    fn locate(&mut self, epoch: u64, j: u64) -> (usize, u64) {
        let inner = &*self.inner;
        match inner.order {
            Order::Sequential => inner.grid(j),
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
                let g = self.perm.as_ref().map_or(j, |p| p.get(j));
                inner.grid(g)
            }
            Order::Random { seed } => {
                let starts = inner.cum_starts.last().copied().unwrap_or(0);
                let u = SplitMix64::new(mix64(epoch_key(seed, epoch) ^ j)).below(starts);
                let seg = segment_of(&inner.cum_starts, u);
                (seg, u - inner.cum_starts[seg])
            }
        }
    }
}

impl<S> Inner<S> {
    /// Grid window `g` as (segment, start unit).
    fn grid(&self, g: u64) -> (usize, u64) {
        let seg = segment_of(&self.cum_windows, g);
        (seg, (g - self.cum_windows[seg]) * self.stride)
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
        if self.pos.index >= self.inner.len {
            if self.only_epoch.is_some() {
                return None;
            }
            self.pos = Position {
                epoch: self.pos.epoch.checked_add(1)?,
                index: 0,
            };
        }
        let Position { epoch, index } = self.pos;
        let j = self.inner.rank + self.inner.world * index;
        let (segment, start) = self.locate(epoch, j);
        self.pos.index += 1;
        if self.pos.index == self.inner.len && self.only_epoch.is_none() {
            // Keep the position canonical: an epoch's end is the next one's start.
            if let Some(next) = self.pos.epoch.checked_add(1) {
                self.pos = Position {
                    epoch: next,
                    index: 0,
                };
            }
        }
        Some(self.inner.source.window(segment, start, self.inner.window))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self.only_epoch {
            Some(_) => {
                let left = usize::try_from(self.inner.len.saturating_sub(self.pos.index))
                    .unwrap_or(usize::MAX);
                (left, Some(left))
            }
            None => (usize::MAX, None),
        }
    }
}
