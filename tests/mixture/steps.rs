//! Steps, for samplers and mixtures on every rank: `start_step(k)` begins exactly where an
//! uninterrupted run stands at step `k`; `skip_steps` leaves out exactly those steps,
//! keeps the other steps' numbers, and goes on skipping across a resume.

use std::ops::Range;

use pinring::source::{
    Checkpoint, Mixture, MixtureState, Order, Sampler, TokenShard, TokenShards, Window,
};
use proptest::prelude::*;

use crate::helpers::{drawn, ranks, sources, Drawn};

/// A window as (epoch, id, step).
type Win = (u64, u64, Option<u64>);

fn win(w: Window<TokenShard>) -> Win {
    (w.epoch(), w.id(), w.step())
}

fn order(kind: u8) -> Order {
    match kind {
        0 => Order::Sequential,
        1 => Order::Shuffled { seed: 11 },
        _ => Order::Random { seed: 11 },
    }
}

/// The settings of a sampled run: shard length (in windows), world size, rank, batch
/// size, drop_last, order.
#[derive(Debug, Clone, Copy)]
struct Run {
    windows: u64,
    world: u64,
    rank: u64,
    batch: u64,
    drop_last: bool,
    order: u8,
}

fn runs() -> impl Strategy<Value = Run> {
    (20u64..90, ranks(), 1u64..6, any::<bool>(), 0u8..3)
        .prop_map(|(windows, (world, rank), batch, drop_last, order)| Run {
            windows,
            world,
            rank,
            batch,
            drop_last,
            order,
        })
        .prop_filter("an epoch gives every rank a batch", |r| {
            r.windows >= r.world * if r.drop_last { r.batch } else { 1 }
        })
}

fn skips() -> impl Strategy<Value = Vec<Range<u64>>> {
    proptest::collection::vec((0u64..40, 0u64..6).prop_map(|(a, n)| a..a + n), 0..4)
}

/// The sampler of `run` over `shards`, with `start` and `skip` set.
fn sampler(
    shards: &TokenShards,
    run: Run,
    start: u64,
    skip: &[Range<u64>],
) -> Sampler<TokenShards> {
    shards
        .clone()
        .windows(9)
        .order(order(run.order))
        .shard(run.rank, run.world)
        .batch_size(run.batch)
        .drop_last(run.drop_last)
        .start_step(start)
        .skip_steps(skip.iter().map(|r| (r.start, r.end)))
        .build()
        .unwrap()
}

/// Samples in the first `k` steps of a run's step numbers.
fn popped_in(steps: impl Iterator<Item = Option<u64>>, k: u64) -> u64 {
    let (mut seen, mut last, mut count) = (0, None, 0);
    for step in steps {
        if step != last {
            if seen == k {
                break;
            }
            seen += 1;
            last = step;
        }
        count += 1;
    }
    count
}

