//! Bad input to a mixture of documents, each a clear error naming what is wrong: sources
//! that set what belongs to the mixture, sources of another token width or bos, weights,
//! sizes, ranks, a source without documents, too many documents for a step, and states
//! that do not fit.

use pinring::source::{
    write_shard_u32, DocumentMixtureBuilder, Documents, DocumentsCheckpoint, Mixture,
    MixtureProblem, MixtureState, Packing, SourceError, TokenShards, TokenType,
};
use pinring::Error;

use super::data::{Data, ModelOrder};
use super::helpers::{doc_lens, shard, sources_of, Written, BOS};
use crate::problem::mixture_problem;

fn written() -> Written {
    let sources = sources_of(2, |s| {
        let lens = doc_lens(30, 3, s, 17);
        (vec![shard(0, &lens, s as u32)], ModelOrder::Sequential)
    });
    Written::new(&sources, 0)
}

fn sized(b: DocumentMixtureBuilder) -> DocumentMixtureBuilder {
    b.tokens_per_batch(16).max_seq_len(8)
}

/// The mixture problem `b` is refused with, its text and its field.
fn problem(b: DocumentMixtureBuilder) -> (MixtureProblem, String, &'static str) {
    mixture_problem(b.build())
}

#[test]
fn a_source_that_sets_what_belongs_to_the_mixture_is_a_config_error() {
    let w = written();
    type Set = fn(pinring::source::DocumentsBuilder) -> pinring::source::DocumentsBuilder;
    let cases: [(Set, &str); 9] = [
        (|b| b.shard(1, 2), "rank/world_size"),
        (|b| b.tokens_per_batch(16), "tokens_per_batch"),
        (|b| b.max_seq_len(8), "max_seq_len"),
        (|b| b.max_docs(9), "max_docs"),
        (|b| b.schedule(vec![(3, 8, 8)]), "schedule"),
        (|b| b.token_type(TokenType::I32), "token_type"),
        (|b| b.positions(false), "positions"),
        (|b| b.start_step(4), "start_step"),
        (|b| b.skip_steps([(1, 2)]), "skip_steps"),
    ];
    for (set, setting) in cases {
        let (p, text, field) = problem(sized(Mixture::documents([w.source(0), set(w.source(1))])));
        assert_eq!(p, MixtureProblem::SourceSetting { index: 1, setting });
        assert_eq!(field, "sources");
        assert!(
            text.contains(&format!("source 1 sets its own {setting}"))
                && text.contains("set it on the Mixture"),
            "{text}"
        );
    }
    // Packing given whole is refused the same, naming its first field set.
    let packed = |b: pinring::source::DocumentsBuilder| {
        b.packing(Packing {
            max_docs: Some(9),
            positions: Some(true),
            ..Packing::default()
        })
    };
    let (p, _, _) = problem(sized(Mixture::documents([
        w.source(0),
        packed(w.source(1)),
    ])));
    assert_eq!(
        p,
        MixtureProblem::SourceSetting {
            index: 1,
            setting: "max_docs"
        }
    );
    // A shard or a shard's cache, bos and order belong to the source.
    let ok = Mixture::documents([
        w.source(0).bos(BOS).index_cache(w.dir.path().join("cache")),
        w.source(1),
    ]);
    assert!(sized(ok).build().is_ok());
}

#[test]
fn sources_of_another_token_width_or_bos_are_config_errors() {
    let w = written();
    let wide = w.dir.path().join("wide.bin");
    write_shard_u32(&wide, &shard(0, &[5, 9, 3], 1)).unwrap();
    let u32_source = Documents::builder(TokenShards::open([&wide]).unwrap()).bos(BOS);
    let (p, text, _) = problem(sized(Mixture::documents([w.source(0), u32_source])));
    assert_eq!(
        p,
        MixtureProblem::Shape {
            index: 1,
            what: "token width",
            first: 2,
            here: 4
        }
    );
    assert!(
        text.contains("its token width is 4, source 0's is 2"),
        "{text}"
    );
    let (p, text, _) = problem(sized(Mixture::documents([w.source(0), w.source(1).bos(7)])));
    assert_eq!(
        p,
        MixtureProblem::Shape {
            index: 1,
            what: "bos",
            first: u64::from(BOS),
            here: 7
        }
    );
    assert!(text.contains("its bos is 7, source 0's is 50256"), "{text}");
    // A mixture of windows and documents does not compile: one Vec holds one kind (see the
    // compile_fail example of `Mixable`).
}

