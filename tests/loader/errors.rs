//! The run's settings a loader refuses, each a `ConfigError::Run` naming the setting.

use pinring::source::{Mixture, Order};
use pinring::{ConfigError, Error, Loader};

use crate::helpers::{documents, shards, windows, windows_per_shard};

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
    let sources = windows_per_shard(&paths, 9, |_| Order::Sequential);
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

#[test]
fn a_start_step_past_a_mixtures_stop_or_a_documents_cap_says_how_many_steps_the_run_has() {
    let (_dir, paths) = shards(&[3000, 2000]);
    let parts = [
        windows(&paths[..1], 9, Order::Shuffled { seed: 1 }),
        windows(&paths[1..], 9, Order::Shuffled { seed: 2 }),
    ];
    let mix = || {
        Mixture::builder(parts.clone())
            .stop(pinring::source::Stop::First)
            .build()
            .unwrap()
    };
    let n = crate::helpers::pop_all(&mut Loader::builder(mix()).batch_size(4).build().unwrap())
        .len() as u64;
    let (field, text) = refused(Loader::builder(mix()).batch_size(4).start_step(n).build());
    assert_eq!(field, "start_step");
    let want = format!(
        "its stop rule (stop=\"first\") gives it {n} steps (0 to {})",
        n - 1
    );
    assert!(text.contains(&want), "{text}");
    // The last step itself begins the run; a mixture without a stop rule has no end.
    let mut last = Loader::builder(mix())
        .batch_size(4)
        .start_step(n - 1)
        .build()
        .unwrap();
    assert_eq!(crate::helpers::pop_all(&mut last).len(), 1);
    let endless = Mixture::builder(parts.clone()).build().unwrap();
    assert!(Loader::builder(endless)
        .batch_size(4)
        .start_step(10 * n)
        .build()
        .is_ok());
    // Packed documents capped by epochs: walked to, the end said in steps.
    let docs = || documents(&paths, 256, 128, false);
    let steps = crate::helpers::pop_all(&mut Loader::builder(docs()).epochs(1).build().unwrap())
        .len() as u64;
    let (_, text) = refused(
        Loader::builder(docs())
            .epochs(1)
            .start_step(steps + 40)
            .build(),
    );
    assert!(
        text.contains(&format!("epochs=1 gives it {steps} steps")),
        "{text}"
    );
    assert!(Loader::builder(docs())
        .epochs(1)
        .start_step(steps - 1)
        .build()
        .is_ok());
}

#[test]
fn a_state_read_from_plain_data_names_what_is_wrong_in_its_words() {
    let (_dir, paths) = shards(&[2000]);
    let src = windows(&paths, 9, Order::Sequential);
    let mut loader = Loader::builder(src).batch_size(2).build().unwrap();
    loader.pop().unwrap();
    let value = loader.state().to_value();
    let keys: Vec<&String> = value.as_object().unwrap().keys().collect();
    // The record's own order, "kind" before "step".
    assert_eq!(keys.first().map(|k| k.as_str()), Some("version"));
    assert_eq!(keys[keys.len() - 3..], ["kind", "step", "skip"]);
    let refused = |change: &dyn Fn(&mut serde_json::Map<String, serde_json::Value>)| {
        let mut v = value.clone();
        change(v.as_object_mut().unwrap());
        pinring::State::from_value(v).unwrap_err().to_string()
    };
    let e = refused(&|m| {
        m.remove("consumed");
    });
    assert!(e.contains("the key \"consumed\" is missing"), "{e}");
    let e = refused(&|m| {
        m.insert("extra".into(), 1.into());
    });
    assert!(e.contains("unknown key \"extra\""), "{e}");
    let e = refused(&|m| {
        m.insert("skip".into(), serde_json::json!([[5, 3, 1]]));
    });
    assert!(e.contains("state[\"skip\"][0]"), "{e}");
    let e = refused(&|m| {
        m.insert("step".into(), (-1).into());
    });
    assert!(
        e.contains("state[\"step\"] must be an int in 0..2**64"),
        "{e}"
    );
    let e = refused(&|m| {
        m.remove("contents");
        m.insert("version".into(), 2.into());
    });
    assert!(
        e.contains("a TokenWindows or FixedRecords state of version 2, which this build (version 3) cannot read"),
        "{e}"
    );
}
