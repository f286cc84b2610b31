//! Exactly once across save → merge → resume chains: each leg runs on its own world size
//! (and maybe new weights); across the chain the ranks' pieces, step by step and rank by
//! rank, are the mixture's document sequence under the weights' history the state
//! records, each source's documents are the first ones of its own walk, each once, and
//! every rank ran the same steps.

use pinring::source::{DocumentsCheckpoint, MixtureState, Stop};
use proptest::prelude::*;

use super::data::{Data, ModelOrder, Span};
use super::helpers::{doc_lens, pieces, shard, sources_and, sources_of, weights, Written};
use super::model::ModelPiece;

/// One leg: world size, steps every rank runs, the weights.
type Leg = (u64, u64, Vec<f64>);

/// Runs `legs` over `written`'s sources (steps of `n` tokens cut at `msl`), each leg
/// resumed from the merged state of the one before (its new weights asked for with
/// `reweight`); returns the pieces in the order of the document sequence and the last
/// state.
fn chain(
    written: &Written,
    legs: &[Leg],
    (n, msl): (u64, u64),
) -> (Vec<ModelPiece>, MixtureState<DocumentsCheckpoint>) {
    let mut state: Option<MixtureState<DocumentsCheckpoint>> = None;
    let mut all = Vec::new();
    for (world, steps, weights) in legs {
        let ranks: Vec<_> = (0..*world)
            .map(|r| {
                written
                    .mixture_of_rank(r, *world, (n, msl))
                    .weights(weights.clone())
                    .build()
                    .unwrap()
            })
            .collect();
        let from = state.as_ref().map(|s| ranks[0].reweight(s).unwrap());
        let first = from.as_ref().map_or(0, |s| s.step);
        let mut got: Vec<Vec<Vec<ModelPiece>>> = Vec::new();
        let mut saved = Vec::new();
        for mix in &ranks {
            let run = match &from {
                Some(s) => mix.iter_from(s).unwrap(),
                None => mix.iter(),
            };
            let mine: Vec<Vec<ModelPiece>> = run
                .take(*steps as usize)
                .enumerate()
                .map(|(k, step)| {
                    assert_eq!(step.step(), first + k as u64, "steps number on");
                    pieces(written, &step)
                })
                .collect();
            assert_eq!(mine.len() as u64, *steps, "a rank ran short");
            got.push(mine);
            saved.push(mix.checkpoint_after(from.as_ref(), *steps).unwrap());
        }
        for k in 0..*steps as usize {
            for rank in &got {
                all.extend(rank[k].iter().copied());
            }
        }
        let merged = MixtureState::merge(&saved).unwrap();
        // The text form round-trips, as a saved state would.
        state = Some(MixtureState::from_text(&merged.to_text()).unwrap());
    }
    (all, state.unwrap())
}

/// Source `s`'s count of documents at its saved cursor, by the model.
fn count(data: &Data, order: ModelOrder, c: &DocumentsCheckpoint) -> u64 {
    let d: u64 = (0..data.shards.len())
        .map(|i| data.bos_idx(i).len() as u64)
        .sum();
    let within = match order {
        ModelOrder::Shuffled(_) => c.doc,
        ModelOrder::Sequential => {
            (0..c.shard as usize)
                .map(|i| data.bos_idx(i).len() as u64)
                .sum::<u64>()
                + c.doc
        }
    };
    c.epoch * d + within
}

fn legs(n: usize) -> impl Strategy<Value = Vec<Leg>> {
    prop::collection::vec((1u64..4, 0u64..5, weights(n)), 1..5)
}

fn mixed() -> impl Strategy<Value = (Vec<(Data, ModelOrder)>, Vec<Leg>)> {
    sources_and(legs)
}

