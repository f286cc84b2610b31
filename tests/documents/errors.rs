//! Every bad input of the contract is the right error, naming what and where — never a
//! panic, never a silent truncation — from `build`, `pop` (after the steps before it) or
//! the checkpoint calls.

use std::path::{Path, PathBuf};

use pinring::source::{
    write_shard_u32, DocOrder, DocumentProblem, Documents, DocumentsCheckpoint, ShardFormat,
    ShardProblem, SourceError, TokenShards, TokenType,
};
use pinring::{Config, Error, Fence, Pipeline};

use crate::helpers::{assert_says, shard, write_shards, BOS};

fn docs(paths: &[PathBuf]) -> pinring::source::DocumentsBuilder {
    Documents::builder(TokenShards::open(paths).unwrap())
        .tokens_per_batch(19)
        .max_seq_len(64)
}

/// Pops every step; returns how many came before the error, and the error.
fn pop_until_error(docs: &Documents, limit: usize) -> (u64, Error) {
    let config = docs.config().decode_threads(1).build().unwrap();
    let mut pipeline = Pipeline::new(config, docs.decoder(), docs.iter().take(limit)).unwrap();
    let mut popped = 0;
    loop {
        match pipeline.pop() {
            Ok(Some(batch)) => {
                assert_eq!(batch.step(), Some(popped));
                batch.release(Fence::Sync).unwrap();
                popped += 1;
            }
            Ok(None) => panic!("no error in {popped} steps"),
            Err(e) => {
                assert!(matches!(pipeline.pop(), Err(Error::Stopped)));
                return (popped, e);
            }
        }
    }
}

fn no_bos_in(err: &Error, path: &Path, bos: u32) {
    let Error::Source(SourceError::File { path: p, problem }) = err else {
        panic!("{err}")
    };
    assert_eq!(p, path);
    assert_eq!(
        problem.format_problem::<DocumentProblem>(),
        Some(&DocumentProblem::NoBos { bos })
    );
    let text = err.to_string();
    assert!(text.contains(&path.display().to_string()), "{text}");
    assert!(text.contains(&bos.to_string()), "{text}");
}

#[test]
fn a_shard_without_bos_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let good = shard(BOS, 0, &[10; 20]);
    let none: Vec<u32> = (0..300).collect();
    // The first shard: at build.
    let paths = write_shards(dir.path(), &[none.clone(), good.clone()], false);
    no_bos_in(&docs(&paths).build().unwrap_err(), &paths[0], BOS);
    // Shuffled order indexes every shard at build.
    let paths = write_shards(
        dir.path(),
        &[good.clone(), good.clone(), none.clone()],
        false,
    );
    let err = docs(&paths)
        .order(DocOrder::Shuffled { seed: 1 })
        .build()
        .unwrap_err();
    no_bos_in(&err, &paths[2], BOS);
    // A later shard in sequential order: from pop, when the walk reaches it, after the
    // steps before it (each of the first two shards holds 10 steps of 20 tokens).
    let docs = docs(&paths).build().unwrap();
    let (popped, err) = pop_until_error(&docs, 100);
    assert_eq!(popped, 20);
    no_bos_in(&err, &paths[2], BOS);
}

#[test]
fn bos_outside_the_token_range_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(dir.path(), &[shard(BOS, 0, &[10; 5])], false);
    let err = docs(&paths).bos(70_000).build().unwrap_err();
    let Error::Source(SourceError::File { path, problem }) = &err else {
        panic!("{err}")
    };
    assert_eq!(path, &paths[0]);
    assert_eq!(
        problem.format_problem::<DocumentProblem>(),
        Some(&DocumentProblem::BosOutOfRange {
            bos: 70_000,
            format: ShardFormat::U16
        })
    );
    assert_says(&err, "65535");
}

