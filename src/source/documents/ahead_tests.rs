//! Tests of the thread that indexes ahead of the walk ([`IndexAhead`](super::ahead::IndexAhead)),
//! driven through a gate (the thread builds only what a test lets it, and says when it
//! has): the walk finds the shards indexed, indexes one itself when the thread is held
//! back, and reports a shard the thread failed. No timing.

use std::path::PathBuf;

use crate::error::source::SourceError;
use super::packed::Documents;
use crate::source::tokens::{write_shard, TokenShards};

/// `shards` shards of 10 documents of 10 tokens (bos 7): a step of one rank (N = 19)
/// takes two, so each shard holds 5 steps. With `no_bos`, that shard holds none.
fn dataset(dir: &std::path::Path, shards: usize, no_bos: Option<usize>) -> Vec<PathBuf> {
    (0..shards)
        .map(|s| {
            let bos = if no_bos == Some(s) { 8 } else { 7 };
            let tokens: Vec<u16> = (0..100u16)
                .map(|i| if i % 10 == 0 { bos } else { 100 + i })
                .collect();
            let path = dir.join(format!("train_{s}.bin"));
            write_shard(&path, &tokens).unwrap();
            path
        })
        .collect()
}

fn gated(paths: &[PathBuf]) -> Documents {
    Documents::builder(TokenShards::open(paths).unwrap())
        .bos(7)
        .tokens_per_batch(19)
        .max_seq_len(64)
        .gated()
        .build()
        .unwrap()
}

/// The thread indexes the shards after the walk's before the walk reaches them: no
/// step indexes one (the test lets the thread run, then waits until it is done, before
/// walking: no timing).
#[test]
fn the_thread_indexes_ahead_so_no_step_waits() {
    let dir = tempfile::tempdir().unwrap();
    let docs = gated(&dataset(dir.path(), 3, None));
    let stats = docs.index_stats();
    assert_eq!((stats.indexed, stats.at_start), (1, 1), "{stats:?}");
    let ahead = docs.inner.ahead.as_ref().unwrap();
    ahead.open_gate(2);
    ahead.wait_built(2);
    let steps: Vec<_> = docs.iter().take(15).collect();
    assert_eq!(steps.last().unwrap().start().unwrap().shard, 2);
    let stats = docs.index_stats();
    assert_eq!(
        (stats.indexed, stats.at_start, stats.ahead, stats.on_walk),
        (3, 1, 2, 0),
        "{stats:?}"
    );
}

/// With the thread held back, a step that reaches an unindexed shard indexes it
/// itself: no deadlock, and the stats say the step waited.
#[test]
fn a_step_indexes_a_shard_the_thread_has_not_reached() {
    let dir = tempfile::tempdir().unwrap();
    let docs = gated(&dataset(dir.path(), 3, None));
    let steps: Vec<_> = docs.iter().take(16).collect();
    assert!(steps.iter().all(|s| s.error().is_none()));
    assert_eq!(steps[15].epoch(), 1);
    let stats = docs.index_stats();
    assert_eq!(
        (stats.indexed, stats.ahead, stats.on_walk),
        (3, 0, 2),
        "{stats:?}"
    );
}

/// A shard the thread fails to index is left to the walk, which reports its error at
/// the step that reaches it.
#[test]
fn a_shard_the_thread_fails_is_reported_by_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    let paths = dataset(dir.path(), 3, Some(1));
    let docs = gated(&paths);
    let ahead = docs.inner.ahead.as_ref().unwrap();
    ahead.open_gate(2);
    ahead.wait_built(2);
    assert_eq!(docs.index_stats().ahead, 1, "shard 2 only");
    let steps: Vec<_> = docs.iter().collect();
    assert_eq!(steps.len(), 6, "5 steps of shard 0, then the failed one");
    let err = steps[5].error().unwrap();
    assert!(
        matches!(err, SourceError::File { path, .. } if path == &paths[1]),
        "{err}"
    );
}