/// Checks a chain's pieces against its last state and the model: the document sequence
/// under the recorded weights' history, each source's documents the first ones of its own
/// walk, each once, and the counts the state records.
fn check_chain(
    written: &mut Written,
    sources: &[(Data, ModelOrder)],
    legs: &[Leg],
    all: &[ModelPiece],
    state: &MixtureState<DocumentsCheckpoint>,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(state.consumed, all.len() as u64);
    prop_assert_eq!(state.step, legs.iter().map(|l| l.1).sum::<u64>());
    let history: Vec<(u64, Vec<f64>)> = state
        .weights
        .iter()
        .map(|s| (s.from, s.weights.clone()))
        .collect();
    let want = written.model.sequence(&history, Stop::Never, all.len());
    let got: Vec<u16> = all.iter().map(|p| p.0).collect();
    prop_assert_eq!(got, want.iter().map(|p| p.0).collect::<Vec<_>>());
    // Each source's pieces are its own walk's first documents, in order, each once: a piece
    // is its document's start, cut at most.
    for (s, (data, order)) in sources.iter().enumerate() {
        let mine: Vec<Span> = all
            .iter()
            .filter(|p| usize::from(p.0) == s)
            .map(|p| p.1)
            .collect();
        prop_assert_eq!(mine.len() as u64, count(data, *order, &state.sources[s]));
        for (n, piece) in mine.iter().enumerate() {
            let doc = written.model.doc(s, n as u64);
            prop_assert_eq!((piece.shard, piece.start), (doc.shard, doc.start));
            prop_assert!(piece.end <= doc.end && piece.end > piece.start);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_document_once_in_its_sources_order_across_resumes(
        (sources, legs) in mixed(),
        seed in prop_oneof![Just(0u64), any::<u64>()],
        sizes in (1u64..30, 1u64..40),
    ) {
        let mut written = Written::new(&sources, seed);
        let (all, state) = chain(&written, &legs, sizes);
        check_chain(&mut written, &sources, &legs, &all, &state)?;
    }
}

#[test]
fn two_ranks_then_three_then_one_with_new_weights() {
    let sources = sources_of(3, |s| {
        let lens = doc_lens(30, 11, s * 5, 29);
        let shards = vec![
            shard(1, &lens[..12], s as u32),
            shard(0, &lens[12..], s as u32 + 3),
        ];
        let order = if s == 0 {
            ModelOrder::Sequential
        } else {
            ModelOrder::Shuffled(s as u64)
        };
        (shards, order)
    });
    let mut written = Written::new(&sources, 11);
    let legs: Vec<Leg> = vec![
        (2, 7, vec![0.6, 0.3, 0.1]),
        (3, 5, vec![0.2, 0.2, 0.6]),
        (1, 9, vec![0.6, 0.3, 0.1]),
    ];
    let (all, state) = chain(&written, &legs, (20, 12));
    assert_eq!(state.weights.len(), 3, "{:?}", state.weights);
    assert_eq!(state.world_size, 1);
    check_chain(&mut written, &sources, &legs, &all, &state).unwrap();
    // Some source went into its second epoch: each epoch its own order, each document once
    // an epoch.
    assert!(
        state.sources.iter().any(|c| c.epoch > 0),
        "{:?}",
        state.sources
    );
}

#[test]
fn a_state_resumes_exactly_as_the_run_went_on() {
    // Same world size and weights: the resumed run is the uninterrupted one.
    let sources = sources_of(3, |s| {
        let lens = doc_lens(40, 7, s * 3, 23);
        let shards = vec![
            shard(2, &lens[..25], s as u32),
            shard(0, &lens[25..], s as u32 + 7),
        ];
        let order = if s == 1 {
            ModelOrder::Shuffled(5)
        } else {
            ModelOrder::Sequential
        };
        (shards, order)
    });
    let written = Written::new(&sources, 9);
    let rank = |r| {
        written
            .mixture_of_rank(r, 2, (24, 16))
            .weights([3.0, 1.0, 2.0])
            .build()
            .unwrap()
    };
    for r in 0..2 {
        let whole: Vec<Vec<ModelPiece>> = rank(r)
            .iter()
            .take(30)
            .map(|s| pieces(&written, &s))
            .collect();
        let mut resumed: Vec<Vec<ModelPiece>> = rank(r)
            .iter()
            .take(11)
            .map(|s| pieces(&written, &s))
            .collect();
        let state = MixtureState::merge(&[
            rank(0).checkpoint_after(None, 11).unwrap(),
            rank(1).checkpoint_after(None, 11).unwrap(),
        ])
        .unwrap();
        assert_eq!(state.step, 11);
        resumed.extend(
            rank(r)
                .iter_from(&state)
                .unwrap()
                .take(19)
                .map(|s| pieces(&written, &s)),
        );
        assert_eq!(resumed, whole, "rank {r}");
        // A state made from a state goes on the same way.
        let later = rank(r).checkpoint_after(Some(&state), 7).unwrap();
        assert_eq!(later, rank(r).checkpoint_after(None, 18).unwrap());
    }
}
