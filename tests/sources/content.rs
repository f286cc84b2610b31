//! A state knows its data (issue 29): a windows or records checkpoint records each file's
//! content fingerprint, so a state saved on one dataset is refused on another of the same
//! file names and sizes (another tokenization: the tokens reversed), naming the file; the
//! same files copied to another folder resume exactly; and a checkpoint of the version
//! before `contents` is refused naming its version.

use std::path::{Path, PathBuf};

use pinring::source::{
    Checkpoint, FixedRecords, Order, RecordFile, Sampler, SourceError, TokenShard, TokenShards,
    CHECKPOINT_VERSION,
};
use pinring::Error;

use crate::helpers::random_tokens;
use crate::named_shards::write_named;

const NAMES: [&str; 2] = ["train_000.bin", "train_001.bin"];

/// The tokens of the two shards of dataset A.
fn tokens() -> [Vec<u16>; 2] {
    [random_tokens(5000, 1), random_tokens(3000, 2)]
}

/// The shards `[first, second]` written under `dir` by [`NAMES`]; their paths.
fn write_shards(dir: &Path, shards: &[Vec<u16>; 2]) -> Vec<PathBuf> {
    write_named(dir, &NAMES, shards)
}

fn windows(paths: &[PathBuf]) -> Sampler<TokenShards> {
    TokenShards::open(paths)
        .unwrap()
        .windows(65)
        .order(Order::Shuffled { seed: 5 })
        .batch_size(4)
        .build()
        .unwrap()
}

/// Records of 4 bytes (two tokens each).
fn records(paths: &[PathBuf]) -> Sampler<FixedRecords> {
    Sampler::builder(FixedRecords::open(paths, 4).unwrap())
        .order(Order::Shuffled { seed: 5 })
        .batch_size(4)
        .build()
        .unwrap()
}

/// The mismatch `err` is: (what, saved, here).
fn mismatch(err: &Error) -> (&str, &str, &str) {
    match err {
        Error::Source(SourceError::CheckpointMismatch { what, saved, here }) => (what, saved, here),
        other => panic!("expected a CheckpointMismatch, got {other:?}"),
    }
}

/// The windows `sampler` delivers from `state` on, as (epoch, id, step) and their tokens.
fn resumed(
    sampler: &Sampler<TokenShards>,
    state: &Checkpoint,
) -> Vec<(u64, u64, Option<u64>, Vec<u32>)> {
    sampler
        .iter_from_checkpoint(state)
        .unwrap()
        .take(40)
        .map(|w| (w.epoch(), w.id(), w.step(), w.to_vec().unwrap()))
        .collect()
}

#[test]
fn a_windows_state_is_refused_on_other_tokens_of_the_same_names_and_sizes() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let [first, second] = tokens();
    let saved_on = write_shards(a.path(), &[first.clone(), second.clone()]);
    // Dataset B: the same names and sizes; the second shard's tokens reversed.
    let reversed: Vec<u16> = second.iter().rev().copied().collect();
    let other = write_shards(b.path(), &[first, reversed]);
    let state = windows(&saved_on).checkpoint(0, 12);
    let here = windows(&other);
    assert_eq!(here.fingerprint().files, state.dataset.files);
    assert_eq!(here.fingerprint().sizes, state.dataset.sizes);
    let err = here.iter_from_checkpoint(&state).unwrap_err();
    let content = |path: &PathBuf| format!("{:#018x}", TokenShard::open(path).unwrap().content());
    assert_eq!(
        mismatch(&err),
        (
            "the content of train_001.bin (file 1: the same name and size, other bytes)",
            content(&saved_on[1]).as_str(),
            content(&other[1]).as_str()
        )
    );
    assert!(
        err.to_string().starts_with(
            "the checkpoint does not match: the content of train_001.bin (file 1: the same \
             name and size, other bytes) is 0x"
        ),
        "{err}"
    );
    assert!(here.check_checkpoint(&state).is_err());
    // Through the text form too.
    let read = Checkpoint::from_text(&state.to_text()).unwrap();
    assert!(here.iter_from_checkpoint(&read).is_err());
}

