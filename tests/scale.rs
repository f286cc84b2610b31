//! Training at scale, through the public API: stable window ids and epochs, equal batch
//! counts on every rank, rank-agnostic checkpoints, and elastic resume on another world
//! size (several ranks simulated in one process; one test through real pipelines).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use pinring::source::{
    write_shard, write_shard_u32, Checkpoint, FixedRecords, Identified, Order, Sampler, Segmented,
    SourceError, TokenShards, TokenType, Tokens, WindowSpec, CHECKPOINT_VERSION,
};
use pinring::{Config, Error, Fence, Pipeline};
use proptest::prelude::*;

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pinring-scale-{}-{name}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

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

// ---------------------------------------------------------------------------------------
// Ids and epochs

#[test]
fn ids_are_stable_across_orders_seeds_epochs_and_ranks() {
    let src = Lengths(vec![100, 7, 64, 250]);
    let grid = |order, world, rank| {
        Run {
            window: 9,
            stride: 8,
            order,
            world,
            batch: None,
            drop_last: true,
        }
        .sampler(&src, rank)
        .unwrap()
    };
    // Sequential: ids are 0, 1, 2, ... in grid order, every epoch.
    let seq = grid(Order::Sequential, 1, 0);
    let n = seq.grid_windows();
    for e in [0, 3] {
        let w: Vec<Win> = seq.epoch(e).collect();
        assert_eq!(
            w.iter().map(|w| w.id).collect::<Vec<_>>(),
            (0..n).collect::<Vec<_>>()
        );
        assert!(w.iter().all(|w| w.epoch == e));
    }
    let place: Vec<(usize, u64)> = seq.epoch(0).map(|w| (w.segment, w.start)).collect();
    // Under every grid order, seed, epoch, rank and world size, a window's id names the
    // same place.
    for order in [Order::Shuffled { seed: 1 }, Order::Shuffled { seed: 2 }] {
        for world in [1, 3] {
            for rank in 0..world {
                let s = grid(order, world, rank);
                for e in [0, 1, 7] {
                    for w in s.epoch(e) {
                        assert_eq!(place[w.id as usize], (w.segment, w.start));
                        assert_eq!(w.epoch, e);
                        assert_eq!(s.by_id(w.id), Some(Win { epoch: 0, ..w }));
                    }
                }
            }
        }
    }
    // A shuffled epoch holds every id once.
    let mut ids: Vec<u64> = grid(Order::Shuffled { seed: 5 }, 1, 0)
        .epoch(2)
        .map(|w| w.id)
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..n).collect::<Vec<_>>());
    // Random: ids number all possible starts, in segment order.
    let random = grid(Order::Random { seed: 4 }, 2, 1);
    let starts: Vec<u64> = src.0.iter().map(|&u| u.saturating_sub(8)).collect();
    assert_eq!(random.id_count(), starts.iter().sum::<u64>());
    for w in random.iter().take(500) {
        let before: u64 = starts[..w.segment].iter().sum();
        assert_eq!(w.id, before + w.start);
        assert_eq!(
            random.by_id(w.id).map(|b| (b.segment, b.start)),
            Some((w.segment, w.start))
        );
    }
    assert_eq!(random.by_id(random.id_count()), None);
    assert_eq!(seq.by_id(n), None);
}