#[test]
fn sizes_of_zero_and_too_large() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(dir.path(), &[shard(BOS, 0, &[10; 5])], false);
    let builder = || Documents::builder(TokenShards::open(&paths).unwrap());
    let zero = |b: pinring::source::DocumentsBuilder, what: &str| {
        let err = b.build().unwrap_err();
        assert!(
            matches!(&err, Error::Source(SourceError::Zero(w)) if *w == what),
            "{what}: {err}"
        );
        assert_says(&err, what);
    };
    zero(builder().max_seq_len(8), "tokens_per_batch");
    zero(builder().tokens_per_batch(8), "max_seq_len");
    zero(
        builder().tokens_per_batch(0).max_seq_len(8),
        "tokens_per_batch",
    );
    zero(
        builder().tokens_per_batch(8).max_seq_len(8).max_docs(0),
        "max_docs",
    );
    zero(
        builder().tokens_per_batch(8).max_seq_len(8).shard(0, 0),
        "world_size",
    );
    let err = builder()
        .tokens_per_batch(1 << 40)
        .max_seq_len(8)
        .build()
        .unwrap_err();
    assert_source_error!(
        err,
        SourceError::OutOfRange {
            setting: "tokens_per_batch",
            ..
        }
    );
    let err = builder()
        .tokens_per_batch(8)
        .max_seq_len(8)
        .shard(2, 2)
        .build()
        .unwrap_err();
    assert_source_error!(
        err,
        SourceError::BadRank {
            rank: 2,
            world_size: 2
        }
    );
}

#[test]
fn a_schedule_not_increasing_names_the_entry() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(dir.path(), &[shard(BOS, 0, &[10; 50])], false);
    let err = docs(&paths)
        .schedule(vec![(2, 8, 8), (5, 8, 8), (5, 16, 8)])
        .build()
        .unwrap_err();
    assert_source_error!(
        err,
        SourceError::BadSchedule {
            index: 2,
            from_step: 5,
            ..
        }
    );
    let text = err.to_string();
    assert!(
        text.contains("entry 2") && text.contains("strictly increasing"),
        "{text}"
    );
    let err = docs(&paths).schedule(vec![(3, 8, 0)]).build().unwrap_err();
    assert_source_error!(err, SourceError::BadSchedule { index: 0, .. });
}

#[test]
fn max_docs_too_small_fails_at_that_step() {
    let dir = tempfile::tempdir().unwrap();
    // Steps of 20 tokens: two documents of 10 each, until the short ones (5 tokens: four
    // a step).
    let mut lens = vec![10; 8];
    lens.extend([5; 8]);
    let paths = write_shards(dir.path(), &[shard(BOS, 0, &lens)], false);
    let docs = docs(&paths).max_docs(3).build().unwrap();
    let (popped, err) = pop_until_error(&docs, 100);
    assert_eq!(popped, 4, "the steps before it are delivered");
    let Error::Source(SourceError::TooManyDocuments {
        step,
        needed,
        max_docs,
        rank,
    }) = &err
    else {
        panic!("{err}")
    };
    assert_eq!((*step, *needed, *max_docs, *rank), (4, 4, 3, 0));
    let text = err.to_string();
    assert!(text.contains("step 4 needs 4 documents"), "{text}");
    // The checkpoint calls refuse to walk past it too.
    assert!(matches!(
        docs.checkpoint_after(None, 5),
        Err(Error::Source(SourceError::TooManyDocuments { step: 4, .. }))
    ));
    assert!(docs.checkpoint_after(None, 4).is_ok());
}

#[test]
fn no_step_fitting_in_an_epoch() {
    let dir = tempfile::tempdir().unwrap();
    // Three shards of 30 tokens of documents: a step of 2 ranks × 20 fits in none.
    let three = shard(BOS, 0, &[10; 3]);
    let paths = write_shards(dir.path(), &[three.clone(), three.clone(), three], false);
    let err = docs(&paths).shard(0, 2).build().unwrap_err();
    assert_source_error!(
        err,
        SourceError::NoStepFits {
            step: 0,
            tokens_per_batch: 19,
            world_size: 2,
            ..
        }
    );
    // A schedule that grows past the data: from pop, at the step that grows.
    let docs = docs(&paths).schedule(vec![(3, 40, 64)]).build().unwrap();
    let (popped, err) = pop_until_error(&docs, 100);
    assert_eq!(popped, 3);
    assert_source_error!(
        err,
        SourceError::NoStepFits {
            step: 3,
            tokens_per_batch: 40,
            ..
        }
    );
}

#[test]
fn a_token_type_too_narrow_for_u32_shards() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.bin");
    write_shard_u32(&path, &shard(128_000, 0, &[10; 5])).unwrap();
    let err = Documents::builder(TokenShards::open([&path]).unwrap())
        .tokens_per_batch(4)
        .max_seq_len(4)
        .token_type(TokenType::U16)
        .build()
        .unwrap_err();
    let Error::Source(SourceError::File { problem, .. }) = &err else {
        panic!("{err}")
    };
    assert!(matches!(
        problem.format_problem::<ShardProblem>(),
        Some(ShardProblem::TokenTypeTooNarrow { .. })
    ));
}

