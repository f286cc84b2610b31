//! `RankGuard` with threads as ranks and a collective of the test's own (a max-reduce
//! over a shared table, a condition variable as its barrier): a rank whose data ends
//! first is named on every rank at the same check, before it leaves; ranks that agree
//! check quietly; the verdicts on crafted records (a slow rank, ranks at different steps,
//! a collective that does not reduce by MAX).

use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use pinring::source::{Order, Source};
use pinring::{Error, Fence, Loader, LoaderBuilder, RankError, RankGuard, RankRecord, RANK_LANES};

use crate::helpers::{documents, shards, windows};

/// A max all-reduce among `n` threads; a rank that leaves makes the others' reduce fail
/// instead of waiting for it (a hang, in a real run).
struct Collective {
    n: usize,
    state: Mutex<Table>,
    turn: Condvar,
}

#[derive(Default)]
struct Table {
    lanes: Vec<[i64; RANK_LANES]>,
    arrived: usize,
    round: u64,
    result: [i64; RANK_LANES],
    left: Option<usize>,
}

impl Collective {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Collective {
            n,
            state: Mutex::new(Table::default()),
            turn: Condvar::new(),
        })
    }

    fn reduce(&self, rank: usize, lanes: &mut [i64]) -> Result<(), String> {
        let mut t = self.state.lock().unwrap();
        if let Some(r) = t.left {
            return Err(format!(
                "rank {r} left the run: the others would wait forever"
            ));
        }
        t.lanes.push(lanes.try_into().unwrap());
        t.arrived += 1;
        let round = t.round;
        if t.arrived == self.n {
            let mut out = [i64::MIN; RANK_LANES];
            for l in &t.lanes {
                for (o, v) in out.iter_mut().zip(l) {
                    *o = (*o).max(*v);
                }
            }
            t.result = out;
            t.lanes.clear();
            t.arrived = 0;
            t.round += 1;
            self.turn.notify_all();
        } else {
            t = self
                .turn
                .wait_while(t, |t| t.round == round && t.left.is_none())
                .unwrap();
            if t.round == round {
                return Err(format!(
                    "rank {} left the run: the others would wait forever",
                    t.left.unwrap()
                ));
            }
        }
        lanes.copy_from_slice(&t.result);
        let _ = rank;
        Ok(())
    }

    fn leave(&self, rank: usize) {
        self.state.lock().unwrap().left.get_or_insert(rank);
        self.turn.notify_all();
    }
}

/// What a rank's loop ended with.
#[derive(Debug, PartialEq)]
enum Ended {
    /// Its data ran out at this step, without an error from the guard.
    RanOut(u64),
    /// The guard's error, and the steps popped by then.
    Guard(String, Option<u64>, u64),
}

/// Each rank's loop over its loader: pop, release, `guard.step` — as a trainer's.
fn run_ranks<S: Source + Send + 'static>(
    builders: Vec<LoaderBuilder<S>>,
    every: u64,
) -> Vec<Ended> {
    let n = builders.len();
    let coll = Collective::new(n);
    let threads: Vec<_> = builders
        .into_iter()
        .enumerate()
        .map(|(rank, b)| {
            let coll = Arc::clone(&coll);
            std::thread::spawn(move || {
                let mut loader = b.build().unwrap();
                let mut guard = RankGuard::new(rank as u64, n as u64, every).unwrap();
                loop {
                    let Some(batch) = loader.pop().unwrap() else {
                        coll.leave(rank);
                        return Ended::RanOut(loader.next_step());
                    };
                    batch.release(Fence::Sync).unwrap();
                    match guard.step(&loader, |l: &mut [i64]| coll.reduce(rank, l)) {
                        Ok(_) => {}
                        Err(Error::Rank(e)) => {
                            coll.leave(rank);
                            return Ended::Guard(e.to_string(), e.rank(), loader.next_step());
                        }
                        Err(e) => panic!("{e}"),
                    }
                }
            })
        })
        .collect();
    threads.into_iter().map(|t| t.join().unwrap()).collect()
}