#[test]
fn token_and_record_windows_carry_id_and_epoch() {
    let dir = TempDir::new("ids");
    write_shard(dir.path("a.bin"), &(0..1001).collect::<Vec<u16>>()).unwrap();
    write_shard_u32(dir.path("b.bin"), &(0..501).collect::<Vec<u32>>()).unwrap();
    let shards = TokenShards::glob(dir.path("*.bin")).unwrap();
    let s = shards
        .clone()
        .windows(11)
        .order(Order::Shuffled { seed: 3 })
        .build()
        .unwrap(); // 100 + 50 windows at stride 10
    for (i, w) in s.iter().take(400).enumerate() {
        assert_eq!(w.epoch(), i as u64 / 150);
        let g = w.id();
        let (shard, start) = if g < 100 {
            (0, g * 10)
        } else {
            (1, (g - 100) * 10)
        };
        assert_eq!(w.shard().path(), shards.shards()[shard].path());
        assert_eq!(w.start() as u64, start);
        assert_eq!(w.shard().token(w.start()).unwrap(), Some(start as u32)); // token i is i
    }
    let path = dir.path("records.bin");
    std::fs::write(&path, (0..=255u8).collect::<Vec<_>>()).unwrap();
    let records = Sampler::builder(FixedRecords::open([&path], 2).unwrap())
        .order(Order::Shuffled { seed: 1 })
        .shard(1, 2)
        .build()
        .unwrap();
    // 128 records of 2 bytes, 64 for rank 1 each epoch; record j starts with byte 2j.
    for (i, w) in records.iter().take(200).enumerate() {
        assert_eq!(u64::from(w.read_bytes().unwrap()[0]), 2 * w.id());
        assert_eq!(w.epoch(), i as u64 / 64);
    }
}

// ---------------------------------------------------------------------------------------
// Equal batches per rank

#[test]
fn every_rank_gets_the_same_batches_and_the_epoch_drops_only_its_tail() {
    let src = Lengths(vec![1001, 333]);
    for order in ORDERS {
        for (world, batch, drop_last) in [(2, 4, true), (3, 5, true), (3, 5, false), (7, 8, true)] {
            let run = Run {
                window: 11,
                stride: 10,
                order,
                world,
                batch: Some(batch),
                drop_last,
            };
            let ranks = run.ranks(&src);
            let n = ranks[0].grid_windows(); // 100 + 33
            let m = run.end(n, 0);
            for e in [0, 1] {
                let mut all = Vec::new();
                for s in &ranks {
                    assert_eq!(s.epoch_windows(), m);
                    assert_eq!(s.epoch_len(), m / world);
                    assert_eq!(s.epoch_batches(), Some((m / world).div_ceil(batch)));
                    let got: Vec<u64> = s.epoch(e).map(|w| w.id).collect();
                    assert_eq!(got.len() as u64, m / world);
                    all.extend(got);
                }
                all.sort_unstable();
                assert_eq!(all, first_positions(&run, &src, e, m), "{run:?}");
            }
            let bound = if drop_last { world * batch } else { world };
            assert!(n - m < bound);
        }
    }
}

