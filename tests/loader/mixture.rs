//! A loader over a mixture of token windows: the state is the mixture's, its sources'
//! states inside; a resume on another world size continues the global sequence; new
//! weights from a saved point.

use pinring::source::{Mixture, Order};
use pinring::{Loader, State};

use crate::helpers::{pop, shards, windows_per_shard};

#[test]
fn a_mixture_state_resumes_the_global_sequence_on_another_world_size() {
    let (_dir, paths) = shards(&[5000, 3000, 2000]);
    let sources = windows_per_shard(&paths, 17, |i| Order::Shuffled { seed: i });
    let mix = Mixture::builder(sources)
        .weights([0.5, 0.3, 0.2])
        .build()
        .unwrap();
    let mut states = Vec::new();
    let mut first = Vec::new();
    for rank in 0..2 {
        let mut loader = Loader::builder(mix.clone())
            .batch_size(4)
            .rank(rank)
            .world_size(2)
            .build()
            .unwrap();
        first.push(pop(&mut loader, 5));
        states.push(loader.state());
    }
    let state = State::merge(&states).unwrap();
    let State::Mixture(m) = &state else {
        panic!("{state:?}")
    };
    assert_eq!((m.consumed, m.step), (2 * 4 * 5, 5));
    assert!(m.sources.iter().all(|s| matches!(s, State::Windows(_))));
    // On one rank, the resumed run is the uninterrupted one-rank run's from position 40.
    let mut one = Loader::builder(mix.clone()).batch_size(8).build().unwrap();
    let straight = pop(&mut one, 10);
    let mut resumed = Loader::builder(mix.clone())
        .batch_size(8)
        .resume(&state)
        .build()
        .unwrap();
    let next = pop(&mut resumed, 5);
    assert_eq!(next[0].0, Some(5));
    assert_eq!(
        next.iter().map(|g| &g.2).collect::<Vec<_>>(),
        straight[5..].iter().map(|g| &g.2).collect::<Vec<_>>()
    );
}

#[test]
fn new_weights_from_a_saved_state_are_recorded_in_the_next_state() {
    let (_dir, paths) = shards(&[4000, 4000]);
    let sources = windows_per_shard(&paths, 9, |_| Order::Sequential);
    let mix = Mixture::builder(sources)
        .weights([0.5, 0.5])
        .build()
        .unwrap();
    let mut loader = Loader::builder(mix.clone()).batch_size(4).build().unwrap();
    pop(&mut loader, 3);
    let saved = loader.state();
    let mut reweighted = Loader::builder(mix).batch_size(4).build().unwrap();
    reweighted.resume(&saved, Some(&[0.9, 0.1])).unwrap();
    pop(&mut reweighted, 2);
    let State::Mixture(m) = reweighted.state() else {
        panic!("a mixture's state")
    };
    assert_eq!(m.weights.len(), 2);
    assert_eq!(m.weights[1].weights, [0.9, 0.1]);
    assert_eq!(m.weights[1].from, 12);
}
