//! `start_step` and `skip_steps` for mixtures of documents, on every rank: a run from step
//! `k` is the uninterrupted run from `k`; skipped steps are exactly the ones left out (the
//! others keep their numbers and pieces); states record the skip, so a resume keeps
//! skipping; a state made after a skip resumes where the run was.

use pinring::source::{DocumentsCheckpoint, MixtureState};
use proptest::prelude::*;

use super::data::{Data, ModelOrder};
use super::helpers::{doc_lens, pieces, shard, source, sources_of, Written};
use super::model::ModelPiece;
use super::skips::{skipped, skips};

/// A step as (number, pieces).
type Got = (u64, Vec<ModelPiece>);

fn sources() -> impl Strategy<Value = Vec<(Data, ModelOrder)>> {
    prop::collection::vec(source(), 1..4)
}

fn run(
    written: &Written,
    rank: u64,
    world: u64,
    build: impl Fn(pinring::source::DocumentMixtureBuilder) -> pinring::source::DocumentMixtureBuilder,
    take: usize,
) -> Vec<Got> {
    let mix = build(written.mixture_of_rank(rank, world, (17, 11)))
        .build()
        .unwrap();
    mix.iter()
        .take(take)
        .map(|s| (s.step(), pieces(written, &s)))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn start_step_is_the_uninterrupted_run_from_there(
        sources in sources(),
        seed in any::<u64>(),
        world in 1u64..4,
        k in 0u64..40,
    ) {
        let written = Written::new(&sources, seed);
        for rank in 0..world {
            let whole = run(&written, rank, world, |b| b, k as usize + 5);
            let from_k = run(&written, rank, world, |b| b.start_step(k), 5);
            prop_assert_eq!(&from_k[..], &whole[k as usize..]);
        }
    }

    #[test]
    fn skip_steps_leaves_out_exactly_those_steps_and_resumes_keep_skipping(
        sources in sources(),
        seed in any::<u64>(),
        world in 1u64..4,
        skip in skips(),
        saved_after in 0u64..12,
    ) {
        let written = Written::new(&sources, seed);
        for rank in 0..world {
            let whole = run(&written, rank, world, |b| b, 45);
            let want: Vec<Got> = whole.into_iter().filter(|(k, _)| !skipped(*k, &skip)).take(12).collect();
            let got = run(&written, rank, world, |b| b.skip_steps(skip.clone()), 12);
            prop_assert_eq!(&got, &want);
            // A state after `saved_after` steps (all ranks alike) resumes the rest, skipping
            // on though the resumed mixture is not told.
            let mix = |r| written.mixture_of_rank(r, world, (17, 11));
            let states: Vec<MixtureState<DocumentsCheckpoint>> = (0..world)
                .map(|r| {
                    mix(r)
                        .skip_steps(skip.clone())
                        .build()
                        .unwrap()
                        .checkpoint_after(None, saved_after)
                        .unwrap()
                })
                .collect();
            let state = MixtureState::merge(&states).unwrap();
            prop_assert_eq!(state.skip.is_empty(), skip.iter().all(|&(a, b)| a == b));
            let resumed: Vec<Got> = mix(rank)
                .build()
                .unwrap()
                .iter_from(&state)
                .unwrap()
                .take(12 - saved_after as usize)
                .map(|s| (s.step(), pieces(&written, &s)))
                .collect();
            prop_assert_eq!(&resumed[..], &want[saved_after as usize..]);
        }
    }
}

#[test]
fn a_start_step_after_a_state_begins_there_and_one_before_it_is_passed() {
    let sources = sources_of(2, |s| {
        let lens = doc_lens(30, 5, s * 11, 19);
        (
            vec![shard(1, &lens, s as u32)],
            ModelOrder::Shuffled(s as u64 + 3),
        )
    });
    let written = Written::new(&sources, 1);
    let whole = run(&written, 1, 2, |b| b, 40);
    let mix = |r, k: Option<u64>| {
        let b = written.mixture_of_rank(r, 2, (17, 11));
        match k {
            Some(k) => b.start_step(k),
            None => b,
        }
        .build()
        .unwrap()
    };
    let state = MixtureState::merge(&[
        mix(0, None).checkpoint_after(None, 10).unwrap(),
        mix(1, None).checkpoint_after(None, 10).unwrap(),
    ])
    .unwrap();
    // Rank 1's first five steps from the state, with start_step `k`.
    let from_state = |k| -> Vec<Got> {
        mix(1, Some(k))
            .iter_from(&state)
            .unwrap()
            .take(5)
            .map(|s| (s.step(), pieces(&written, &s)))
            .collect()
    };
    // start_step 25 after a state at 10: the run begins at 25.
    assert_eq!(&from_state(25)[..], &whole[25..30]);
    // start_step 4, before the state: the state's step wins.
    assert_eq!(&from_state(4)[..], &whole[10..15]);
    // A state's step after popping n steps counts the steps begun after.
    let after = mix(0, Some(25)).checkpoint_after(None, 3).unwrap();
    assert_eq!(after.step, 28);
}

#[test]
fn a_packing_given_whole_packs_as_its_fields_set_one_by_one() {
    let sources = sources_of(2, |s| {
        let lens = doc_lens(40, 7, s * 5, 23);
        (
            vec![shard(2, &lens, s as u32)],
            ModelOrder::Shuffled(s as u64 + 1),
        )
    });
    let written = Written::new(&sources, 4);
    let packing = pinring::source::Packing {
        tokens_per_batch: 21,
        max_seq_len: 9,
        max_docs: Some(16),
        schedule: vec![(2, 15, 7)],
        token_type: Some(pinring::source::TokenType::U16),
        positions: Some(true),
    };
    let whole = written.mixture().packing(packing.clone()).build().unwrap();
    let by_fields = written
        .mixture()
        .tokens_per_batch(21)
        .max_seq_len(9)
        .max_docs(16)
        .schedule(vec![(2, 15, 7)])
        .token_type(pinring::source::TokenType::U16)
        .positions(true)
        .build()
        .unwrap();
    let steps = |mix: &pinring::source::Mixture<pinring::source::Documents>| -> Vec<Got> {
        mix.iter()
            .take(6)
            .map(|s| (s.step(), pieces(&written, &s)))
            .collect()
    };
    assert_eq!(steps(&whole), steps(&by_fields));
    assert_eq!(whole.fields(), by_fields.fields());
    assert_eq!(
        (whole.packing(), by_fields.packing()),
        (packing.clone(), packing)
    );
    // Built again from what it gives back (to_builder keeps it too): the same steps.
    let again = written.mixture().packing(whole.packing()).build().unwrap();
    assert_eq!(steps(&again), steps(&whole));
    assert_eq!(steps(&whole.to_builder().build().unwrap()), steps(&whole));
}
