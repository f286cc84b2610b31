//! Stop rules: `First` ends before the first sample that would start any source's second
//! epoch, `All` once every source (of positive weight) finished its first — on a whole
//! step of every rank.

use std::collections::BTreeSet;

use pinring::source::{Blend, Mixture, Stop};

use crate::helpers::{drawn, sources, Drawn};

/// Epoch lengths of the sources below: 20, 7 and 13 windows.
const LENS: [usize; 3] = [161, 57, 105];
const N: [u64; 3] = [20, 7, 13];
const WEIGHTS: [f64; 3] = [0.5, 0.3, 0.2];

/// Where the global sequence ends under `stop`, from the blend alone.
fn end(stop: Stop, weights: &[f64]) -> u64 {
    let mut blend = Blend::new(weights).unwrap();
    loop {
        let s = blend.peek();
        if stop == Stop::First && blend.counts()[s] == N[s] {
            return blend.position();
        }
        blend.next();
        let done = (0..3).all(|s| weights[s] == 0.0 || blend.counts()[s] >= N[s]);
        if stop == Stop::All && done {
            return blend.position();
        }
    }
}

fn run(stop: Stop, weights: [f64; 3], world: u64, batch: u64) -> Vec<Vec<Drawn>> {
    let (_dir, sources) = sources(&LENS);
    (0..world)
        .map(|rank| {
            Mixture::builder(sources.clone())
                .weights(weights)
                .stop(stop)
                .shard(rank, world)
                .batch_size(batch)
                .build()
                .unwrap()
                .iter()
                .map(drawn)
                .collect()
        })
        .collect()
}

#[test]
fn first_ends_before_any_source_starts_its_second_epoch() {
    let g = end(Stop::First, &WEIGHTS);
    assert_eq!(g, 25); // source 1 (7 windows, 30%) runs out first
    for (world, batch) in [(1, 1), (2, 3), (3, 2)] {
        let ranks = run(Stop::First, WEIGHTS, world, batch);
        let steps = g / (world * batch);
        for got in &ranks {
            assert_eq!(got.len() as u64, steps * batch, "W={world} B={batch}");
            assert!(got.iter().all(|d| d.1 == 0), "a second epoch was started");
        }
        let all: BTreeSet<(u16, u64)> = ranks.iter().flatten().map(|d| (d.0, d.2)).collect();
        assert_eq!(all.len() as u64, steps * world * batch);
    }
}

#[test]
fn all_ends_once_every_source_finished_its_first_epoch() {
    let g = end(Stop::All, &WEIGHTS);
    let ranks = run(Stop::All, WEIGHTS, 1, 1);
    assert_eq!(ranks[0].len() as u64, g);
    // Every source's first epoch, whole; the early finishers went on into their second.
    for s in 0..3u16 {
        let first: BTreeSet<u64> = ranks[0]
            .iter()
            .filter(|d| d.0 == s && d.1 == 0)
            .map(|d| d.2)
            .collect();
        assert_eq!(first.len() as u64, N[usize::from(s)], "source {s}");
    }
    assert!(ranks[0].iter().any(|d| d.1 == 1));
    // On two ranks with batches of 4: the whole steps before the end.
    let ranks = run(Stop::All, WEIGHTS, 2, 4);
    assert!(ranks.iter().all(|r| r.len() as u64 == g / 8 * 4));
    // A source of weight 0 does not hold the end back.
    let g = end(Stop::All, &[1.0, 0.0, 1.0]);
    assert_eq!(run(Stop::All, [1.0, 0.0, 1.0], 1, 1)[0].len() as u64, g);
}

#[test]
fn a_state_at_the_end_resumes_to_nothing() {
    let (_dir, sources) = sources(&LENS);
    let mix = Mixture::builder(sources)
        .weights(WEIGHTS)
        .stop(Stop::First)
        .batch_size(2)
        .build()
        .unwrap();
    let delivered = mix.iter().count() as u64;
    let state = mix.checkpoint_after(None, delivered).unwrap();
    assert_eq!(mix.iter_from(&state).unwrap().count(), 0);
    // Never: endless.
    let never = mix.to_builder().stop(Stop::Never).build().unwrap();
    assert_eq!(never.iter().take(1000).count(), 1000);
}

/// Issue 28: a state after a skipped range that runs past the stop rule's end stands at
/// the run's end — its step the run's step count, its count the positions of those whole
/// steps — rather than walking the blend to the range's end (2**62 steps: for ever).
#[test]
fn a_state_after_a_skip_past_the_stop_stands_at_the_runs_end() {
    let (_dir, sources) = sources(&LENS);
    for stop in [Stop::First, Stop::All] {
        let whole = end(stop, &WEIGHTS) / 4; // steps of 4 on one rank
        let mix = Mixture::builder(sources.clone())
            .weights(WEIGHTS)
            .stop(stop)
            .batch_size(4)
            .skip_steps([(3, 1 << 62)])
            .build()
            .unwrap();
        assert_eq!(
            mix.iter().count(),
            3 * 4,
            "{stop:?}: steps 0 to 2, then the end"
        );
        let (tx, rx) = std::sync::mpsc::channel();
        let walker = mix.clone();
        std::thread::spawn(move || {
            let _ = tx.send(walker.checkpoint_after(None, 3 * 4));
        });
        let state = rx
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the state of a run ended by its stop rule, in bounded time")
            .unwrap();
        assert_eq!((state.step, state.consumed), (whole, whole * 4), "{stop:?}");
        assert_eq!(mix.iter_from(&state).unwrap().count(), 0, "{stop:?}");
    }
}
