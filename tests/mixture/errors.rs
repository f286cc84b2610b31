//! Bad input, each a clear error naming what is wrong: weights, sources that cannot be
//! mixed, settings that belong to the mixture, steps without a batch size, and states
//! that do not fit.

use pinring::source::{
    FixedRecords, Mixture, MixtureProblem, MixtureState, Order, Sampler, SourceError, TokenShards,
};
use pinring::Error;
use tempfile::TempDir;

use crate::helpers::{shard_files, source, sources};
use crate::problem::mixture_problem;

/// The mixture problem `b` is refused with, its text and its field.
fn problem<S: pinring::source::Segmented + Clone>(
    b: pinring::source::MixtureBuilder<S>,
) -> (MixtureProblem, String, &'static str) {
    mixture_problem(b.build())
}

#[test]
fn bad_weights_are_config_errors_naming_the_weight() {
    let (_dir, s) = sources(&[161, 57]);
    let mix = || Mixture::builder(s.clone());
    let (p, text, field) = problem(mix().weights([0.5, -0.1]));
    assert_eq!(
        p,
        MixtureProblem::BadWeight {
            index: 1,
            weight: -0.1
        }
    );
    assert_eq!(field, "weights");
    assert_eq!(
        text,
        "bad mixture: weight 1 is -0.1: weights must be finite and at least 0"
    );
    let (p, _, _) = problem(mix().weights([f64::NAN, 1.0]));
    assert!(matches!(p, MixtureProblem::BadWeight { index: 0, weight } if weight.is_nan()));
    let (p, _, _) = problem(mix().weights([1.0, f64::INFINITY]));
    assert!(matches!(p, MixtureProblem::BadWeight { index: 1, .. }));
    let (p, text, _) = problem(mix().weights([0.0, 0.0]));
    assert_eq!(p, MixtureProblem::AllZero);
    assert!(text.contains("every weight is 0"), "{text}");
    let (p, text, _) = problem(mix().weights([1.0, 2.0, 3.0]));
    assert_eq!(
        p,
        MixtureProblem::WeightCount {
            weights: 3,
            sources: 2
        }
    );
    assert!(text.contains("3 weight(s) for 2 source(s)"), "{text}");
    // Huge weights do not overflow their sum.
    assert!(mix().weights([f64::MAX, f64::MAX]).build().is_ok());
    let (p, _, field) = problem(Mixture::<TokenShards>::builder([]));
    assert_eq!((p, field), (MixtureProblem::NoSources, "sources"));
}

#[test]
fn sources_of_another_shape_are_config_errors() {
    let dir = TempDir::new().unwrap();
    let files = shard_files(&dir, &[161, 161]);
    let other_window = TokenShards::open([&files[1]])
        .unwrap()
        .windows(17)
        .build()
        .unwrap();
    let (p, text, field) = problem(Mixture::builder([source(&files[0], 1), other_window]));
    assert_eq!(
        p,
        MixtureProblem::Shape {
            index: 1,
            what: "window",
            first: 9,
            here: 17
        }
    );
    assert_eq!(field, "sources");
    assert!(
        text.contains("source 1's samples differ from source 0's: its window is 17"),
        "{text}"
    );
    // Records of another size (the same records per sample).
    let records = |bytes: usize, name: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, vec![0u8; 640]).unwrap();
        Sampler::builder(FixedRecords::open([path], bytes).unwrap())
            .build()
            .unwrap()
    };
    let (p, _, _) = problem(Mixture::builder([
        records(16, "a.rec"),
        records(32, "b.rec"),
    ]));
    assert_eq!(
        p,
        MixtureProblem::Shape {
            index: 1,
            what: "record size",
            first: 16,
            here: 32
        }
    );
}

