//! Training at scale, through the public API: stable window ids and epochs, equal batch
//! counts on every rank, rank-agnostic checkpoints, and elastic resume on another world
//! size (several ranks simulated in one process; one test through real pipelines).

use std::collections::BTreeSet;

use pinring::source::{
    write_shard, write_shard_u32, Checkpoint, FixedRecords, Identified, Order, Sampler, Segmented,
    SourceError, TokenShards, TokenType, Tokens, WindowSpec, CHECKPOINT_VERSION,
};
use pinring::{Config, Error, Fence, Pipeline};
use proptest::prelude::*;

#[path = "../common/source_error.rs"]
#[macro_use]
mod source_error;

mod ids;
mod pipeline;
mod properties;
mod resume;
mod shares;

/// An in-memory source: segments of these lengths. Its windows are plain values, so
/// property tests need no files.
#[derive(Debug, Clone)]
struct Lengths(Vec<u64>);

/// A window of [`Lengths`]: everything the sampler said about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Win {
    segment: usize,
    start: u64,
    id: u64,
    epoch: u64,
}

impl Segmented for Lengths {
    type Window = Win;

    fn segments(&self) -> usize {
        self.0.len()
    }

    fn units(&self, segment: usize) -> u64 {
        self.0[segment]
    }

    fn window(&self, spec: WindowSpec) -> Win {
        assert!(spec.start + spec.len <= self.0[spec.segment], "{spec:?}");
        Win {
            segment: spec.segment,
            start: spec.start,
            id: spec.id,
            epoch: spec.epoch,
        }
    }
}

impl Identified for Win {
    fn id(&self) -> u64 {
        self.id
    }

    fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// How a run samples: what every rank of it shares.
#[derive(Debug, Clone, Copy)]
struct Run {
    window: u64,
    stride: u64,
    order: Order,
    world: u64,
    batch: Option<u64>,
    drop_last: bool,
}

impl Run {
    fn sampler<S: Segmented + Clone>(&self, src: &S, rank: u64) -> pinring::Result<Sampler<S>> {
        let mut b = Sampler::builder(src.clone())
            .window(self.window)
            .stride(self.stride)
            .order(self.order)
            .shard(rank, self.world)
            .drop_last(self.drop_last);
        if let Some(batch) = self.batch {
            b = b.batch_size(batch);
        }
        b.build()
    }

    fn ranks<S: Segmented + Clone>(&self, src: &S) -> Vec<Sampler<S>> {
        (0..self.world)
            .map(|r| self.sampler(src, r).unwrap())
            .collect()
    }

    /// The positions each epoch (or the rest of one from `base`) uses, by the design's
    /// formula, computed here independently of the crate.
    fn end(&self, n: u64, base: u64) -> u64 {
        let rest = n - base;
        let grain = match self.batch {
            Some(b) if self.drop_last => self.world * b,
            Some(_) => self.world,
            None => 1,
        };
        base + rest / grain * grain
    }

