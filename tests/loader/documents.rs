//! A loader over packed documents and mixtures of them: a step a batch, states that are
//! the walk's checkpoints, resumes on another world size, epochs seen ahead.

use std::collections::BTreeSet;

use pinring::source::{Documents, Mixture};
use pinring::{Loader, State};

use crate::helpers::{documents, got, pop, pop_all, shards, Got};

/// The document ids (global offsets) a run's batches hold.
fn docs(batches: &[Got]) -> Vec<u64> {
    batches.iter().flat_map(|g| g.2.iter().copied()).collect()
}

#[test]
fn a_documents_state_is_the_walks_checkpoint_after_the_steps_popped() {
    let (_dir, paths) = shards(&[20_000, 15_000]);
    for shuffled in [false, true] {
        let src = documents(&paths, 512, 128, shuffled);
        let mut loader = Loader::builder(src.clone()).build().unwrap();
        assert_eq!(
            loader.state(),
            State::Documents(src.checkpoint_after(None, 0).unwrap())
        );
        for k in [1, 3, 7] {
            pop(&mut loader, k);
            let popped = loader.popped();
            let want = src.checkpoint_after(None, popped).unwrap();
            assert_eq!(
                loader.state(),
                State::Documents(want),
                "after {popped} steps"
            );
        }
    }
}

#[test]
fn documents_resume_on_another_world_size_use_each_document_at_most_once() {
    let (_dir, paths) = shards(&[30_000, 30_000]);
    let src = documents(&paths, 256, 256, false);
    let mut used = BTreeSet::new();
    let mut states = Vec::new();
    for rank in 0..2 {
        let mut loader = Loader::builder(src.clone())
            .rank(rank)
            .world_size(2)
            .build()
            .unwrap();
        for id in docs(&pop(&mut loader, 6)) {
            assert!(used.insert(id), "document {id} twice");
        }
        states.push(loader.state());
    }
    let state = State::merge(&states).unwrap();
    assert_eq!(state.step(), 6);
    for rank in 0..3 {
        let mut loader = Loader::builder(src.clone())
            .rank(rank)
            .world_size(3)
            .resume(&state)
            .epochs(1)
            .build()
            .unwrap();
        let batches = pop_all(&mut loader);
        assert_eq!(batches[0].0, Some(6));
        for g in &batches {
            for &id in &g.2 {
                // A document cut at a step's end shows again as the next step's first.
                let _ = used.insert(id);
            }
        }
    }
    assert!(used.len() > 100);
}

#[test]
fn epoch_iter_over_documents_is_one_epoch_and_the_batch_seen_ahead_is_not_counted() {
    let (_dir, paths) = shards(&[6_000]);
    let src = documents(&paths, 300, 300, false);
    let mut loader = Loader::builder(src).epochs(3).build().unwrap();
    let mut counts = Vec::new();
    for epoch in 0..3 {
        assert_eq!(loader.epoch_iter().epoch(), epoch.min(loader.epoch()));
        let batches: Vec<_> = loader.epoch_iter().map(|b| got(b.unwrap())).collect();
        assert!(batches.iter().all(|g| g.1 == epoch), "epoch {epoch}");
        counts.push(batches.len());
        // The first step of the next epoch was seen, not handed out: the state stands
        // at the epoch's end.
        assert_eq!(loader.state().step(), loader.popped());
    }
    assert!(
        counts.iter().all(|&n| n == counts[0] && n > 3),
        "{counts:?}"
    );
    assert!(loader.pop().unwrap().is_none());
}

#[test]
fn a_skipped_range_past_the_epoch_cap_ends_the_run() {
    let (_dir, paths) = shards(&[4_000]);
    let src = documents(&paths, 200, 200, false);
    let mut loader = Loader::builder(src)
        .epochs(1)
        .skip_steps(5..u64::MAX / 2)
        .build()
        .unwrap();
    let steps: Vec<_> = pop_all(&mut loader).iter().map(|g| g.0.unwrap()).collect();
    assert_eq!(steps, [0, 1, 2, 3, 4]);
}

#[test]
fn a_mixture_of_documents_resumes_and_its_state_holds_each_sources_state() {
    let (_dir, paths) = shards(&[20_000, 12_000]);
    let member = |p: &std::path::PathBuf| {
        Documents::builder(pinring::source::TokenShards::open([p]).unwrap())
            .bos(u32::from(crate::helpers::BOS))
    };
    let mix = Mixture::documents([member(&paths[0]), member(&paths[1])])
        .weights([0.7, 0.3])
        .tokens_per_batch(400)
        .max_seq_len(200)
        .build()
        .unwrap();
    let mut loader = Loader::builder(mix.clone()).build().unwrap();
    let first = pop(&mut loader, 4);
    let state = loader.state();
    let State::Mixture(m) = &state else {
        panic!("a mixture's state: {state:?}")
    };
    assert!(m.sources.iter().all(|s| matches!(s, State::Documents(_))));
    let mut straight = Loader::builder(mix.clone()).build().unwrap();
    let all = pop(&mut straight, 8);
    assert_eq!(all[..4], first[..]);
    let mut resumed = Loader::builder(mix).resume(&state).build().unwrap();
    assert_eq!(pop(&mut resumed, 4), all[4..]);
}
