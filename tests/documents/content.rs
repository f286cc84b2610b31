//! A documents state knows its data (issue 29): a `DocumentsCheckpoint` records each
//! shard's content fingerprint, so a state saved on one dataset is refused on another of
//! the same file names and sizes (the tokens reversed), naming the shard; the same shards
//! copied to another folder resume exactly. (The version before `contents` is refused by
//! name in `seek.rs`.)

use std::path::{Path, PathBuf};

use pinring::source::{DocOrder, Documents, DocumentsCheckpoint, Piece, SourceError, TokenShard};
use pinring::Error;

use crate::helpers::{assert_says, builder, shard, write_shards, BOS};

/// Dataset A: two shards of documents of 5 to 40 tokens.
fn dataset() -> Vec<Vec<u32>> {
    let lens = |salt: usize| -> Vec<usize> { (0..60).map(|k| 5 + (k * 7 + salt) % 36).collect() };
    vec![shard(BOS, 3, &lens(1)), shard(BOS, 0, &lens(2))]
}

fn source(paths: &[PathBuf]) -> Documents {
    builder(paths)
        .order(DocOrder::Shuffled { seed: 3 })
        .tokens_per_batch(63)
        .max_seq_len(32)
        .build()
        .unwrap()
}

/// The shards of `paths` copied into `dir`, by the same names.
fn copied(paths: &[PathBuf], dir: &Path) -> Vec<PathBuf> {
    paths
        .iter()
        .map(|p| {
            let copy = dir.join(p.file_name().unwrap());
            std::fs::copy(p, &copy).unwrap();
            copy
        })
        .collect()
}

/// The steps `docs` makes from `state` on: number, epoch, pieces, and the pieces' tokens
/// read from its own shards.
fn resumed(docs: &Documents, state: &DocumentsCheckpoint) -> Vec<(u64, u64, Vec<Piece>, Vec<u32>)> {
    let shards = docs.shards().shards();
    docs.iter_from(state)
        .unwrap()
        .take(12)
        .map(|step| {
            assert!(step.error().is_none(), "{:?}", step.error());
            let pieces: Vec<Piece> = step.pieces().collect();
            let tokens = pieces
                .iter()
                .flat_map(|p| (p.start..p.start + p.len).map(move |i| (p.shard, i)))
                .map(|(s, i)| shards[s].token(i as usize).unwrap().unwrap())
                .collect();
            (step.step(), step.epoch(), pieces, tokens)
        })
        .collect()
}

#[test]
fn a_documents_state_is_refused_on_other_tokens_of_the_same_names_and_sizes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut data = dataset();
    let saved_on = write_shards(a.path(), &data, false);
    // Dataset B: the same names and sizes; the second shard's tokens reversed.
    data[1].reverse();
    let other = write_shards(b.path(), &data, false);
    let state = source(&saved_on).checkpoint_after(None, 4).unwrap();
    let here = source(&other);
    let err = here.iter_from(&state).unwrap_err();
    let content = |path: &PathBuf| format!("{:#018x}", TokenShard::open(path).unwrap().content());
    match &err {
        Error::Source(SourceError::DocumentsCheckpointMismatch { what, saved, here }) => {
            assert_eq!(
                (what.as_str(), saved, here),
                (
                    "the content of train_001.bin (file 1: the same name and size, other bytes)",
                    &content(&saved_on[1]),
                    &content(&other[1])
                )
            );
        }
        other => panic!("expected a DocumentsCheckpointMismatch, got {other:?}"),
    }
    assert_says(
        &err,
        "the content of train_001.bin (file 1: the same name and size",
    );
    assert!(here.check_checkpoint(&state).is_err());
    assert!(here.checkpoint_after(Some(&state), 1).is_err());
}

#[test]
fn a_documents_state_resumes_on_the_same_shards_in_another_folder() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let saved_on = write_shards(a.path(), &dataset(), false);
    let copies = copied(&saved_on, b.path());
    let original = source(&saved_on);
    let state = original.checkpoint_after(None, 4).unwrap();
    let state = DocumentsCheckpoint::from_text(&state.to_text()).unwrap();
    let elsewhere = source(&copies);
    let want = resumed(&original, &state);
    assert_eq!(want.len(), 12);
    assert_eq!(want[0].0, 4);
    assert_eq!(resumed(&elsewhere, &state), want);
    assert_eq!(
        elsewhere.checkpoint_after(Some(&state), 5).unwrap(),
        original.checkpoint_after(Some(&state), 5).unwrap()
    );
}
