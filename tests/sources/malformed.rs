//! Malformed files: each a clear error naming the file, with the problem a caller can
//! match on (the generic `FileProblem`, or the token format's own `ShardProblem`), never
//! a panic.

use std::path::{Path, PathBuf};

use pinring::source::{
    write_shard, FileProblem, FixedRecords, RecordFile, ShardProblem, ShardWriter, SourceError,
    TokenShard, TokenShards, SHARD_MAGIC, SHARD_MAGIC_U32,
};
use pinring::Error;

use crate::helpers::{
    file_problem, open_err, random_tokens, random_tokens_u32, raw_shard, raw_shard_u32,
    shard_problem,
};

/// A check that a file's shard problem matches `pattern`.
macro_rules! shard_problem_is {
    ($pattern:pat) => {
        |f: &FileProblem| matches!(shard_problem(f), Some($pattern))
    };
}

type Check = fn(&FileProblem) -> bool;
type MakeFile = Box<dyn Fn(&Path)>;
/// (name, how to make the file, the problem expected, phrases the message has).
type Case = (&'static str, MakeFile, Check, &'static [&'static str]);

/// A maker of a raw `u16` shard: these header words, `tokens`, then `extra` bytes.
fn raw_u16(header: [i32; 3], tokens: &[u16], extra: &'static [u8]) -> MakeFile {
    let tokens = tokens.to_vec();
    Box::new(move |p| raw_shard(p, header, &tokens, extra))
}

/// A maker of a raw `u32` shard: these header words, `tokens`, then `extra` bytes.
fn raw_u32(header: [i32; 3], tokens: &[u32], extra: &'static [u8]) -> MakeFile {
    let tokens = tokens.to_vec();
    Box::new(move |p| raw_shard_u32(p, header, &tokens, extra))
}

/// Makes each case's file in `dir` and checks that it does not open, with the problem
/// expected and a message naming the file and saying each phrase; returns the paths.
fn assert_named_errors(dir: &Path, cases: Vec<Case>) -> Vec<(&'static str, PathBuf)> {
    let mut made = Vec::new();
    for (name, make, check, phrases) in cases {
        let path = dir.join(format!("{name}.bin"));
        make(&path);
        let err = open_err(&path);
        assert!(check(file_problem(&err)), "{name}: unexpected {err:?}");
        let text = err.to_string();
        assert!(
            text.contains(&*path.to_string_lossy()),
            "{name}: `{text}` names no file"
        );
        for phrase in phrases {
            assert!(
                text.contains(phrase),
                "{name}: `{text}` does not say `{phrase}`"
            );
        }
        made.push((name, path));
    }
    made
}

#[test]
fn malformed_shards_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = random_tokens(100, 3);
    let cases: Vec<Case> = vec![
        (
            "empty",
            Box::new(|p| std::fs::write(p, []).unwrap()),
            |f| matches!(f, FileProblem::Empty),
            &["empty"],
        ),
        (
            "truncated_header",
            Box::new(|p| std::fs::write(p, SHARD_MAGIC.to_le_bytes().repeat(100)).unwrap()),
            shard_problem_is!(ShardProblem::TruncatedHeader {
                len: 400,
                needed: 1024
            }),
            &["truncated header"],
        ),
        (
            "one_byte",
            Box::new(|p| std::fs::write(p, [7]).unwrap()),
            shard_problem_is!(ShardProblem::TruncatedHeader { len: 1, .. }),
            &["truncated header"],
        ),
        (
            "wrong_magic",
            raw_u16([20240521, 1, 100], &good, &[]),
            shard_problem_is!(ShardProblem::BadMagic {
                found: 20240521,
                expected: 20240520
            }),
            &["magic"],
        ),
        (
            "wrong_version",
            raw_u16([20240520, 2, 100], &good, &[]),
            shard_problem_is!(ShardProblem::BadVersion {
                found: 2,
                expected: 1
            }),
            &["version"],
        ),
        (
            "zero_tokens",
            raw_u16([20240520, 1, 0], &[], &[]),
            shard_problem_is!(ShardProblem::BadTokenCount { count: 0 }),
            &["token count"],
        ),
        (
            "negative_tokens",
            raw_u16([20240520, 1, -5], &[], &[]),
            shard_problem_is!(ShardProblem::BadTokenCount { count: -5 }),
            &["token count"],
        ),
        (
            "count_beyond_file",
            raw_u16([20240520, 1, 101], &good, &[]),
            shard_problem_is!(ShardProblem::TokensBeyondFile {
                count: 101,
                needed: 1226,
                len: 1224
            }),
            &["beyond the file"],
        ),
        (
            "huge_count",
            raw_u16([20240520, 1, i32::MAX], &good, &[]),
            shard_problem_is!(ShardProblem::TokensBeyondFile { .. }),
            &["beyond the file"],
        ),
        (
            "odd_trailing_byte",
            raw_u16([20240520, 1, 100], &good, &[9]),
            shard_problem_is!(ShardProblem::TrailingBytes {
                count: 100,
                extra: 1,
                token_bytes: 2
            }),
            &["trailing"],
        ),
        (
            "header_only",
            raw_u16([20240520, 1, 1], &[], &[]),
            shard_problem_is!(ShardProblem::TokensBeyondFile { count: 1, .. }),
            &["beyond the file"],
        ),
        (
            "unfinished_writer",
            Box::new(|p| {
                let mut w = ShardWriter::create(p).unwrap();
                w.write(&[1, 2, 3]).unwrap();
                drop(w); // never finished: the header still counts 0
            }),
            shard_problem_is!(ShardProblem::BadTokenCount { count: 0 }),
            &["token count"],
        ),
    ];
    for (name, path) in assert_named_errors(dir.path(), cases) {
        // In a list, the bad file is the error and is named, good files or not.
        let ok = dir.path().join("good.bin");
        write_shard(&ok, &good).unwrap();
        let err = TokenShards::open([&ok, &path]).unwrap_err();
        assert!(
            err.to_string().contains(&*path.to_string_lossy()),
            "{name}: {err}"
        );
    }

    // A missing file is an io error naming it.
    let missing = dir.path().join("missing.bin");
    let err = open_err(&missing);
    assert!(
        matches!(file_problem(&err), FileProblem::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    );
    assert!(err.to_string().contains(&*missing.to_string_lossy()));

    // A directory is not a shard either: the message says it is a directory.
    let err = open_err(dir.path());
    assert!(
        matches!(file_problem(&err), FileProblem::IsDirectory),
        "{err:?}"
    );
    assert!(err.to_string().contains("is a directory"), "{err}");

    // The writer refuses to make a shard the reader would refuse.
    let err = write_shard(dir.path().join("nothing.bin"), &[]).unwrap_err();
    assert!(matches!(
        shard_problem(file_problem(&err)),
        Some(ShardProblem::BadTokenCount { count: 0 })
    ));
}

#[test]
fn malformed_record_files_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty.rec");
    std::fs::write(&empty, []).unwrap();
    let err = FixedRecords::open([&empty], 8).unwrap_err();
    assert!(matches!(file_problem(&err), FileProblem::Empty));
    assert!(err.to_string().contains(&*empty.to_string_lossy()));

    let partial = dir.path().join("partial.rec");
    std::fs::write(&partial, [0u8; 20]).unwrap();
    let err = FixedRecords::open([&partial], 8).unwrap_err();
    assert!(matches!(
        file_problem(&err),
        FileProblem::PartialRecord {
            len: 20,
            record_bytes: 8
        }
    ));
    assert!(err.to_string().contains(&*partial.to_string_lossy()));

    assert!(matches!(
        FixedRecords::open([&partial], 0),
        Err(Error::Source(SourceError::Zero("record_bytes")))
    ));
    let err = FixedRecords::open([dir.path().join("missing.rec")], 4).unwrap_err();
    assert!(matches!(file_problem(&err), FileProblem::Io(_)));
}

#[test]
fn malformed_shards_of_each_format_are_named_errors() {
    let dir = tempfile::tempdir().unwrap();
    let t16 = random_tokens(100, 3);
    let t32 = random_tokens_u32(100, 3);
    let as_u32: Vec<u32> = t16.iter().map(|&t| u32::from(t)).collect();
    let as_u16: Vec<u16> = t32
        .iter()
        .flat_map(|&t| [t as u16, (t >> 16) as u16])
        .collect();
    let cases: Vec<Case> = vec![
        (
            "u16_magic_u32_version",
            raw_u16([20240520, 7, 100], &t16, &[]),
            shard_problem_is!(ShardProblem::BadVersion {
                found: 7,
                expected: 1
            }),
            &[
                "unsupported version 7",
                "u16 (llm.c GPT-2)",
                "magic 20240520",
                "expected 1",
            ],
        ),
        (
            "u32_magic_u16_version",
            raw_u32([20240801, 1, 100], &t32, &[]),
            shard_problem_is!(ShardProblem::BadVersion {
                found: 1,
                expected: 7
            }),
            &[
                "unsupported version 1",
                "u32 (llm.c LLaMA-3)",
                "magic 20240801",
                "expected 7",
            ],
        ),
        (
            "u32_bad_version",
            raw_u32([20240801, 8, 100], &t32, &[]),
            shard_problem_is!(ShardProblem::BadVersion {
                found: 8,
                expected: 7
            }),
            &["unsupported version 8", "u32"],
        ),
        (
            "neither_magic",
            raw_u32([20240802, 7, 100], &t32, &[]),
            shard_problem_is!(ShardProblem::BadMagic {
                found: 20240802,
                ..
            }),
            &["wrong magic number 20240802", "20240520", "20240801"],
        ),
        (
            "u32_truncated",
            raw_u32([20240801, 7, 101], &t32, &[]),
            shard_problem_is!(ShardProblem::TokensBeyondFile {
                count: 101,
                needed: 1428,
                len: 1424
            }),
            &["beyond the file"],
        ),
        (
            "u32_truncated_header",
            Box::new(|p| std::fs::write(p, SHARD_MAGIC_U32.to_le_bytes().repeat(10)).unwrap()),
            shard_problem_is!(ShardProblem::TruncatedHeader {
                len: 40,
                needed: 1024
            }),
            &["truncated header"],
        ),
        (
            "u32_trailing_bytes",
            raw_u32([20240801, 7, 100], &t32, &[1, 2, 3]),
            shard_problem_is!(ShardProblem::TrailingBytes {
                count: 100,
                extra: 3,
                token_bytes: 4
            }),
            &["3 trailing bytes"],
        ),
        (
            // A u32 shard behind a u16 header: the file is twice the size it should be.
            "u32_tokens_under_u16_header",
            raw_u32([20240520, 1, 100], &as_u32, &[]),
            shard_problem_is!(ShardProblem::TrailingBytes {
                count: 100,
                extra: 200,
                token_bytes: 2
            }),
            &[
                "200 trailing bytes",
                "exactly 4 bytes per counted token",
                "32-bit",
                "u32 tokens with magic 20240801 and version 7",
            ],
        ),
        (
            // The reverse: u16 tokens behind a u32 header.
            "u16_tokens_under_u32_header",
            raw_u16([20240801, 7, 200], &as_u16, &[]),
            shard_problem_is!(ShardProblem::TokensBeyondFile { count: 200, .. }),
            &[
                "beyond the file",
                "exactly 2 bytes per counted token",
                "16-bit",
                "u16 tokens go with magic 20240520",
            ],
        ),
    ];
    assert_named_errors(dir.path(), cases);
    // An odd number of trailing bytes fits no width: no hint.
    let path = dir.path().join("odd.bin");
    raw_shard(&path, [20240520, 1, 100], &t16, &[9]);
    let text = open_err(&path).to_string();
    assert!(!text.contains("per counted token"), "{text}");
}

#[test]
fn a_directory_or_a_device_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("data");
    std::fs::create_dir(&sub).unwrap();
    // As a shard, as a record file, in a list, and through a glob that matches it.
    let errs = [
        TokenShard::open(&sub).unwrap_err(),
        FixedRecords::open([&sub], 4).unwrap_err(),
        TokenShards::open([&sub]).unwrap_err(),
        TokenShards::glob(dir.path().join("dat*")).unwrap_err(),
    ];
    for err in &errs {
        assert!(
            matches!(file_problem(err), FileProblem::IsDirectory),
            "{err:?}"
        );
        let text = err.to_string();
        assert!(text.contains(&*sub.to_string_lossy()), "{text}");
        assert!(text.contains("is a directory"), "{text}");
        assert!(!text.contains("os error"), "{text}");
    }
    // A character device is not a file to map either (and is not opened for reading).
    let null = Path::new("/dev/null");
    if null.exists() {
        let err = TokenShard::open(null).unwrap_err();
        assert!(
            matches!(file_problem(&err), FileProblem::NotAFile),
            "{err:?}"
        );
        assert!(err.to_string().contains("not a regular file"), "{err}");
        let err = RecordFile::open(null, 4).unwrap_err();
        assert!(
            matches!(file_problem(&err), FileProblem::NotAFile),
            "{err:?}"
        );
    }
}
