//! The run's settings a loader refuses, each a `ConfigError::Run` naming the setting.

use pinring::source::{Mixture, Order};
use pinring::{ConfigError, Error, Loader};

use crate::helpers::{documents, shards, windows};

/// The setting a refused build names.
fn refused<T: std::fmt::Debug>(built: Result<T, Error>) -> (&'static str, String) {
    match built {
        Err(Error::Config(e @ ConfigError::Run { .. })) => (e.field(), e.to_string()),
        other => panic!("not a ConfigError::Run: {other:?}"),
    }
}

#[test]
fn a_source_that_sets_part_of_the_run_is_refused_naming_it() {
    let (_dir, paths) = shards(&[3000]);
    let src = windows(&paths, 9, Order::Sequential);
    let batched = src.to_builder().batch_size(8).build().unwrap();
    let (field, text) = refused(Loader::builder(batched).batch_size(8).build());
    assert_eq!(field, "batch_size");
    assert!(text.contains("Loader owns its run"), "{text}");
    let sharded = src.to_builder().shard(1, 2).build().unwrap();
    assert_eq!(
        refused(Loader::builder(sharded).batch_size(8).build()).0,
        "rank"
    );
}

#[test]
fn windows_need_a_batch_size_and_documents_refuse_one() {
    let (_dir, paths) = shards(&[8000]);
    let src = windows(&paths, 9, Order::Sequential);
    assert_eq!(refused(Loader::builder(src).build()).0, "batch_size");
    let docs = documents(&paths, 256, 128, false);
    assert_eq!(
        refused(Loader::builder(docs.clone()).batch_size(4).build()).0,
        "batch_size"
    );
    assert_eq!(
        refused(Loader::builder(docs).drop_last(true).build()).0,
        "drop_last"
    );
}

#[test]
fn a_mixture_refuses_epochs() {
    let (_dir, paths) = shards(&[3000, 3000]);
    let sources: Vec<_> = paths
        .iter()
        .map(|p| windows(std::slice::from_ref(p), 9, Order::Sequential))
        .collect();
    let mix = Mixture::builder(sources).build().unwrap();
    assert_eq!(
        refused(Loader::builder(mix).batch_size(2).epochs(1).build()).0,
        "epochs"
    );
}

#[test]
fn a_start_step_past_the_end_of_a_capped_run_says_how_many_steps_it_has() {
    let (_dir, paths) = shards(&[5000]);
    let src = windows(&paths, 65, Order::Sequential);
    let (field, text) = refused(
        Loader::builder(src.clone())
            .batch_size(1)
            .epochs(1)
            .start_step(1000)
            .build(),
    );
    assert_eq!(field, "start_step");
    assert!(
        text.contains("its 1 epoch(s) of 78 steps each end at step 78"),
        "{text}"
    );
    // Inside the run it begins there.
    let mut loader = Loader::builder(src)
        .batch_size(1)
        .epochs(1)
        .start_step(77)
        .build()
        .unwrap();
    assert_eq!(loader.pop().unwrap().unwrap().step(), Some(77));
    assert!(loader.pop().unwrap().is_none());
    let docs = documents(&paths, 256, 128, false);
    assert_eq!(
        refused(Loader::builder(docs).epochs(1).start_step(100_000).build()).0,
        "start_step"
    );
}

#[test]
fn a_state_of_another_kind_is_a_mismatch() {
    let (_dir, paths) = shards(&[8000]);
    let src = windows(&paths, 9, Order::Sequential);
    let mut loader = Loader::builder(src).batch_size(2).build().unwrap();
    loader.pop().unwrap();
    let state = loader.state();
    let docs = documents(&paths, 256, 128, false);
    let e = Loader::builder(docs)
        .resume(&state)
        .build()
        .unwrap_err()
        .to_string();
    assert!(e.contains("kind of source"), "{e}");
}
