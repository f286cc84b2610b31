//! [`Samples`]: the iterator over a [`Sampler`](crate::source::Sampler)'s windows, the
//! [`Position`] it stands at, and the buffer of an epoch's shuffled order.

use std::fmt;
use std::sync::Arc;

#[cfg(doc)]
use super::checkpoint::Checkpoint;
use super::order::Order;
use super::rng::{epoch_key, mix64, SplitMix64};
use super::sampler_inner::Inner;
use super::segmented::{Segmented, WindowSpec};
use super::skip::SkipSteps;
use super::steps::Origin;

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

/// The samples of a [`Sampler`](crate::source::Sampler), in order, from a [`Position`] or a [`Checkpoint`].
/// Endless, unless made by [`Sampler::epoch`](crate::source::Sampler::epoch) or bounded with
/// [`until_epoch`](Self::until_epoch). Each item is the source's cheap window descriptor.
pub struct Samples<S> {
    pub(super) inner: Arc<Inner<S>>,
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
    /// The step clock, when the sampler has a batch size.
    clock: Option<Clock>,
}

/// Which step an iterator stands in: the run's origin (for the arithmetic of a jump),
/// the batch size, the step, how many of its samples were yielded, and the steps to skip.
#[derive(Debug, Clone)]
struct Clock {
    origin: Origin,
    batch: u64,
    step: u64,
    into: u64,
    skip: SkipSteps,
}

impl<S> fmt::Debug for Samples<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Samples")
            .field("position", &self.pos)
            .field("base", &self.base)
            .field("len", &self.len)
            .field("only_epoch", &self.only_epoch)
            .field("end_epoch", &self.end_epoch)
            .field("step", &self.clock.as_ref().map(|c| c.step))
            .finish()
    }
}

impl<S: Segmented> Samples<S> {
    /// From `pos` of a fresh run (epochs from their start); its steps are those of an
    /// uninterrupted run from epoch 0, skipping the sampler's skipped steps.
    pub(super) fn new(inner: Arc<Inner<S>>, pos: Position, only_epoch: Option<u64>) -> Self {
        let len = inner.len;
        let mut samples = Self::at(inner, pos, 0, len, only_epoch);
        if let Some(b) = samples.inner.run.batch {
            let per_epoch = samples.inner.len.div_ceil(b);
            let Position { epoch, index } = samples.pos;
            let origin = Origin {
                epoch,
                base: 0,
                step: epoch.saturating_mul(per_epoch),
            };
            samples.clock = Some(Clock {
                origin,
                batch: b,
                step: origin.step.saturating_add(index / b),
                into: index % b,
                skip: samples.inner.run.skip.clone(),
            });
        }
        samples
    }

    /// From the start of the rest of `epoch` at global position `base`, where step `step`
    /// begins; skipping `skip` (and the sampler's own skipped steps).
    pub(super) fn resumed(
        inner: Arc<Inner<S>>,
        epoch: u64,
        base: u64,
        step: u64,
        skip: &[(u64, u64)],
    ) -> Self {
        let len = inner.share(base).1;
        let mut samples = Self::at(inner, Position { epoch, index: 0 }, base, len, None);
        if let Some(b) = samples.inner.run.batch {
            samples.clock = Some(Clock {
                origin: Origin { epoch, base, step },
                batch: b,
                step,
                into: 0,
                skip: samples.inner.run.skip.union(skip),
            });
        }
        samples
    }

    /// Moves on to step `first` if the iterator stands before it (`start_step`).
    pub(super) fn start_at_step(mut self, first: u64) -> Self {
        if self.clock.as_ref().is_some_and(|c| c.step < first) {
            self.jump(first);
        }
        self
    }

    /// The skipped steps this iterator leaves out (empty without a batch size).
    pub(super) fn skipped(&self) -> &[(u64, u64)] {
        self.clock.as_ref().map_or(&[], |c| c.skip.ranges())
    }

    /// Moves to the start of step `s` (after the current one): position, epoch part and
    /// clock. An iterator over one epoch that `s` lies beyond is exhausted.
    fn jump(&mut self, s: u64) {
        let Some(clock) = self.clock.as_mut() else {
            return;
        };
        let (epoch, base, index) = self.inner.step_place(clock.origin, clock.batch, s);
        clock.step = s;
        clock.into = 0;
        if self.only_epoch.is_some_and(|e| e != epoch) {
            self.pos.index = self.len;
            return;
        }
        let origin = clock.origin;
        self.len = if (epoch, base) == (origin.epoch, origin.base) {
            self.inner.share(base).1
        } else {
            self.inner.len
        };
        self.base = base;
        self.pos = Position { epoch, index };
    }

    fn at(
        inner: Arc<Inner<S>>,
        mut pos: Position,
        mut base: u64,
        mut len: u64,
        only_epoch: Option<u64>,
    ) -> Self {
        if pos.index >= len
            && only_epoch.is_none()
            && let Some(next) = pos.epoch.checked_add(1)
        {
            pos = Position {
                epoch: next,
                index: 0,
            };
            base = 0;
            len = inner.len;
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
            clock: None,
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

    /// Samples left before [`until_epoch`](Self::until_epoch)'s end or the end of
    /// [`Sampler::epoch`](crate::source::Sampler::epoch)'s epoch; `None` when endless (or beyond `u64`).
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

    /// The window at global position `j` of epoch `epoch`'s order (no step), building
    /// that epoch's permutation first when it is not the one held: a mixture reads each
    /// of its sources this way.
    pub(crate) fn window_at(&mut self, epoch: u64, j: u64) -> S::Window {
        let (segment, start, id) = self.locate(epoch, j);
        self.inner.source.window(WindowSpec {
            segment,
            start,
            len: self.inner.window,
            id,
            epoch,
            step: None,
            batch_size: None,
        })
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

impl<S: Segmented> Iterator for Samples<S> {
    type Item = S::Window;

    fn next(&mut self) -> Option<S::Window> {
        if let Some(clock) = &self.clock
            && clock.into == 0
        {
            let kept = clock.skip.next_kept(clock.step);
            if kept != clock.step {
                self.jump(kept);
            }
        }
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
        let j = self.base + self.inner.run.rank + self.inner.run.world * index;
        let (segment, start, id) = self.locate(epoch, j);
        self.pos.index += 1;
        let step = self.clock.as_mut().map(|clock| {
            let step = clock.step;
            clock.into += 1;
            if clock.into == clock.batch || self.pos.index == self.len {
                // The batch is full, or the epoch's part ended (its last batch short).
                clock.step = clock.step.saturating_add(1);
                clock.into = 0;
            }
            step
        });
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
            step,
            batch_size: self.clock.as_ref().map(|c| c.batch),
        }))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        // Skipped steps make the count smaller by what they hold: a bound only.
        let skips = !self.skipped().is_empty();
        match self.remaining() {
            Some(n) => {
                let n = usize::try_from(n).unwrap_or(usize::MAX);
                (if skips { 0 } else { n }, Some(n))
            }
            None => (if skips { 0 } else { usize::MAX }, None),
        }
    }
}