#[test]
fn weights_sizes_and_ranks_are_checked() {
    let w = written();
    let mix = || sized(Mixture::documents([w.source(0), w.source(1)]));
    let (p, _, field) = problem(mix().weights([1.0]));
    assert_eq!(
        (p, field),
        (
            MixtureProblem::WeightCount {
                weights: 1,
                sources: 2
            },
            "weights"
        )
    );
    let (p, _, _) = problem(mix().weights([0.0, 0.0]));
    assert_eq!(p, MixtureProblem::AllZero);
    let (p, _, _) = problem(mix().weights([1.0, -2.0]));
    assert!(matches!(p, MixtureProblem::BadWeight { index: 1, .. }));
    let (p, _, _) = problem(Mixture::documents([]));
    assert_eq!(p, MixtureProblem::NoSources);
    let source = |e| match e {
        Err(Error::Source(e)) => e,
        other => panic!("expected a source error, got {other:?}"),
    };
    let e = source(Mixture::documents([w.source(0)]).max_seq_len(8).build());
    assert!(matches!(e, SourceError::Zero("tokens_per_batch")), "{e}");
    let e = source(mix().shard(0, 0).build());
    assert!(matches!(e, SourceError::Zero("world_size")), "{e}");
    let e = source(mix().shard(2, 2).build());
    assert!(
        matches!(
            e,
            SourceError::BadRank {
                rank: 2,
                world_size: 2
            }
        ),
        "{e}"
    );
    let e = source(mix().schedule(vec![(4, 8, 8), (4, 9, 9)]).build());
    assert!(
        matches!(
            e,
            SourceError::BadSchedule {
                index: 1,
                from_step: 4,
                ..
            }
        ),
        "{e}"
    );
    let e = source(mix().skip_steps([(5, 3)]).build());
    assert!(
        matches!(e, SourceError::BadSkip { start: 5, end: 3 }),
        "{e}"
    );
    let e = source(mix().max_docs(0).build());
    assert!(matches!(e, SourceError::Zero("max_docs")), "{e}");
    // A token type too narrow for a source's shards names the shard.
    let wide = w.dir.path().join("wide.bin");
    write_shard_u32(&wide, &shard(0, &[5, 9, 3], 1)).unwrap();
    let u32_source = || Documents::builder(TokenShards::open([&wide]).unwrap()).bos(BOS);
    let e = source(
        sized(Mixture::documents([u32_source()]))
            .token_type(TokenType::U16)
            .build(),
    );
    assert!(e.to_string().contains("wide.bin"), "{e}");
}

#[test]
fn a_source_without_documents_names_its_shard() {
    let w = written();
    let none = w.dir.path().join("none.bin");
    pinring::source::write_shard(&none, &[1, 2, 3, 4]).unwrap();
    let e = sized(Mixture::documents([
        w.source(0),
        Documents::builder(TokenShards::open([&none]).unwrap()),
    ]))
    .build()
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("none.bin") && text.contains("holds no bos token 50256"),
        "{text}"
    );
}