#[test]
fn a_rank_whose_windows_end_first_is_named_on_every_rank_before_it_leaves() {
    let (_dir, paths) = shards(&[6000]);
    let src = windows(&paths, 16, Order::Shuffled { seed: 1 });
    let epoch = Loader::builder(src.clone())
        .batch_size(2)
        .world_size(4)
        .build()
        .unwrap()
        .epoch_batches()
        .unwrap();
    assert_eq!(epoch, 49);
    // 4 ranks, 2 windows a batch, 49 steps an epoch. Rank 2 was started with one epoch,
    // the others with two.
    let builders = (0..4)
        .map(|r| {
            Loader::builder(src.clone())
                .batch_size(2)
                .rank(r)
                .world_size(4)
                .epochs(if r == 2 { 1 } else { 2 })
        })
        .collect();
    let ended = run_ranks(builders, 10);
    for e in &ended {
        let Ended::Guard(msg, rank, step) = e else {
            panic!("a rank was not stopped: {ended:?}")
        };
        assert_eq!(*rank, Some(2), "{msg}");
        assert!(msg.contains("rank 2 runs out of data at step 49"), "{msg}");
        // The first check whose look ahead (20 steps) reaches past step 49: at 30 pops.
        assert_eq!(*step, 30, "{msg}");
    }
}

#[test]
fn a_rank_whose_documents_or_mixture_end_first_is_named_from_a_walk_ahead() {
    let (_dir, paths) = shards(&[12_000, 9_000]);
    let all = documents(&paths, 256, 128, false);
    let fewer = documents(&paths[..1], 256, 128, false);
    let builders = (0..3)
        .map(|r| {
            Loader::builder(if r == 1 { fewer.clone() } else { all.clone() })
                .rank(r)
                .world_size(3)
                .epochs(1)
        })
        .collect();
    let ended = run_ranks(builders, 4);
    let mut steps = Vec::new();
    for e in &ended {
        let Ended::Guard(msg, rank, step) = e else {
            panic!("a rank was not stopped: {ended:?}")
        };
        assert_eq!(*rank, Some(1), "{msg}");
        assert!(msg.contains("runs out of data"), "{msg}");
        steps.push(*step);
    }
    assert!(steps.iter().all(|&s| s == steps[0]), "{steps:?}");
    // Rank 1's loader alone: its run ends at or after the check that named it.
    let mut alone = Loader::builder(fewer)
        .rank(1)
        .world_size(3)
        .epochs(1)
        .build()
        .unwrap();
    let mut n = 0;
    while let Some(b) = alone.pop().unwrap() {
        b.release(Fence::Sync).unwrap();
        n += 1;
    }
    assert!(
        n >= steps[0],
        "rank 1 delivers {n} steps, named at {}",
        steps[0]
    );
    // A mixture that ends by its stop rule: rank 1's second source is a shorter corpus.
    let member = |ps: &[std::path::PathBuf]| {
        pinring::source::Documents::builder(pinring::source::TokenShards::open(ps).unwrap())
            .bos(u32::from(crate::helpers::BOS))
    };
    let mix = |short: bool| {
        let second = if short { &paths[1..] } else { &paths[..] };
        pinring::source::Mixture::documents([member(&paths[..1]), member(second)])
            .weights([0.5, 0.5])
            .stop(pinring::source::Stop::First)
            .tokens_per_batch(256)
            .max_seq_len(128)
            .build()
            .unwrap()
    };
    let builders = (0..3)
        .map(|r| Loader::builder(mix(r == 1)).rank(r).world_size(3))
        .collect();
    for e in run_ranks(builders, 4) {
        let Ended::Guard(msg, rank, _) = &e else {
            panic!("a rank was not stopped: {e:?}")
        };
        assert_eq!(*rank, Some(1), "{msg}");
    }
}

#[test]
fn ranks_that_agree_check_quietly_to_the_end() {
    let (_dir, paths) = shards(&[6000]);
    let src = windows(&paths, 16, Order::Sequential);
    let builders = (0..3)
        .map(|r| {
            Loader::builder(src.clone())
                .batch_size(3)
                .rank(r)
                .world_size(3)
                .epochs(1)
        })
        .collect();
    let epoch = Loader::builder(src.clone())
        .batch_size(3)
        .world_size(3)
        .build()
        .unwrap()
        .epoch_batches()
        .unwrap();
    // Every rank ends at the epoch's end together.
    for e in run_ranks(builders, 5) {
        assert_eq!(e, Ended::RanOut(epoch));
    }
}

