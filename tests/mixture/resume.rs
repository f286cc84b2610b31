//! Exactly once across save → merge → resume chains: every leg runs on its own world size
//! and batch size (and maybe new weights); across the chain every position of the global
//! sequence is delivered once, and each source's samples are exactly the first ones of
//! its own walk (no sample twice within a source's epoch, none skipped).

use std::collections::BTreeMap;

use pinring::source::{Checkpoint, Mixture, MixtureState, TokenShards};
use pinring::Error;
use proptest::prelude::*;

use crate::helpers::{drawn, own_walk, sources, Drawn};

/// One leg of a chain: world size, batch size, steps every rank runs, and the weights
/// (an index into `WEIGHTS`).
type Leg = (u64, u64, u64, usize);

const WEIGHTS: [[f64; 3]; 4] = [
    [0.5, 0.3, 0.2],
    [1.0, 1.0, 1.0],
    [0.0, 2.0, 1.0],
    [7.0, 0.5, 0.0],
];

/// Runs `legs` of a mixture of seed `seed` over sources of `lens`, each leg resumed from
/// the merged state of the one before; returns what every rank drew, the last state, and
/// the sources.
fn chain(
    lens: &[usize],
    seed: u64,
    legs: &[Leg],
) -> (
    Vec<Drawn>,
    MixtureState,
    Vec<pinring::source::Sampler<TokenShards>>,
) {
    let (_dir, sources) = sources(lens);
    let mut state: Option<MixtureState> = None;
    let mut all = Vec::new();
    for &(world, batch, steps, w) in legs {
        let ranks: Vec<Mixture<TokenShards>> = (0..world)
            .map(|r| {
                Mixture::builder(sources.clone())
                    .weights(WEIGHTS[w])
                    .seed(seed)
                    .shard(r, world)
                    .batch_size(batch)
                    .build()
                    .unwrap()
            })
            .collect();
        // New weights at the resume point: asked for explicitly.
        let from = state.as_ref().map(|s| ranks[0].reweight(s).unwrap());
        let mut saved = Vec::new();
        for mix in &ranks {
            let run = match &from {
                Some(s) => mix.iter_from(s).unwrap(),
                None => mix.iter(),
            };
            let got: Vec<Drawn> = run.take((steps * batch) as usize).map(drawn).collect();
            assert_eq!(got.len() as u64, steps * batch, "a rank ran short");
            all.extend(got);
            saved.push(mix.checkpoint_after(from.as_ref(), steps * batch).unwrap());
        }
        let merged = MixtureState::merge(&saved).unwrap();
        // The text form round-trips, as a saved state would.
        state = Some(MixtureState::from_text(&merged.to_text()).unwrap());
    }
    (all, state.unwrap(), sources)
}

fn legs() -> impl Strategy<Value = Vec<Leg>> {
    proptest::collection::vec((1u64..4, 1u64..5, 0u64..6, 0usize..4), 1..5)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_position_once_and_each_source_walks_its_own_order(
        legs in legs(),
        seed in prop_oneof![Just(0u64), any::<u64>()],
    ) {
        let lens = [20 * 8 + 1, 7 * 8 + 1, 13 * 8 + 1]; // 20, 7 and 13 windows an epoch
        let (all, state, sources) = chain(&lens, seed, &legs);
        let total: u64 = legs.iter().map(|&(w, b, k, _)| w * b * k).sum();
        prop_assert_eq!(state.consumed, total);
        prop_assert_eq!(all.len() as u64, total);
        // Each source's samples: its own walk's first ones, each once.
        let mut by_source: BTreeMap<u16, Vec<(u64, u64)>> = BTreeMap::new();
        for &(s, epoch, id, _) in &all {
            by_source.entry(s).or_default().push((epoch, id));
        }
        for (s, source) in sources.iter().enumerate() {
            let c = &state.sources[s];
            let count = c.epoch * c.windows + c.consumed;
            let mut got = by_source.remove(&(s as u16)).unwrap_or_default();
            let mut want = own_walk(source, seed, count);
            got.sort_unstable();
            want.sort_unstable();
            prop_assert_eq!(got, want, "source {}", s);
        }
        // Steps: every leg's steps number on from the one before.
        let steps: u64 = legs.iter().map(|&(_, _, k, _)| k).sum();
        prop_assert_eq!(state.step, steps);
    }
}

#[test]
fn a_state_resumes_exactly_as_the_run_went_on() {
    // Same world size and batch size: the resumed run is the uninterrupted one.
    let (_dir, sources) = sources(&[81, 57, 105]);
    let mix = |rank| {
        Mixture::builder(sources.clone())
            .weights([3.0, 1.0, 2.0])
            .seed(7)
            .shard(rank, 2)
            .batch_size(3)
            .build()
            .unwrap()
    };
    for rank in 0..2 {
        let whole: Vec<Drawn> = mix(rank).iter().take(60).map(drawn).collect();
        let state = mix(rank).checkpoint_after(None, 21).unwrap();
        let rest: Vec<Drawn> = mix(rank)
            .iter_from(&state)
            .unwrap()
            .take(39)
            .map(drawn)
            .collect();
        assert_eq!(rest, whole[21..]);
        // And from a state made after a resume.
        let later = mix(rank).checkpoint_after(Some(&state), 9).unwrap();
        let rest: Vec<Drawn> = mix(rank)
            .iter_from(&later)
            .unwrap()
            .take(30)
            .map(drawn)
            .collect();
        assert_eq!(rest, whole[30..]);
        // Mid-step (a sample into step 7): the same samples on (a resumed run numbers its
        // steps from the state's, so only the step labels differ).
        let mid = mix(rank).checkpoint_after(None, 22).unwrap();
        assert_eq!((mid.consumed, mid.step), (7 * 6 + 2, 7));
        let rest: Vec<(u16, u64, u64)> = mix(rank)
            .iter_from(&mid)
            .unwrap()
            .take(38)
            .map(|s| {
                let d = drawn(s);
                (d.0, d.1, d.2)
            })
            .collect();
        let want: Vec<(u16, u64, u64)> = whole[22..].iter().map(|d| (d.0, d.1, d.2)).collect();
        assert_eq!(rest, want);
    }
}

