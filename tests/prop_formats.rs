//! Property tests of the Megatron, datatrove and `.npy` readers: a valid pair of files
//! (or one file) with arbitrary bytes overwritten, cut off or appended opens or is refused
//! with a `SourceError::File` naming one of its files, never a panic; what opens reads its
//! every token, and its documents (where its format indexes them) are found or refused the
//! same way.

use std::path::{Path, PathBuf};

use pinring::source::{
    Datatrove, Documents, Megatron, Npy, SourceError, TokenFileFormat, TokenShards,
};
use pinring::Error;
use proptest::prelude::*;

/// An edit of a file's bytes: overwrite bytes at a place, cut at a place, or append.
#[derive(Debug, Clone)]
enum Edit {
    Set(usize, Vec<u8>),
    Cut(usize),
    Append(Vec<u8>),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        (0..200usize, proptest::collection::vec(any::<u8>(), 1..9))
            .prop_map(|(at, b)| Edit::Set(at, b)),
        (0..200usize).prop_map(Edit::Cut),
        proptest::collection::vec(any::<u8>(), 1..17).prop_map(Edit::Append),
    ]
}

fn apply(path: &Path, edits: &[Edit]) {
    let mut bytes = std::fs::read(path).unwrap();
    for e in edits {
        match e {
            Edit::Set(at, b) => {
                for (i, &v) in b.iter().enumerate() {
                    if let Some(x) = bytes.get_mut(at + i) {
                        *x = v;
                    }
                }
            }
            Edit::Cut(at) => bytes.truncate(*at),
            Edit::Append(b) => bytes.extend(b),
        }
    }
    std::fs::write(path, bytes).unwrap();
}

/// Five documents of 3 to 11 tokens.
fn docs() -> Vec<Vec<u16>> {
    (0..5u16)
        .map(|d| (0..3 + 2 * d).map(|t| 100 * d + t).collect())
        .collect()
}

fn write_megatron(dir: &Path) -> (PathBuf, PathBuf) {
    let docs = docs();
    let bin: Vec<u8> = docs.concat().iter().flat_map(|t| t.to_le_bytes()).collect();
    let mut idx = b"MMIDIDX\x00\x00".to_vec();
    idx.extend(1u64.to_le_bytes());
    idx.push(8);
    idx.extend((docs.len() as u64).to_le_bytes());
    idx.extend((docs.len() as u64 + 1).to_le_bytes());
    for d in &docs {
        idx.extend((d.len() as i32).to_le_bytes());
    }
    let mut at = 0i64;
    for d in &docs {
        idx.extend(at.to_le_bytes());
        at += 2 * d.len() as i64;
    }
    for i in 0..=docs.len() as i64 {
        idx.extend(i.to_le_bytes());
    }
    let (b, i) = (dir.join("m.bin"), dir.join("m.idx"));
    std::fs::write(&b, bin).unwrap();
    std::fs::write(&i, idx).unwrap();
    (b, i)
}

fn write_datatrove(dir: &Path) -> (PathBuf, PathBuf) {
    let docs = docs();
    let ds: Vec<u8> = docs.concat().iter().flat_map(|t| t.to_le_bytes()).collect();
    let mut end = 0u64;
    let index: Vec<u8> = docs
        .iter()
        .flat_map(|d| {
            end += d.len() as u64;
            end.to_le_bytes()
        })
        .collect();
    let (d, i) = (dir.join("d.ds"), dir.join("d.ds.index"));
    std::fs::write(&d, ds).unwrap();
    std::fs::write(&i, index).unwrap();
    (d, i)
}

fn write_npy(dir: &Path) -> PathBuf {
    let header = format!(
        "{:<117}\n",
        "{'descr': '<u2', 'fortran_order': False, 'shape': (32,), }"
    );
    let mut file = b"\x93NUMPY\x01\x00".to_vec();
    file.extend((header.len() as u16).to_le_bytes());
    file.extend(header.as_bytes());
    file.extend((0..32u16).flat_map(u16::to_le_bytes));
    let p = dir.join("a.npy");
    std::fs::write(&p, file).unwrap();
    p
}

/// Opens `path` as `format`: refused naming one of `files`, or opened and read whole
/// (and its documents found or refused naming one of `files`).
fn check(
    path: &Path,
    format: impl TokenFileFormat,
    files: &[PathBuf],
) -> Result<(), TestCaseError> {
    let named = |err: &Error| match err {
        Error::Source(SourceError::File { path, .. })
        | Error::Source(SourceError::Read { path, .. }) => files.contains(path),
        _ => false,
    };
    match TokenShards::open_as([path], format) {
        Err(err) => prop_assert!(named(&err), "{err:?}"),
        Ok(shards) => {
            let shard = &shards.shards()[0];
            for i in 0..shard.len() {
                prop_assert!(shard
                    .token(i)
                    .map_err(|e| TestCaseError::fail(e.to_string()))?
                    .is_some());
            }
            if shard.has_document_index()
                && let Err(err) = Documents::builder(shards)
                    .tokens_per_batch(3)
                    .max_seq_len(4)
                    .build()
            {
                let no_step = matches!(err, Error::Source(SourceError::NoStepFits { .. }));
                prop_assert!(named(&err) || no_step, "{err:?}");
            }
        }
    }
    Ok(())
}

/// A pair of files (tokens, index) written by `write` in a directory of its own, each
/// edited by its edits, then the tokens file [`check`]ed as `format`, either file counting
/// as named.
fn check_edited_pair(
    write: fn(&Path) -> (PathBuf, PathBuf),
    format: impl TokenFileFormat,
    data_edits: &[Edit],
    index_edits: &[Edit],
) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let (data, index) = write(dir.path());
    apply(&data, data_edits);
    apply(&index, index_edits);
    check(&data, format, &[data.clone(), index])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn an_edited_megatron_pair_opens_or_is_refused_naming_a_file(
        bin_edits in proptest::collection::vec(edit(), 0..2),
        idx_edits in proptest::collection::vec(edit(), 0..3),
    ) {
        check_edited_pair(write_megatron, Megatron, &bin_edits, &idx_edits)?;
    }

    #[test]
    fn an_edited_datatrove_pair_opens_or_is_refused_naming_a_file(
        ds_edits in proptest::collection::vec(edit(), 0..2),
        index_edits in proptest::collection::vec(edit(), 0..3),
    ) {
        check_edited_pair(write_datatrove, Datatrove, &ds_edits, &index_edits)?;
    }

    #[test]
    fn an_edited_npy_opens_or_is_refused_naming_it(
        edits in proptest::collection::vec(edit(), 0..3),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = write_npy(dir.path());
        apply(&path, &edits);
        check(&path, Npy, std::slice::from_ref(&path))?;
    }
}

/// The unedited files open (so the properties above see files that open, not only
/// refusals).
#[test]
fn the_unedited_files_open() {
    let dir = tempfile::tempdir().unwrap();
    let (bin, _) = write_megatron(dir.path());
    let (ds, _) = write_datatrove(dir.path());
    let npy = write_npy(dir.path());
    assert_eq!(TokenShards::open_as([&bin], Megatron).unwrap().tokens(), 35);
    assert_eq!(TokenShards::open_as([&ds], Datatrove).unwrap().tokens(), 35);
    assert_eq!(TokenShards::open_as([&npy], Npy).unwrap().tokens(), 32);
    let docs = Documents::builder(TokenShards::open_as([&bin], Megatron).unwrap())
        .tokens_per_batch(3)
        .max_seq_len(4)
        .build();
    assert!(docs.is_ok());
}