#[test]
fn too_few_windows_for_a_batch_on_every_rank_is_named() {
    let src = Lengths(vec![100]); // 10 windows of 10
    let run = |world, batch, drop_last| Run {
        window: 10,
        stride: 10,
        order: Order::Sequential,
        world,
        batch: Some(batch),
        drop_last,
    };
    let err = run(3, 4, true).sampler(&src, 0).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Source(SourceError::TooFewForBatches {
                windows: 10,
                world_size: 3,
                batch_size: 4,
                drop_last: true
            })
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("3 × 4"), "{err}");
    // Without drop_last one short batch per rank is enough.
    assert_eq!(
        run(3, 4, false).sampler(&src, 2).unwrap().epoch_batches(),
        Some(1)
    );
    let err = run(11, 1, false).sampler(&src, 0).unwrap_err();
    assert!(
        matches!(err, Error::Source(SourceError::TooFewForBatches { .. })),
        "{err:?}"
    );
    let err = run(1, 0, true).sampler(&src, 0).unwrap_err();
    assert!(
        matches!(err, Error::Source(SourceError::Zero("batch_size"))),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------------------
// Checkpoints and elastic resume

#[test]
fn two_ranks_resume_on_three_then_on_one_and_four_on_two() {
    let src = Lengths(vec![1001, 333, 4000]);
    for order in ORDERS {
        let run = |world, batch| Run {
            window: 11,
            stride: 10,
            order,
            world,
            batch: Some(batch),
            drop_last: true,
        };
        let l = run(2, 4).sampler(&src, 0).unwrap().epoch_len();
        for k in [0, 4, 40, l - 4, l, l + 12, 2 * l + 8] {
            check_resume(&src, &run(2, 4), k, &run(3, 4));
            check_resume(&src, &run(2, 4), k, &run(1, 4));
            check_resume(&src, &run(2, 4), k, &run(3, 7));
        }
        let l4 = run(4, 8).sampler(&src, 0).unwrap().epoch_len();
        for k in [8, 16 * 8, l4 - 8, l4 + 8] {
            check_resume(&src, &run(4, 8), k, &run(2, 8));
            check_resume(&src, &run(4, 8), k, &run(2, 3));
        }
    }
}

#[test]
fn resuming_on_the_same_ranks_is_the_uninterrupted_run() {
    let src = Lengths(vec![777, 1500]);
    for order in ORDERS {
        for drop_last in [true, false] {
            let run = Run {
                window: 17,
                stride: 16,
                order,
                world: 3,
                batch: Some(6),
                drop_last,
            };
            for s in run.ranks(&src) {
                let l = s.epoch_len();
                let b = 6;
                let continuous: Vec<Win> = s.iter().take((3 * l) as usize).collect();
                // At batch boundaries (and epoch ends when the last batch is short).
                for k in [0, b, 5 * b, l - l % b, l, l + b, 2 * l + b] {
                    let state = s.checkpoint(0, k);
                    let resumed: Vec<Win> = s
                        .iter_from_checkpoint(&state)
                        .unwrap()
                        .take(continuous.len() - k as usize)
                        .collect();
                    assert_eq!(resumed[..], continuous[k as usize..], "{run:?} k {k}");
                }
            }
        }
    }
}

#[test]
fn a_resumed_run_checkpoints_again_and_resumes_again() {
    let src = Lengths(vec![2000, 2000]);
    let order = Order::Shuffled { seed: 99 };
    let run = |world, batch| Run {
        window: 9,
        stride: 8,
        order,
        world,
        batch: Some(batch),
        drop_last: true,
    };
    let n = run(1, 1).sampler(&src, 0).unwrap().grid_windows(); // 2 × 249
                                                                // Run 1: 2 ranks, batches of 8, 5 batches each.
    let first = Checkpoint::merge(
        &run(2, 8)
            .ranks(&src)
            .iter()
            .map(|s| s.checkpoint(0, 40))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert_eq!((first.epoch, first.consumed), (0, 80));
    let mut seen: Vec<u64> = run(2, 8)
        .ranks(&src)
        .iter()
        .flat_map(|s| s.iter().take(40).map(|w| w.id).collect::<Vec<_>>())
        .collect();
    // Run 2: 3 ranks, batches of 5, resumed from run 1, 7 batches each.
    let ranks2 = run(3, 5).ranks(&src);
    let second = Checkpoint::merge(
        &ranks2
            .iter()
            .map(|s| s.checkpoint_after(&first, 35).unwrap())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert_eq!(
        (second.epoch, second.consumed, second.world_size),
        (0, 80 + 105, 3)
    );
    for s in &ranks2 {
        seen.extend(
            s.iter_from_checkpoint(&first)
                .unwrap()
                .take(35)
                .map(|w| w.id),
        );
    }
    // Run 3: 4 ranks, batches of 2, finishes the epoch.
    let mut last = Vec::new();
    for s in run(4, 2).ranks(&src) {
        let left = s.samples_left(&second).unwrap();
        assert_eq!(left, (n - 185) / 8 * 8 / 4);
        seen.extend(
            s.iter_from_checkpoint(&second)
                .unwrap()
                .take(left as usize)
                .map(|w| w.id),
        );
        last.push(s.checkpoint_after(&second, left).unwrap());
    }
    let end = Checkpoint::merge(&last).unwrap();
    assert_eq!((end.epoch, end.consumed), (1, 0));
    seen.sort_unstable();
    let end_pos = 185 + (n - 185) / 8 * 8;
    assert_eq!(seen, first_positions(&run(1, 1), &src, 0, end_pos));
    assert!(seen.windows(2).all(|p| p[0] != p[1]));
    // checkpoint_after from an epoch start is checkpoint.
    let s = &ranks2[1];
    for k in [0, 5, 300, 1000] {
        assert_eq!(
            s.checkpoint_after(&s.checkpoint(2, 0), k).unwrap(),
            s.checkpoint(2, k)
        );
    }
}

#[test]
fn a_resumed_epoch_with_nothing_left_starts_the_next() {
    let src = Lengths(vec![100]); // 10 windows of 10
    let run = |world, batch| Run {
        window: 10,
        stride: 10,
        order: Order::Shuffled { seed: 1 },
        world,
        batch: Some(batch),
        drop_last: true,
    };
    // One rank consumed 8 of 10; three ranks of batch 1 cannot share the last 2 equally.
    let state = run(1, 2).sampler(&src, 0).unwrap().checkpoint(0, 8);
    assert_eq!((state.epoch, state.consumed), (0, 8));
    for s in run(3, 1).ranks(&src) {
        assert_eq!(s.samples_left(&state).unwrap(), 0);
        assert_eq!(s.batches_left(&state).unwrap(), Some(0));
        let next: Vec<Win> = s.iter_from_checkpoint(&state).unwrap().take(3).collect();
        assert_eq!(next, s.epoch(1).collect::<Vec<_>>());
        assert_eq!(s.checkpoint_after(&state, 0).unwrap().epoch, 1);
    }
    // A state at the epoch's very end (consumed = N) is the next epoch's start too.
    let end = Checkpoint {
        consumed: 10,
        ..state
    };
    let s = run(2, 1).sampler(&src, 1).unwrap();
    assert_eq!(
        s.iter_from_checkpoint(&end).unwrap().next().unwrap().epoch,
        1
    );
}

#[test]
fn without_a_batch_size_ranks_differ_by_one_and_merge_says_when_they_are_not_in_step() {
    let src = Lengths(vec![100]); // 10 windows
    let run = Run {
        window: 10,
        stride: 10,
        order: Order::Sequential,
        world: 3,
        batch: None,
        drop_last: true,
    };
    let ranks = run.ranks(&src);
    let lens: Vec<u64> = ranks.iter().map(|s| s.epoch_len()).collect();
    assert_eq!(lens, [4, 3, 3]);
    assert_eq!(ranks[0].epoch_batches(), None);
    // In step for 3 samples: positions 0..9 consumed on every rank.
    let at3: Vec<_> = ranks.iter().map(|s| s.checkpoint(0, 3)).collect();
    assert_eq!(Checkpoint::merge(&at3).unwrap().consumed, 9);
    // Rank 0 takes its 4th: the epoch is over for it, not for the others' view.
    let uneven = [ranks[0].checkpoint(0, 4), at3[1].clone(), at3[2].clone()];
    let err = Checkpoint::merge(&uneven).unwrap_err();
    let Error::Source(SourceError::UnequalRanks { positions }) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(positions, &[(1, 0), (0, 9), (0, 9)]);
    // Resumed from position 9, only rank 0 of 3 has the last window.
    let left: Vec<u64> = ranks
        .iter()
        .map(|s| s.samples_left(&at3[0]).unwrap())
        .collect();
    assert_eq!(left, [1, 0, 0]);
}

#[test]
fn mismatched_checkpoints_are_refused() {
    let dir = TempDir::new("mismatch");
    let tokens: Vec<u16> = (0..5000).map(|i| i as u16).collect();
    write_shard(dir.path("train_000.bin"), &tokens).unwrap();
    write_shard(dir.path("train_001.bin"), &tokens[..3000]).unwrap();
    let shards = TokenShards::glob(dir.path("train_*.bin")).unwrap();
    let build = |shards: &TokenShards, window, order| {
        shards
            .clone()
            .windows(window)
            .order(order)
            .shard(1, 2)
            .batch_size(4)
            .build()
            .unwrap()
    };
    let order = Order::Shuffled { seed: 7 };
    let sampler = build(&shards, 65, order);
    let state = sampler.checkpoint(0, 40);
    assert_eq!((state.version, state.consumed), (CHECKPOINT_VERSION, 80));
    assert_eq!(state.dataset.files, ["train_000.bin", "train_001.bin"]);
    assert_eq!(state.dataset.sizes, [1024 + 2 * 5000, 1024 + 2 * 3000]);
    assert_eq!(state.dataset.format, "u16");
    assert_eq!((state.window, state.stride), (65, 64));
    assert_eq!((state.order.as_str(), state.seed), ("shuffled", 7));
    assert_eq!(state.order().unwrap(), order);
    assert_eq!((state.world_size, state.batch_size), (2, 4));
    sampler.check_checkpoint(&state).unwrap();

    let mismatch = |s: &Sampler<TokenShards>, c: &Checkpoint, what: &str| {
        let err = s.iter_from_checkpoint(c).unwrap_err();
        match &err {
            Error::Source(SourceError::CheckpointMismatch { what: w, .. }) => {
                assert!(w.contains(what), "{err}");
            }
            other => panic!("expected CheckpointMismatch about {what}, got {other:?}"),
        }
        assert!(s.check_checkpoint(c).is_err());
        assert!(s.samples_left(c).is_err());
        assert!(s.checkpoint_after(c, 1).is_err());
        err.to_string()
    };
    // Another seq_len.
    let text = mismatch(&build(&shards, 129, order), &state, "window");
    assert_eq!(
        text,
        "the checkpoint does not match: the window (units per window, T + 1) is 65 in the \
         checkpoint but 129 here; a checkpoint resumes only the same dataset, window, stride, \
         order and seed (the world size and batch size may change)"
    );
    // Another stride, order, seed.
    let strided = shards
        .clone()
        .windows(65)
        .stride(65)
        .order(order)
        .build()
        .unwrap();
    mismatch(&strided, &state, "stride");
    mismatch(
        &build(&shards, 65, Order::Random { seed: 7 }),
        &state,
        "order",
    );
    mismatch(
        &build(&shards, 65, Order::Shuffled { seed: 8 }),
        &state,
        "seed",
    );
    // Another dataset: one file fewer, another file's size, another name, u32 tokens.
    let one = TokenShards::open([dir.path("train_000.bin")]).unwrap();
    mismatch(&build(&one, 65, order), &state, "number of files");
    write_shard(dir.path("other_000.bin"), &tokens).unwrap();
    write_shard(dir.path("other_001.bin"), &tokens[..2999]).unwrap();
    let other = TokenShards::glob(dir.path("other_*.bin")).unwrap();
    let text = mismatch(&build(&other, 65, order), &state, "file 0's name");
    assert!(text.contains("\"train_000.bin\""), "{text}");
    let moved = TempDir::new("mismatch-moved");
    write_shard(moved.path("train_000.bin"), &tokens).unwrap();
    write_shard(moved.path("train_001.bin"), &tokens[..2999]).unwrap();
    let resized = TokenShards::glob(moved.path("train_*.bin")).unwrap();
    mismatch(&build(&resized, 65, order), &state, "size of file 1");
    drop(resized); // unmapped before the file is rewritten
    let wide: Vec<u32> = tokens.iter().map(|&t| u32::from(t)).collect();
    write_shard_u32(moved.path("train_001.bin"), &wide[..3000]).unwrap();
    let widened = TokenShards::glob(moved.path("train_*.bin")).unwrap();
    mismatch(&build(&widened, 65, order), &state, "format");
    drop(widened);
    // The same files under another directory: accepted (names, not paths).
    write_shard(moved.path("train_001.bin"), &tokens[..3000]).unwrap();
    let elsewhere = build(
        &TokenShards::glob(moved.path("train_*.bin")).unwrap(),
        65,
        order,
    );
    elsewhere.check_checkpoint(&state).unwrap();
    // Records are another dataset, even of the same files' bytes.
    let records = Sampler::builder(
        FixedRecords::open([dir.path("train_000.bin"), dir.path("train_001.bin")], 2).unwrap(),
    )
    .window(65)
    .stride(64)
    .order(order)
    .build()
    .unwrap();
    assert!(matches!(
        records.check_checkpoint(&state),
        Err(Error::Source(SourceError::CheckpointMismatch { .. }))
    ));
    // Another checkpoint version.
    let old = Checkpoint {
        version: CHECKPOINT_VERSION + 1,
        ..state.clone()
    };
    mismatch(&sampler, &old, "version");
    // Consumed past the epoch.
    let past = Checkpoint {
        consumed: state.windows + 1,
        ..state.clone()
    };
    let err = sampler.iter_from_checkpoint(&past).unwrap_err();
    assert!(
        matches!(err, Error::Source(SourceError::CheckpointPastEpoch { consumed, windows, .. })
            if consumed == windows + 1 && windows == state.windows),
        "{err:?}"
    );
    // A world size or batch size of its own is fine.
    let other_world = shards
        .clone()
        .windows(65)
        .order(order)
        .shard(2, 5)
        .batch_size(3);
    other_world
        .build()
        .unwrap()
        .check_checkpoint(&state)
        .unwrap();
}

#[test]
fn merge_takes_equal_ranks_and_refuses_unequal_or_foreign_ones() {
    let src = Lengths(vec![1000]);
    let run = Run {
        window: 10,
        stride: 10,
        order: Order::Shuffled { seed: 3 },
        world: 4,
        batch: Some(5),
        drop_last: true,
    };
    let ranks = run.ranks(&src);
    let states: Vec<_> = ranks.iter().map(|s| s.checkpoint(0, 15)).collect();
    assert_eq!(Checkpoint::merge(&states).unwrap(), states[0]);
    assert_eq!(states[0].consumed, 60);
    // Rank 2 consumed one batch more.
    let mut unequal = states.clone();
    unequal[2] = ranks[2].checkpoint(0, 20);
    let err = Checkpoint::merge(&unequal).unwrap_err();
    let Error::Source(SourceError::UnequalRanks { positions }) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(positions, &[(0, 60), (0, 60), (0, 80), (0, 60)]);
    let text = err.to_string();
    assert!(text.contains("rank 2 at epoch 0 consumed 80"), "{text}");
    assert_eq!(
        text,
        "the ranks' checkpoints differ (rank 0 at epoch 0 consumed 60, rank 1 at epoch 0 \
         consumed 60, rank 2 at epoch 0 consumed 80, rank 3 at epoch 0 consumed 60): every \
         rank must have popped the same number of samples when it saves (data-parallel \
         training keeps the ranks in step), so that one global position describes them all"
    );
    // Another run's checkpoint (another seed).
    let mut foreign = states.clone();
    foreign[1] = Run {
        order: Order::Shuffled { seed: 4 },
        ..run
    }
    .sampler(&src, 1)
    .unwrap()
    .checkpoint(0, 15);
    let err = Checkpoint::merge(&foreign).unwrap_err();
    assert!(
        matches!(&err, Error::Source(SourceError::CheckpointMismatch { what, .. }) if what.contains("seed") && what.contains("rank 1")),
        "{err:?}"
    );
    assert!(matches!(
        Checkpoint::merge(&[]),
        Err(Error::Source(SourceError::Zero("checkpoints")))
    ));
}

#[test]
fn checkpoint_text_round_trips_and_bad_text_is_named() {
    let dir = TempDir::new("text");
    write_shard(dir.path("odd\\name\nwith lines.bin"), &[0; 100]).unwrap();
    let sampler = TokenShards::open([dir.path("odd\\name\nwith lines.bin")])
        .unwrap()
        .windows(9)
        .order(Order::Random { seed: u64::MAX })
        .batch_size(2)
        .build()
        .unwrap();
    let state = sampler.checkpoint(3, 7);
    let text = state.to_text();
    assert!(text.starts_with("{\n  \"version\": 2,\n"), "{text}");
    assert_eq!(Checkpoint::from_text(&text).unwrap(), state);
    assert_eq!(state.dataset.files, ["odd\\name\nwith lines.bin"]);
    for (bad, line) in [
        ("", 1),
        ("{\"version\": \"x\"}", 1),
        (&text.replace("\"window\": 9", "\"window\": \"nine\""), 11),
        (&text.replace("  \"stride\": 8,\n", ""), 21),
        (&text.replace("\"seed\"", "\"colour\""), 14),
    ] {
        match Checkpoint::from_text(bad) {
            Err(Error::Source(SourceError::BadCheckpointText { line: l, .. })) => {
                assert_eq!(l, line, "{bad:?}")
            }
            other => panic!("{bad:?} gave {other:?}"),
        }
    }
    let unknown = Checkpoint {
        order: "sorted".into(),
        ..state
    };
    assert!(unknown.order().is_err());
    assert!(sampler.check_checkpoint(&unknown).is_err());
}

// ---------------------------------------------------------------------------------------
// Through real pipelines

/// Decodes `Tokens` as u16 from a shard whose token `i` is `i`: a sample's first token is
/// its window's start.
fn run_pipeline(
    sampler: &Sampler<TokenShards>,
    samples: pinring::source::Samples<TokenShards>,
    batches: Option<usize>,
) -> Vec<Vec<u64>> {
    let decoder = Tokens::new(TokenType::U16);
    let b = sampler.batch_size().unwrap() as usize;
    let bytes = decoder.sample_bytes(sampler.window());
    let config = Config::builder()
        .batch_size(b)
        .bytes_per_sample(bytes)
        .decode_threads(2)
        .build()
        .unwrap();
    let mut pipeline = Pipeline::new(config, decoder, samples).unwrap();
    let mut out = Vec::new();
    while batches.is_none_or(|n| out.len() < n) {
        let Some(batch) = pipeline.pop().unwrap() else {
            break;
        };
        let starts: Vec<u64> = batch
            .bytes()
            .chunks_exact(bytes)
            .map(|s| u64::from(u16::from_le_bytes([s[0], s[1]])))
            .collect();
        // The batch names its samples: each id is the window its row holds.
        let named: Vec<u64> = batch
            .sample_ids()
            .iter()
            .map(|&id| sampler.by_id(id).expect("a window's id").start() as u64)
            .collect();
        assert_eq!(named, starts, "batch {}'s sample ids", batch.seq());
        out.push(starts);
        batch
            .release(Fence::Sync)
            .expect("a Sync fence always captures");
    }
    out
}

#[test]
fn windows_reach_batches_exactly_once_across_an_elastic_resume() {
    let dir = TempDir::new("pipeline");
    write_shard(
        dir.path("train_000.bin"),
        &(0..20_000).map(|i| i as u16).collect::<Vec<_>>(),
    )
    .unwrap();
    let shards = TokenShards::open([dir.path("train_000.bin")]).unwrap();
    let build = |rank, world, batch| {
        shards
            .clone()
            .windows(33)
            .order(Order::Shuffled { seed: 2024 })
            .shard(rank, world)
            .batch_size(batch)
            .build()
            .unwrap()
    };
    let n = build(0, 1, 1).grid_windows(); // 624
                                           // Two ranks, batches of 8: each pops 12 batches, decode running ahead, then stops.
    let mut starts = Vec::new();
    let mut states = Vec::new();
    for rank in 0..2 {
        let s = build(rank, 2, 8);
        let got = run_pipeline(&s, s.iter(), Some(12));
        assert!(got.iter().all(|b| b.len() == 8));
        starts.extend(got.into_iter().flatten());
        states.push(s.checkpoint(0, 12 * 8));
    }
    let state = Checkpoint::merge(&states).unwrap();
    assert_eq!(state.consumed, 2 * 12 * 8);
    // Three ranks, batches of 5, finish the epoch: the same number of batches each.
    let mut counts = Vec::new();
    for rank in 0..3 {
        let s = build(rank, 3, 5);
        let got = run_pipeline(
            &s,
            s.iter_from_checkpoint(&state).unwrap().until_epoch(1),
            None,
        );
        assert!(got.iter().all(|b| b.len() == 5));
        assert_eq!(Some(got.len() as u64), s.batches_left(&state).unwrap());
        counts.push(got.len());
        starts.extend(got.into_iter().flatten());
    }
    assert!(counts.windows(2).all(|p| p[0] == p[1]), "{counts:?}");
    // The starts the batches held are the windows of the epoch's first M' positions.
    let m = 192 + (n - 192) / 15 * 15;
    let reference = build(0, 1, 1);
    let mut want: Vec<u64> = reference
        .epoch(0)
        .take(m as usize)
        .map(|w| w.start() as u64)
        .collect();
    want.sort_unstable();
    starts.sort_unstable();
    assert_eq!(starts, want);
    assert!(starts.windows(2).all(|p| p[0] != p[1]), "a window twice");
}

// ---------------------------------------------------------------------------------------
// Properties

fn order_strategy() -> impl Strategy<Value = Order> {
    prop_oneof![
        Just(Order::Sequential),
        any::<u16>().prop_map(|s| Order::Shuffled { seed: u64::from(s) }),
        any::<u16>().prop_map(|s| Order::Random { seed: u64::from(s) }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// For any windows, batch size, world size and drop_last: every rank has the same
    /// number of samples and batches, the ranks together take exactly the epoch's first
    /// `M` positions, and fewer than `W·B` (or `W`) are dropped; or the set-up is
    /// refused because some rank would get nothing.
    #[test]
    fn equal_batch_counts_per_rank(
        lens in proptest::collection::vec(0u64..400, 1..4),
        window in 1u64..12,
        world in 1u64..9,
        batch in 1u64..9,
        drop_last: bool,
        order in order_strategy(),
        epoch in 0u64..3,
    ) {
        let src = Lengths(lens);
        let run = Run { window, stride: window, order, world, batch: Some(batch), drop_last };
        let n: u64 = src.0.iter().map(|&u| if u >= window { (u - window) / window + 1 } else { 0 }).sum();
        prop_assume!(n > 0);
        let m = run.end(n, 0);
        if m == 0 {
            let err = run.sampler(&src, world - 1).unwrap_err();
            prop_assert!(matches!(err, Error::Source(SourceError::TooFewForBatches { .. })), "{err:?}");
            return Ok(());
        }
        let mut all = Vec::new();
        for s in run.ranks(&src) {
            prop_assert_eq!(s.epoch_len(), m / world);
            prop_assert_eq!(s.epoch_batches(), Some((m / world).div_ceil(batch)));
            if drop_last {
                prop_assert_eq!(s.epoch_len() % batch, 0);
            }
            let ids: Vec<u64> = s.epoch(epoch).map(|w| w.id).collect();
            prop_assert_eq!(ids.len() as u64, m / world);
            all.extend(ids);
        }
        all.sort_unstable();
        prop_assert_eq!(all, first_positions(&run, &src, epoch, m));
        let bound = if drop_last { world * batch } else { world };
        prop_assert!(n - m < bound, "dropped {} of {}", n - m, n);
    }

    /// For any resume (N, W, B, k, W', B'): old + new deliver the epoch's first `M'`
    /// positions exactly once, every new rank the same count, and later epochs are a
    /// fresh run's.
    #[test]
    fn elastic_resume_is_exactly_once(
        lens in proptest::collection::vec(1u64..300, 1..3),
        world in 1u64..6,
        batch in 1u64..6,
        new_world in 1u64..6,
        new_batch in proptest::option::of(1u64..6),
        drop_last: bool,
        new_drop_last: bool,
        order in order_strategy(),
        k_frac in 0.0f64..2.5,
    ) {
        let src = Lengths(lens);
        let old = Run { window: 3, stride: 2, order, world, batch: Some(batch), drop_last };
        let Ok(first) = old.sampler(&src, 0) else {
            return Ok(()); // too few windows for this run (checked above)
        };
        let k = (k_frac * first.epoch_len() as f64) as u64;
        let new = Run { world: new_world, batch: new_batch, drop_last: new_drop_last, ..old };
        if new.sampler(&src, new_world - 1).is_err() {
            return Ok(());
        }
        check_resume(&src, &old, k, &new);
    }
}