#[test]
fn weights_history_reproduces_a_run() {
    let (_dir, sources) = sources(&[161, 57, 105]);
    let build = |w: [f64; 3]| {
        Mixture::builder(sources.clone())
            .weights(w)
            .batch_size(4)
            .build()
            .unwrap()
    };
    let (a, b) = (build([0.6, 0.2, 0.2]), build([0.1, 0.1, 0.8]));
    let saved = a.checkpoint_after(None, 40).unwrap();
    let switched = b.reweight(&saved).unwrap();
    let later = b.checkpoint_after(Some(&switched), 40).unwrap();
    assert_eq!(later.weights.len(), 2);
    // The shares after the switch follow the new weights, counted from the switch.
    let since: Vec<u64> = (0..3)
        .map(|s| {
            let c = &later.sources[s];
            c.epoch * c.windows + c.consumed - later.weights[1].counts[s]
        })
        .collect();
    for (s, &n) in since.iter().enumerate() {
        assert!((n as f64 - b.shares()[s] * 40.0).abs() < 1.0, "{since:?}");
    }
    // Resuming the later state needs the mixture of the weights in force, and goes on
    // as the run went on.
    let went_on: Vec<Drawn> = b
        .iter_from(&switched)
        .unwrap()
        .take(60)
        .map(drawn)
        .collect();
    let resumed: Vec<Drawn> = b.iter_from(&later).unwrap().take(20).map(drawn).collect();
    assert_eq!(resumed, went_on[40..]);
    match a.iter_from(&later) {
        Err(Error::Source(e)) => {
            let text = e.to_string();
            assert!(text.contains("the weights"), "{text}");
            assert!(text.contains("Mixture::reweight"), "{text}");
        }
        other => panic!("{other:?}"),
    }
    // Reweighting to the weights in force changes nothing.
    assert_eq!(b.reweight(&later).unwrap(), later);
}

#[test]
fn merge_refuses_ranks_that_disagree() {
    let (_dir, sources) = sources(&[81, 57]);
    let on = |rank| {
        Mixture::builder(sources.clone())
            .shard(rank, 2)
            .batch_size(2)
            .build()
            .unwrap()
    };
    let (a, b) = (
        on(0).checkpoint_after(None, 4).unwrap(),
        on(1).checkpoint_after(None, 6).unwrap(),
    );
    assert!(matches!(
        MixtureState::merge(&[a.clone(), b]),
        Err(Error::Source(
            pinring::source::SourceError::UnequalRanks { .. }
        ))
    ));
    let other_seed = Mixture::builder(sources.clone())
        .seed(5)
        .shard(1, 2)
        .batch_size(2)
        .build()
        .unwrap()
        .checkpoint_after(None, 4)
        .unwrap();
    let err = MixtureState::merge(&[a.clone(), other_seed]).unwrap_err();
    assert!(
        err.to_string().contains("the seed (rank 1 against rank 0)"),
        "{err}"
    );
    assert!(MixtureState::<Checkpoint>::merge(&[]).is_err());
    assert_eq!(MixtureState::merge(&[a.clone(), a.clone()]).unwrap(), a);
}

/// Issue 28: states of two different runs name what differs — the seed, a source's own
/// run — before the counts are compared (as the windows and Documents merges do), also
/// when the runs stand at different counts; ranks of one run at different counts are
/// still `UnequalRanks`.
#[test]
fn merge_names_what_differs_between_two_runs_before_their_counts() {
    use pinring::source::SourceError;
    let (_dir, sources) = sources(&[81, 57]);
    let mixture = |sources: Vec<pinring::source::Sampler<TokenShards>>, seed, rank| {
        Mixture::builder(sources)
            .seed(seed)
            .shard(rank, 2)
            .batch_size(2)
            .build()
            .unwrap()
    };
    let a = mixture(sources.clone(), 0, 0)
        .checkpoint_after(None, 4)
        .unwrap();
    let other_seed = mixture(sources.clone(), 5, 1)
        .checkpoint_after(None, 6)
        .unwrap();
    let err = MixtureState::merge(&[a.clone(), other_seed]).unwrap_err();
    assert!(
        matches!(&err, Error::Source(SourceError::MixtureMismatch { what, saved, here })
            if what == "the seed (rank 1 against rank 0)" && saved == "0" && here == "5"),
        "{err}"
    );
    // Another source (the second one cut at another stride).
    let mut others = sources.clone();
    others[1] = others[1].to_builder().stride(5).build().unwrap();
    let other_source = mixture(others, 0, 1).checkpoint_after(None, 6).unwrap();
    let err = MixtureState::merge(&[a.clone(), other_source]).unwrap_err();
    assert!(
        matches!(&err, Error::Source(SourceError::MixtureMismatch { what, .. })
            if what.contains("of source 1") && what.contains("(rank 1 against rank 0)")),
        "{err}"
    );
    let same_run_later = mixture(sources, 0, 1).checkpoint_after(None, 6).unwrap();
    assert!(matches!(
        MixtureState::merge(&[a, same_run_later]),
        Err(Error::Source(SourceError::UnequalRanks { .. }))
    ));
}