#[test]
fn a_slot_too_small_is_a_decode_error() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(dir.path(), &[shard(BOS, 0, &[10; 20])], false);
    let docs = docs(&paths).build().unwrap();
    let config = Config::builder()
        .batch_size(1)
        .bytes_per_sample(64)
        .build()
        .unwrap();
    let mut pipeline = Pipeline::new(config, docs.decoder(), docs.iter().take(3)).unwrap();
    let err = pipeline.pop().unwrap_err();
    assert!(
        matches!(&err, Error::Decode { seq: 0, message, .. } if message.contains("Documents::config")),
        "{err}"
    );
}

#[test]
fn a_shard_changed_under_the_loader_is_a_read_error() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(dir.path(), &[shard(BOS, 0, &[10; 20])], false);
    let docs = docs(&paths).build().unwrap();
    // Truncated after it was indexed.
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&paths[0])
        .unwrap();
    file.set_len(1024 + 100).unwrap();
    let (popped, err) = pop_until_error(&docs, 10);
    assert_eq!(popped, 0);
    assert_source_error!(err, SourceError::Read { path, .. } if path == &paths[0]);
}

#[test]
fn checkpoints_of_other_runs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(
        dir.path(),
        &[shard(BOS, 0, &[10; 40]), shard(BOS, 1, &[12; 30])],
        false,
    );
    let base = docs(&paths).build().unwrap();
    let state = base.checkpoint_after(None, 3).unwrap();
    assert_eq!((state.step, state.shard, state.doc), (3, 0, 6));
    let mismatch = |other: &Documents, what: &str| {
        let err = other.iter_from(&state).unwrap_err();
        assert!(
            matches!(&err, Error::Source(SourceError::DocumentsCheckpointMismatch { what: w, .. }) if w.contains(what)),
            "{what}: {err}"
        );
    };
    let mut other_bos = state.clone();
    other_bos.bos = 1;
    let err = base.iter_from(&other_bos).unwrap_err();
    assert_says(&err, "bos is 1 in the checkpoint but 50256 here");
    mismatch(
        &docs(&paths).schedule(vec![(5, 19, 32)]).build().unwrap(),
        "the schedule",
    );
    mismatch(&docs(&paths).max_docs(64).build().unwrap(), "max_docs");
    mismatch(
        &docs(&paths)
            .order(DocOrder::Shuffled { seed: 0 })
            .build()
            .unwrap(),
        "the order",
    );
    mismatch(&docs(&paths[..1]).build().unwrap(), "the number of files");
    // Another world size and rank: fine.
    docs(&paths)
        .shard(2, 3)
        .build()
        .unwrap()
        .iter_from(&state)
        .unwrap();
    // A cursor outside the dataset.
    let mut outside = state.clone();
    outside.shard = 2;
    let err = base.iter_from(&outside).unwrap_err();
    assert_source_error!(
        err,
        SourceError::DocumentsCheckpointMismatch { what, .. } if what == "the cursor"
    );
    outside.shard = 0;
    outside.doc = 41;
    assert!(base.check_checkpoint(&outside).is_err());
    outside.doc = 40;
    assert!(
        base.check_checkpoint(&outside).is_ok(),
        "the end of a shard is a cursor"
    );
    // Ranks at different steps, or of different runs.
    let other = base.checkpoint_after(None, 4).unwrap();
    let err = DocumentsCheckpoint::merge(&[state.clone(), other]).unwrap_err();
    assert_source_error!(err, SourceError::UnequalSteps { steps } if steps == &[3, 4]);
    assert_says(&err, "rank 1 at step 4");
    let two = docs(&paths).shard(1, 2).build().unwrap();
    let err = DocumentsCheckpoint::merge(&[state.clone(), two.checkpoint_after(None, 3).unwrap()])
        .unwrap_err();
    assert_source_error!(
        err,
        SourceError::DocumentsCheckpointMismatch { what, .. } if what.contains("world size")
    );
    assert!(matches!(
        DocumentsCheckpoint::merge(&[]),
        Err(Error::Source(SourceError::Zero("checkpoints")))
    ));
    // Bad text.
    let mut text = state.to_text();
    text = text.replace("\"sequential\"", "\"sorted\"");
    assert!(matches!(
        DocumentsCheckpoint::from_text(&text),
        Err(Error::Source(SourceError::BadCheckpointText { .. }))
    ));
    let mut version = state.clone();
    version.version += 1;
    let err = base.check_checkpoint(&version).unwrap_err();
    assert_says(&err, "version");
}