#[test]
fn a_source_with_settings_of_the_mixture_is_a_config_error() {
    let (_dir, s) = sources(&[161, 57]);
    let with = |b: pinring::source::SamplerBuilder<TokenShards>| b.build().unwrap();
    let cases = [
        (with(s[1].to_builder().shard(0, 2)), "rank/world_size"),
        (with(s[1].to_builder().batch_size(2)), "batch_size"),
        (
            with(s[1].to_builder().batch_size(2).start_step(3)),
            "batch_size",
        ),
    ];
    for (bad, setting) in cases {
        let (p, text, _) = problem(Mixture::builder([s[0].clone(), bad]));
        assert_eq!(p, MixtureProblem::SourceSetting { index: 1, setting });
        assert!(
            text.contains(&format!("source 1 sets its own {setting}")),
            "{text}"
        );
        assert!(text.contains("set it on the Mixture"), "{text}");
    }
}

#[test]
fn steps_need_a_batch_size_and_ranges_must_be_ranges() {
    let (_dir, s) = sources(&[161]);
    let err = Mixture::builder(s.clone())
        .start_step(3)
        .build()
        .unwrap_err();
    assert_source_error!(err, SourceError::StepsNeedBatchSize("start_step"));
    assert_eq!(
        err.to_string(),
        "`start_step` needs a batch size: steps are the batches of a run (set batch_size)"
    );
    let err = s[0]
        .to_builder()
        .skip_steps([(1, 2), (3, 4)])
        .build()
        .unwrap_err();
    assert_source_error!(err, SourceError::StepsNeedBatchSize("skip_steps"));
    let err = Mixture::builder(s.clone())
        .batch_size(2)
        .skip_steps([(5, 2), (7, 9)])
        .build()
        .unwrap_err();
    assert_source_error!(err, SourceError::BadSkip { start: 5, end: 2 });
    let err = Mixture::builder(s.clone()).shard(2, 2).build().unwrap_err();
    assert_source_error!(
        err,
        SourceError::BadRank {
            rank: 2,
            world_size: 2
        }
    );
    let err = Mixture::builder(s).batch_size(0).build().unwrap_err();
    assert_source_error!(err, SourceError::Zero("batch_size"));
}

#[test]
fn a_state_of_another_mixture_is_refused_by_name() {
    let (_dir, s) = sources(&[161, 57]);
    let mix = Mixture::builder(s.clone())
        .weights([1.0, 2.0])
        .batch_size(2)
        .build()
        .unwrap();
    let state = mix.checkpoint_after(None, 10).unwrap();
    let refused = |other: &Mixture<TokenShards>| match other.iter_from(&state) {
        Err(e) => e.to_string(),
        Ok(_) => panic!("resumed a state of another mixture"),
    };
    let text = refused(&mix.to_builder().seed(9).build().unwrap());
    assert!(
        text.contains("the seed is 0 in the state but 9 here"),
        "{text}"
    );
    let text = refused(
        &mix.to_builder()
            .stop(pinring::source::Stop::All)
            .build()
            .unwrap(),
    );
    assert!(text.contains("the stop rule"), "{text}");
    let text = refused(
        &Mixture::builder([s[0].clone()])
            .batch_size(2)
            .build()
            .unwrap(),
    );
    assert!(
        text.contains("the number of sources is 2 in the state but 1 here"),
        "{text}"
    );
    // A source of another order: refused as that source refuses its checkpoints.
    let reordered = s[1].to_builder().order(Order::Sequential).build().unwrap();
    let other = Mixture::builder([s[0].clone(), reordered])
        .weights([1.0, 2.0])
        .batch_size(2)
        .build()
        .unwrap();
    let text = refused(&other);
    assert!(text.contains("source 1's the order"), "{text}");
    // Counts that do not add up: a state edited by hand.
    let mut edited = state.clone();
    edited.consumed += 1;
    assert!(matches!(
        mix.iter_from(&edited),
        Err(Error::Source(SourceError::BadCheckpointText {
            line: 0,
            ..
        }))
    ));
    // Bad text names its line.
    let text = state
        .to_text()
        .replace("\"stop\": \"never\"", "\"stop\": \"sometimes\"");
    match MixtureState::<pinring::source::Checkpoint>::from_text(&text) {
        Err(Error::Source(SourceError::BadCheckpointText { line, why, .. })) => {
            assert_eq!(line, 4, "{why}");
            assert!(why.contains("unknown variant `sometimes`"), "{why}");
        }
        other => panic!("{other:?}"),
    }
}