/// The reduced lanes of `records` (rank `i` the `i`-th), as a collective gives them.
fn reduced(records: &[RankRecord], every: u64) -> Vec<i64> {
    let n = records.len() as u64;
    let mut out = vec![i64::MIN; RANK_LANES];
    for r in records {
        let lanes = RankGuard::new(r.rank, n, every).unwrap().lanes(r);
        for (o, v) in out.iter_mut().zip(lanes) {
            *o = (*o).max(v);
        }
    }
    out
}

fn record(rank: u64, step: u64, end: u64, wait_ms: u64) -> RankRecord {
    RankRecord {
        rank,
        step,
        end,
        data_wait: Duration::from_millis(wait_ms),
        source_time: Duration::from_millis(wait_ms / 2),
    }
}

/// Four ranks at step 50 that run to step 70, rank `r` waiting `wait_ms[r]`.
fn four_ranks(wait_ms: [u64; 4]) -> [RankRecord; 4] {
    [0, 1, 2, 3].map(|r| record(r, 50, 70, wait_ms[r as usize]))
}

#[test]
fn the_verdicts_on_crafted_records_name_the_slow_rank_and_the_rank_behind() {
    let guard = RankGuard::new(0, 4, 10).unwrap();
    let quiet = four_ranks([900, 0, 300, 20]);
    // Waits under the floor (1 s) are no problem, however uneven.
    let report = guard.decide(&reduced(&quiet, 10), 50).unwrap();
    assert_eq!(
        (report.most_wait, report.least_wait),
        ((Duration::from_millis(900), 0), Duration::ZERO)
    );
    assert_eq!(
        (report.first_end, report.last_end, report.problem),
        ((70, 0), 70, None)
    );
    let slow = four_ranks([400, 5000, 300, 700]);
    match guard.decide(&reduced(&slow, 10), 50) {
        Err(RankError::SlowData {
            rank: 1,
            waited,
            least,
            source_time,
            ..
        }) => {
            assert_eq!(
                (waited, least),
                (Duration::from_secs(5), Duration::from_millis(300))
            );
            assert_eq!(source_time, Some(Duration::from_millis(2500)));
        }
        other => panic!("{other:?}"),
    }
    // Within the ratio (4 ×) of the least wait: no problem.
    let even = four_ranks([4000, 5000, 3000, 4500]);
    assert_eq!(guard.decide(&reduced(&even, 10), 50).unwrap().problem, None);
    // Reported instead of raised when the guard only warns.
    let warn = RankGuard::new(0, 4, 10).unwrap().warn_only(true);
    let report = warn.decide(&reduced(&slow, 10), 50).unwrap();
    assert!(
        matches!(report.problem, Some(RankError::SlowData { rank: 1, .. })),
        "{report:?}"
    );
    // A rank at another step is named; the end of the earliest-ending rank comes next.
    let mut behind = four_ranks([0; 4]);
    behind[2] = record(2, 49, 69, 0);
    assert!(matches!(
        guard.decide(&reduced(&behind, 10), 50),
        Err(RankError::Steps {
            rank: 2,
            step: 49,
            others: 50
        })
    ));
    let mut short = four_ranks([0; 4]);
    short[3] = record(3, 50, 61, 0);
    assert!(matches!(
        guard.decide(&reduced(&short, 10), 50),
        Err(RankError::RunsOut {
            rank: 3,
            ends_at: 61,
            others_reach: 70,
            step: 50
        })
    ));
    // A sum instead of a max is caught, not read as ranks.
    let summed: Vec<i64> = (0..RANK_LANES)
        .map(|i| {
            quiet
                .iter()
                .map(|r| guard.lanes(&RankRecord { rank: r.rank, ..*r })[i])
                .sum()
        })
        .collect();
    assert!(
        matches!(guard.decide(&summed, 50), Err(RankError::BadReduction(_))),
        "{:?}",
        guard.decide(&summed, 50)
    );
    // Guards of two world sizes are told apart, not read as ranks.
    let four = RankGuard::new(0, 4, 10)
        .unwrap()
        .lanes(&record(0, 50, 70, 0));
    let three = RankGuard::new(1, 3, 10)
        .unwrap()
        .lanes(&record(1, 50, 70, 0));
    let mixed: Vec<i64> = four.iter().zip(three).map(|(a, b)| (*a).max(b)).collect();
    assert!(
        matches!(guard.decide(&mixed, 50), Err(RankError::Versions { .. })),
        "{:?}",
        guard.decide(&mixed, 50)
    );
    assert!(RankGuard::new(4, 4, 10).is_err() && RankGuard::new(0, 4, 0).is_err());
}