    /// The same run on one rank without a batch size: its epoch is the whole order.
    fn reference<S: Segmented + Clone>(&self, src: &S) -> Sampler<S> {
        Run {
            world: 1,
            batch: None,
            ..*self
        }
        .sampler(src, 0)
        .unwrap()
    }
}

/// Ids of the first `m` positions of epoch `epoch`'s order, sorted (a multiset).
fn first_positions<S: Segmented + Clone>(run: &Run, src: &S, epoch: u64, m: u64) -> Vec<u64>
where
    S::Window: Identified,
{
    let mut ids: Vec<u64> = run
        .reference(src)
        .epoch(epoch)
        .take(m as usize)
        .map(|w| w.id())
        .collect();
    ids.sort_unstable();
    ids
}

/// What one elastic resume delivered, for the checks.
struct Resumed {
    state: Checkpoint,
    /// Ids the old run consumed in the checkpoint's epoch.
    old: Vec<u64>,
    /// Ids each new rank delivered in the rest of that epoch.
    new: Vec<Vec<u64>>,
}

/// `old` runs from epoch 0 until every rank consumed `k` samples and saves; `new`
/// resumes from the merged state and finishes the epoch. Checks the per-rank counts and
/// epochs on the way.
fn resume<S: Segmented + Clone>(src: &S, old: &Run, k: u64, new: &Run) -> Resumed
where
    S::Window: Identified,
{
    let old_ranks = old.ranks(src);
    let states: Vec<Checkpoint> = old_ranks.iter().map(|s| s.checkpoint(0, k)).collect();
    let state = Checkpoint::merge(&states).unwrap();
    let mut consumed = Vec::new();
    for s in &old_ranks {
        let taken: Vec<_> = s.iter().take(k as usize).collect();
        // The checkpoint's epoch is the one the rank's next sample belongs to.
        let next = s.iter().nth(k as usize).unwrap();
        assert_eq!(next.epoch(), state.epoch, "{old:?} k {k}");
        consumed.extend(
            taken
                .iter()
                .filter(|w| w.epoch() == state.epoch)
                .map(Identified::id),
        );
        assert!(taken.iter().all(|w| w.epoch() <= state.epoch));
    }
    consumed.sort_unstable();
    let mut delivered = Vec::new();
    let mut lefts = Vec::new();
    for s in new.ranks(src) {
        let left = s.samples_left(&state).unwrap();
        lefts.push(left);
        let mut it = s.iter_from_checkpoint(&state).unwrap();
        let ids: Vec<u64> = it
            .by_ref()
            .take(left as usize)
            .map(|w| {
                assert_eq!(w.epoch(), state.epoch);
                w.id()
            })
            .collect();
        assert_eq!(ids.len() as u64, left);
        // The rank's share of the epoch ends there.
        assert_eq!(it.next().map(|w| w.epoch()), Some(state.epoch + 1));
        delivered.push(ids);
    }
    if let Some(b) = new.batch {
        assert!(
            lefts.windows(2).all(|p| p[0] == p[1]),
            "unequal shares {lefts:?}"
        );
        let batches: Vec<_> = new
            .ranks(src)
            .iter()
            .map(|s| s.batches_left(&state).unwrap())
            .collect();
        assert!(batches.windows(2).all(|p| p[0] == p[1]), "{batches:?}");
        if new.drop_last {
            assert_eq!(batches[0], Some(lefts[0] / b));
            assert_eq!(lefts[0] % b, 0);
        }
    }
    Resumed {
        state,
        old: consumed,
        new: delivered,
    }
}

/// The checks of an elastic resume: the old run's part is the first `consumed`
/// positions, old + new is exactly the first `M'` positions (so no window twice and none
/// skipped), fewer than the new grain dropped, and every later epoch is a fresh run's.
fn check_resume<S: Segmented + Clone>(src: &S, old: &Run, k: u64, new: &Run)
where
    S::Window: Identified,
{
    let n = old.reference(src).grid_windows();
    let r = resume(src, old, k, new);
    let c = r.state.consumed;
    let e = r.state.epoch;
    assert_eq!(r.old, first_positions(old, src, e, c), "{old:?} k {k}");
    let end = new.end(n, c);
    let mut all: Vec<u64> = r
        .old
        .iter()
        .chain(r.new.iter().flatten())
        .copied()
        .collect();
    all.sort_unstable();
    assert_eq!(
        all,
        first_positions(old, src, e, end),
        "{old:?} k {k} -> {new:?}: the epoch's windows are not each delivered once"
    );
    if !matches!(old.order, Order::Random { .. }) {
        let set: BTreeSet<u64> = all.iter().copied().collect();
        assert_eq!(set.len(), all.len(), "a window twice");
    }
    let grain = new.world * new.batch.unwrap_or(1);
    assert!(n - end < grain, "dropped {} of {n}", n - end);
    // The next epochs are those of an uninterrupted run at the new world size.
    for (rank, s) in new.ranks(src).iter().enumerate() {
        let left = s.samples_left(&r.state).unwrap() as usize;
        let later: Vec<Win2> = s
            .iter_from_checkpoint(&r.state)
            .unwrap()
            .skip(left)
            .take(2 * s.epoch_len() as usize)
            .map(|w| (w.id(), w.epoch()))
            .collect();
        let fresh: Vec<Win2> = (e + 1..e + 3)
            .flat_map(|ep| s.epoch(ep).map(|w| (w.id(), w.epoch())))
            .collect();
        assert_eq!(later, fresh, "rank {rank}: a later epoch differs");
    }
}

type Win2 = (u64, u64);

const ORDERS: [Order; 3] = [
    Order::Sequential,
    Order::Shuffled { seed: 1337 },
    Order::Random { seed: 1337 },
];