#[test]
fn a_windows_state_resumes_on_the_same_files_in_another_folder() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let saved_on = write_shards(a.path(), &tokens());
    let copies: Vec<PathBuf> = saved_on
        .iter()
        .map(|p| {
            let copy = b.path().join(p.file_name().unwrap());
            std::fs::copy(p, &copy).unwrap();
            copy
        })
        .collect();
    let original = windows(&saved_on);
    let state = Checkpoint::from_text(&original.checkpoint(0, 12).to_text()).unwrap();
    let elsewhere = windows(&copies);
    assert_eq!(elsewhere.fingerprint(), original.fingerprint());
    assert_eq!(resumed(&elsewhere, &state), resumed(&original, &state));
    assert_eq!(resumed(&elsewhere, &state)[0].2, Some(3));
}

#[test]
fn a_records_state_is_refused_on_other_records_and_resumes_on_copies() {
    let (a, b, c) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let bytes: Vec<Vec<u8>> = tokens()
        .iter()
        .map(|t| t.iter().flat_map(|x| x.to_le_bytes()).collect())
        .collect();
    let write = |dir: &Path, files: &[Vec<u8>]| -> Vec<PathBuf> {
        NAMES
            .iter()
            .zip(files)
            .map(|(name, bytes)| {
                let path = dir.join(name);
                std::fs::write(&path, bytes).unwrap();
                path
            })
            .collect()
    };
    let saved_on = write(a.path(), &bytes);
    // The first file's records in reverse order: the same size, other bytes.
    let reversed: Vec<u8> = bytes[0].chunks(4).rev().flatten().copied().collect();
    let other = write(b.path(), &[reversed, bytes[1].clone()]);
    let copies = write(c.path(), &bytes);
    let original = records(&saved_on);
    let state = original.checkpoint(0, 8);
    let err = records(&other).iter_from_checkpoint(&state).unwrap_err();
    let content =
        |path: &PathBuf| format!("{:#018x}", RecordFile::open(path, 4).unwrap().content());
    assert_eq!(
        mismatch(&err),
        (
            "the content of train_000.bin (file 0: the same name and size, other bytes)",
            content(&saved_on[0]).as_str(),
            content(&other[0]).as_str()
        )
    );
    let ids = |s: &Sampler<FixedRecords>| -> Vec<(u64, Vec<u8>)> {
        s.iter_from_checkpoint(&state)
            .unwrap()
            .take(30)
            .map(|r| (r.id(), r.read_bytes().unwrap()))
            .collect()
    };
    assert_eq!(ids(&records(&copies)), ids(&original));
}

#[test]
fn a_checkpoint_of_the_version_before_contents_is_refused_by_name() {
    assert_eq!(CHECKPOINT_VERSION, 3);
    let dir = tempfile::tempdir().unwrap();
    let paths = write_shards(dir.path(), &tokens());
    let record_file = dir.path().join("records.bin");
    std::fs::write(&record_file, [7u8; 60]).unwrap();
    let states = [
        windows(&paths).checkpoint(0, 12),
        records(std::slice::from_ref(&record_file)).checkpoint(0, 4),
    ];
    for state in states {
        // Version 2's text: no `contents`.
        let mut value: serde_json::Value = serde_json::from_str(&state.to_text()).unwrap();
        let record = value.as_object_mut().unwrap();
        record.insert("version".into(), 2.into());
        assert!(record.remove("contents").is_some());
        let old = serde_json::to_string_pretty(&value).unwrap();
        let err = Checkpoint::from_text(&old).unwrap_err();
        assert!(
            err.to_string().contains(
                "a checkpoint of version 2, which this build (version 3) cannot read: missing \
                 field `contents`"
            ),
            "{err}"
        );
    }
    // One of version 2 that reads (its contents given) is refused by the sampler, by name.
    let old = Checkpoint {
        version: 2,
        ..windows(&paths).checkpoint(0, 12)
    };
    let err = windows(&paths).iter_from_checkpoint(&old).unwrap_err();
    assert_eq!(mismatch(&err), ("the checkpoint version", "2", "3"));
}