fn skipped(skip: &[Range<u64>], step: Option<u64>) -> bool {
    step.is_some_and(|k| skip.iter().any(|r| r.contains(&k)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn a_sampler_started_at_step_k_is_the_uninterrupted_run_from_k(
        run in runs(),
        k in 0u64..60,
        n in 1usize..80,
    ) {
        let (_dir, sources) = sources(&[(run.windows * 8 + 1) as usize]);
        let shards = sources[0].source().clone();
        let whole: Vec<Win> = sampler(&shards, run, 0, &[]).iter().map(win)
            .filter(|w| w.2 >= Some(k)).take(n).collect();
        let started: Vec<Win> = sampler(&shards, run, k, &[]).iter().map(win).take(n).collect();
        prop_assert_eq!(&started, &whole);
        prop_assert_eq!(started[0].2, Some(k));
        // Resumed from a checkpoint before step k: begins at k too.
        let state = sampler(&shards, run, 0, &[]).checkpoint(0, run.batch.min(3));
        if state.step <= k {
            let from_state: Vec<Win> = sampler(&shards, run, k, &[])
                .iter_from_checkpoint(&state).unwrap().map(win).take(n).collect();
            let want: Vec<Win> = sampler(&shards, run, 0, &[])
                .iter_from_checkpoint(&state).unwrap().map(win)
                .filter(|w| w.2 >= Some(k)).take(n).collect();
            prop_assert_eq!(from_state, want);
        }
    }

    #[test]
    fn a_sampler_skips_exactly_the_skipped_steps_also_across_a_resume(
        run in runs(),
        skip in skips(),
        popped_steps in 0u64..20,
        later in runs(),
        n in 1usize..60,
    ) {
        let (_dir, sources) = sources(&[(run.windows * 8 + 1) as usize]);
        let shards = sources[0].source().clone();
        let plain = sampler(&shards, run, 0, &[]);
        let skipping = sampler(&shards, run, 0, &skip);
        let want: Vec<Win> = plain.iter().map(win).filter(|w| !skipped(&skip, w.2)).take(n).collect();
        let got: Vec<Win> = skipping.iter().map(win).take(n).collect();
        prop_assert_eq!(&got, &want);
        // Popped so far, on every rank alike: the first steps of the skipping run.
        let popped = popped_in(skipping.iter().map(|w| w.step()), popped_steps);
        let states: Vec<Checkpoint> = (0..run.world)
            .map(|r| sampler(&shards, Run { rank: r, ..run }, 0, &skip)
                .checkpoint_after(&plain.checkpoint(0, 0), popped).unwrap())
            .collect();
        let state = Checkpoint::merge(&states).unwrap();
        prop_assert_eq!(&state.skip[..], skipping.skip_steps());
        // The same run resumed goes on as it went.
        let rest: Vec<Win> = skipping.iter_from_checkpoint(&state).unwrap().map(win).take(n).collect();
        let went_on: Vec<Win> = skipping.iter().map(win).skip(popped as usize).take(n).collect();
        prop_assert_eq!(rest, went_on);
        // Resumed on other ranks without skip_steps of its own: the state keeps skipping.
        let later = Run { windows: run.windows, order: run.order, ..later };
        if later.windows >= later.world * later.batch {
            let resumed = sampler(&shards, later, 0, &[]);
            let unskipped = Checkpoint { skip: Vec::new(), ..state.clone() };
            let got: Vec<Win> = resumed.iter_from_checkpoint(&state).unwrap().map(win).take(n).collect();
            let want: Vec<Win> = resumed.iter_from_checkpoint(&unskipped).unwrap().map(win)
                .filter(|w| !skipped(&skip, w.2)).take(n).collect();
            prop_assert_eq!(got, want);
        }
    }
}

/// The mixture of `sources` with these settings.
fn mixture(
    sources: &[Sampler<TokenShards>],
    world: u64,
    rank: u64,
    batch: u64,
    start: u64,
    skip: &[Range<u64>],
) -> Mixture<TokenShards> {
    Mixture::builder(sources.to_vec())
        .weights([0.5, 0.3, 0.2])
        .seed(3)
        .shard(rank, world)
        .batch_size(batch)
        .start_step(start)
        .skip_steps(skip.iter().map(|r| (r.start, r.end)))
        .build()
        .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_mixture_started_at_step_k_is_the_uninterrupted_run_from_k(
        (world, rank) in ranks(),
        batch in 1u64..5,
        k in 0u64..40,
        n in 1usize..50,
    ) {
        let (_dir, sources) = sources(&[161, 57, 105]);
        let whole: Vec<Drawn> = mixture(&sources, world, rank, batch, 0, &[]).iter()
            .skip((k * batch) as usize).take(n).map(drawn).collect();
        let started: Vec<Drawn> = mixture(&sources, world, rank, batch, k, &[]).iter()
            .take(n).map(drawn).collect();
        prop_assert_eq!(started, whole);
    }

    #[test]
    fn a_mixture_skips_exactly_the_skipped_steps_also_across_a_resume(
        (world, rank) in ranks(),
        batch in 1u64..5,
        skip in skips(),
        popped_steps in 0u64..15,
        later_world in 1u64..4,
        later_batch in 1u64..5,
        n in 1usize..50,
    ) {
        let (_dir, sources) = sources(&[161, 57, 105]);
        let mix = mixture(&sources, world, rank, batch, 0, &skip);
        let plain = mixture(&sources, world, rank, batch, 0, &[]);
        let want: Vec<Drawn> = plain.iter().map(drawn).filter(|d| !skipped(&skip, d.3)).take(n).collect();
        let got: Vec<Drawn> = mix.iter().map(drawn).take(n).collect();
        prop_assert_eq!(&got, &want);
        // Saved after some steps, resumed: goes on as it went.
        let popped = popped_steps * batch;
        let state = mix.checkpoint_after(None, popped).unwrap();
        let rest: Vec<Drawn> = mix.iter_from(&state).unwrap().map(drawn).take(n).collect();
        let went_on: Vec<Drawn> = mix.iter().map(drawn).skip(popped as usize).take(n).collect();
        prop_assert_eq!(rest, went_on);
        // Merged over the ranks and resumed elsewhere, without skip_steps: still skipping.
        let states: Vec<MixtureState> = (0..world)
            .map(|r| mixture(&sources, world, r, batch, 0, &skip).checkpoint_after(None, popped).unwrap())
            .collect();
        let state = MixtureState::merge(&states).unwrap();
        let later_rank = rank % later_world;
        let resumed = mixture(&sources, later_world, later_rank, later_batch, 0, &[]);
        let unskipped = MixtureState { skip: Vec::new(), ..state.clone() };
        let got: Vec<Drawn> = resumed.iter_from(&state).unwrap().map(drawn).take(n).collect();
        let want: Vec<Drawn> = resumed.iter_from(&unskipped).unwrap().map(drawn)
            .filter(|d| !skipped(&skip, d.3)).take(n).collect();
        prop_assert_eq!(got, want);
    }
}

#[test]
fn steps_number_batches_across_epochs() {
    // 100 windows, 2 ranks, batches of 4 with drop_last: 12 steps an epoch (96 used).
    let (_dir, sources) = sources(&[801]);
    let s = sources[0]
        .to_builder()
        .shard(1, 2)
        .batch_size(4)
        .build()
        .unwrap();
    let steps: Vec<u64> = s.iter().take(30 * 4).map(|w| w.step().unwrap()).collect();
    assert_eq!(steps, (0..30).flat_map(|k| [k; 4]).collect::<Vec<_>>());
    // Without drop_last: 50 samples, 13 steps an epoch, the last of 2.
    let s = s.to_builder().drop_last(false).build().unwrap();
    let epoch: Vec<u64> = s.iter().take(50).map(|w| w.step().unwrap()).collect();
    assert_eq!(&epoch[44..], &[11, 11, 11, 11, 12, 12]);
    assert_eq!(s.iter().nth(50).unwrap().step(), Some(13));
    // No batch size: no steps.
    assert_eq!(sources[0].iter().next().unwrap().step(), None);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_run_begun_at_step_k_saves_and_resumes_where_it_stood(
        run in runs(),
        k in 0u64..40,
        skip in skips(),
        popped_steps in 0u64..30,
        n in 1usize..40,
    ) {
        let (_dir, sources) = sources(&[(run.windows * 8 + 1) as usize, 57, 105]);
        let shards = sources[0].source().clone();
        let s = sampler(&shards, run, k, &skip);
        // Whole steps popped (a state saved between steps).
        let popped = popped_in(s.iter().map(|w| w.step()), popped_steps);
        let state = s.checkpoint_after(&s.checkpoint(0, 0), popped).unwrap();
        let rest: Vec<Win> = s.iter_from_checkpoint(&state).unwrap().map(win).take(n).collect();
        let went_on: Vec<Win> = s.iter().map(win).skip(popped as usize).take(n).collect();
        prop_assert_eq!(rest, went_on);
        // A mixture alike.
        let popped = popped_steps * run.batch;
        let mix = mixture(&sources, run.world, run.rank, run.batch, k, &skip);
        let state = mix.checkpoint_after(None, popped).unwrap();
        let rest: Vec<Drawn> = mix.iter_from(&state).unwrap().map(drawn).take(n).collect();
        let went_on: Vec<Drawn> = mix.iter().map(drawn).skip(popped as usize).take(n).collect();
        prop_assert_eq!(rest, went_on);
    }
}