#[test]
fn a_step_with_too_many_documents_fails_at_that_step_after_the_ones_before() {
    // Source 1's documents are of 1 token from its 31st document on: a rank of 16 + 1
    // tokens then needs up to 17 documents, past max_docs 9 - 1.
    let mut lens: Vec<usize> = vec![8; 30];
    lens.extend([1; 200]);
    let sources = vec![(
        Data {
            shards: vec![shard(0, &lens, 0)],
            bos: BOS,
        },
        ModelOrder::Sequential,
    )];
    let w = Written::new(&sources, 0);
    let mix = sized(Mixture::documents([w.source(0)]))
        .max_docs(9)
        .build()
        .unwrap();
    let steps: Vec<_> = mix.iter().collect();
    // 30 documents of 8 tokens: steps 0..=13 fit (3 documents a step); the one that reaches
    // the short ones does not.
    let last = steps.last().unwrap();
    let Some(SourceError::TooManyDocuments {
        step,
        needed,
        max_docs: 9,
        ..
    }) = last.error()
    else {
        panic!("{last:?}")
    };
    assert!(*needed > 8);
    assert!(steps[..steps.len() - 1].iter().all(|s| s.error().is_none()));
    assert_eq!(steps.len() as u64, step + 1);
    // Through a pipeline: pop reports it after the steps before it.
    let config = mix.config().decode_threads(1).build().unwrap();
    let mut pipeline = pinring::Pipeline::new(config, mix.decoder(), mix.iter()).unwrap();
    let mut popped = 0;
    let err = loop {
        match pipeline.pop() {
            Ok(Some(b)) => {
                popped += 1;
                b.release(pinring::Fence::Sync).unwrap();
            }
            Ok(None) => panic!("the run ended without the error"),
            Err(e) => break e,
        }
    };
    assert_eq!(popped, *step);
    assert!(err.to_string().contains("raise max_docs"), "{err}");
    // A state past it is the same error.
    let e = mix.checkpoint_after(None, step + 1).unwrap_err();
    assert_source_error!(e, SourceError::TooManyDocuments { .. });
}

#[test]
fn states_that_do_not_fit_are_refused_by_name() {
    let w = written();
    let mix = |seed: u64| {
        sized(Mixture::documents([w.source(0), w.source(1)]))
            .seed(seed)
            .weights([1.0, 2.0])
            .build()
            .unwrap()
    };
    let state = mix(0).checkpoint_after(None, 3).unwrap();
    assert!(mix(0).check_state(&state).is_ok());
    let e = mix(1).check_state(&state).unwrap_err();
    assert!(
        e.to_string()
            .contains("the seed is 0 in the state but 1 here"),
        "{e}"
    );
    // New weights: refused unless asked for.
    let other = sized(Mixture::documents([w.source(0), w.source(1)]))
        .weights([1.0, 1.0])
        .build()
        .unwrap();
    let e = other.iter_from(&state).unwrap_err();
    assert!(e.to_string().contains("Mixture::reweight"), "{e}");
    assert!(other.iter_from(&other.reweight(&state).unwrap()).is_ok());
    // Another schedule: source 0's schedule differs.
    let e = sized(Mixture::documents([w.source(0), w.source(1)]))
        .weights([1.0, 2.0])
        .schedule(vec![(2, 30, 8)])
        .build()
        .unwrap()
        .check_state(&state)
        .unwrap_err();
    assert!(e.to_string().contains("source 0's the schedule"), "{e}");
    // Sources swapped: another dataset.
    let e = sized(Mixture::documents([w.source(1), w.source(0)]))
        .weights([1.0, 2.0])
        .build()
        .unwrap()
        .check_state(&state)
        .unwrap_err();
    assert_source_error!(e, SourceError::DocumentsCheckpointMismatch { .. });
    assert!(e.to_string().contains("source 0's"), "{e}");
    // A source's part with skipped steps of its own: the mixture's are its state's.
    let mut own_skips = state.clone();
    own_skips.sources[1].skip = vec![(5, 6)];
    let e = mix(0).check_state(&own_skips).unwrap_err();
    assert!(
        e.to_string()
            .contains("source 1's skipped steps is [(5, 6)] in the checkpoint but none"),
        "{e}"
    );
    // A state with one source fewer.
    let mut short = state.clone();
    short.sources.pop();
    let e = mix(0).check_state(&short).unwrap_err();
    assert!(e.to_string().contains("the number of sources"), "{e}");
    // A window mixture's state does not read as one of documents.
    let text = state.to_text();
    assert!(MixtureState::<DocumentsCheckpoint>::from_text(&text).is_ok());
    let e = MixtureState::<pinring::source::Checkpoint>::from_text(&text).unwrap_err();
    assert_source_error!(e, SourceError::BadCheckpointText { .. });
}
