//! Files that change under a running loader: truncated, replaced (a new file renamed over
//! it), rewritten in place or deleted. Each is a `SourceError::Read` naming the file, from
//! `pop` with the batch and sample it hit, after the batches before it; never a signal
//! (files are read by position: a truncated shard once killed the process with SIGBUS,
//! read through a memory map), and never a batch built from bytes of the changed file. A
//! change is not retryable; a read the file system fails is (`failing_reads.rs`).
//!
//! "Mid-run" is driven by a gate on the source iterator: the feeder blocks before the
//! first sample of batch 2 until the test, having popped batches 0 and 1, changed the
//! file. Nothing of batch 2 is read before the change, and all of it after.

use std::path::Path;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;

use pinring::source::{
    write_shard, FixedRecords, NextToken, ReadProblem, RecordBytes, RecordFile, SampleAt, Sampler,
    SourceError, TokenShard, TokenShards, TokenType, Tokens, Window,
};
use pinring::{Config, Decode, Error, Fence, Pipeline};

use crate::helpers::{drain, token_config, token_config_on};

/// Windows of T + 1 tokens (2 KiB and more, so that batch 2 lies pages past the first),
/// batches of B.
const T: usize = 1024;
const B: usize = 4;

/// The items of `inner`, but the `at`-th waits until the gate opens (a message, or the
/// sender dropped).
struct Gated<I> {
    inner: I,
    at: usize,
    n: usize,
    gate: Option<Receiver<()>>,
}

impl<I: Iterator> Iterator for Gated<I> {
    type Item = I::Item;

    fn next(&mut self) -> Option<I::Item> {
        if self.n == self.at
            && let Some(gate) = self.gate.take()
        {
            let _ = gate.recv();
        }
        self.n += 1;
        self.inner.next()
    }
}

/// `inner`, gated before its `at`-th item, and the gate's key.
fn gated<I: Iterator>(inner: I, at: usize) -> (Gated<I>, Sender<()>) {
    let (open, gate) = channel();
    let it = Gated {
        inner,
        at,
        n: 0,
        gate: Some(gate),
    };
    (it, open)
}

/// A shard whose token `i` is `i % 50000`, long enough for 64 windows.
fn counting_shard(path: &Path) -> Vec<u16> {
    let tokens: Vec<u16> = (0..64 * T + 1).map(|i| (i % 50_000) as u16).collect();
    write_shard(path, &tokens).unwrap();
    tokens
}

/// The next-token sample of the window at `start`, as i32.
fn next_token_sample(tokens: &[u16], start: usize) -> Vec<u8> {
    let w = &tokens[start..start + T + 1];
    let le = |t: &u16| i32::from(*t).to_le_bytes();
    w[..T]
        .iter()
        .flat_map(le)
        .chain(w[1..].iter().flat_map(le))
        .collect()
}

/// Runs a sequential next-token pipeline over `path`, pops batches 0 and 1 (checking
/// every byte), calls `change` while the feeder waits before batch 2, and returns what
/// the next `pop` gives.
fn change_mid_run(path: &Path, change: impl FnOnce()) -> Error {
    let tokens = counting_shard(path);
    let sampler = TokenShards::open([path])
        .unwrap()
        .windows(T as u64 + 1)
        .build()
        .unwrap();
    let decoder = NextToken::new(TokenType::I32);
    let config = token_config_on(&decoder, T as u64 + 1, B, 1);
    let (samples, open) = gated(sampler.iter(), 2 * B);
    let mut pipeline = Pipeline::new(config, decoder, samples).unwrap();
    for seq in 0..2u64 {
        let batch = pipeline.pop().unwrap().expect("an endless source");
        assert_eq!(batch.seq(), seq);
        let want: Vec<u8> = (0..B)
            .flat_map(|j| next_token_sample(&tokens, (seq as usize * B + j) * T))
            .collect();
        assert!(batch.bytes() == want, "batch {seq} differs");
        batch.release(Fence::Sync).map_err(|e| e.error).unwrap();
    }
    change();
    open.send(()).unwrap();
    let err = match pipeline.pop() {
        Err(e) => e,
        Ok(b) => panic!(
            "batch 2 was built from a changed file: {:?}",
            b.map(|b| b.seq())
        ),
    };
    // The pipeline has stopped; it ends cleanly.
    assert!(matches!(pipeline.pop(), Err(Error::Stopped)));
    drop(pipeline);
    err
}

/// The read error `err` is, at batch 2's first sample.
fn read_error(err: &Error, path: &Path) -> String {
    match err {
        Error::Source(SourceError::Read {
            path: p,
            at: Some(SampleAt { seq: 2, sample: 0 }),
            ..
        }) => assert_eq!(p, path),
        other => panic!("expected a read error at batch 2, sample 0, got {other:?}"),
    }
    let Error::Source(source) = err else {
        unreachable!()
    };
    assert!(!source.is_retryable(), "a change stays on a retry: {err}");
    let text = err.to_string();
    assert!(text.contains(&*path.to_string_lossy()), "{text}");
    assert!(text.contains("(batch 2, sample 0)"), "{text}");
    assert!(!text.contains("could not be read"), "{text}");
    assert!(
        text.contains("must not change while a loader reads it"),
        "{text}"
    );
    text
}

fn problem(err: &Error) -> &ReadProblem {
    match err {
        Error::Source(SourceError::Read { problem, .. }) => problem,
        other => panic!("not a read error: {other:?}"),
    }
}

/// The case: a shard truncated while a loader reads it was SIGBUS; now it is
/// an error from `pop`, after the batches before it.
#[test]
fn a_shard_truncated_mid_run_is_a_source_error_from_pop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train_000.bin");
    let opened = (1024 + 2 * (64 * T + 1)) as u64;
    let err = change_mid_run(&path, || {
        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.set_len(1024 + 2 * 10).unwrap();
    });
    let text = read_error(&err, &path);
    assert!(
        matches!(problem(&err), ReadProblem::Shrank { len: 1044, opened: o } if *o == opened),
        "{err:?}"
    );
    assert!(text.contains("it shrank to 1044 bytes"), "{text}");
}

/// A shard replaced by a new file renamed over it (the way to rewrite one safely) is
/// seen: the loader would otherwise go on reading the old file it holds open.
#[test]
fn a_shard_replaced_mid_run_is_a_source_error_from_pop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train_000.bin");
    let err = change_mid_run(&path, || {
        // The same size and format, other tokens.
        let tmp = dir.path().join("train_000.bin.tmp");
        write_shard(&tmp, &vec![7u16; 64 * T + 1]).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
    });
    let text = read_error(&err, &path);
    assert!(matches!(problem(&err), ReadProblem::Replaced), "{err:?}");
    assert!(text.contains("it was replaced"), "{text}");
}

/// Rewritten in place (truncated and written again, to the same size) and deleted.
#[test]
fn a_shard_rewritten_or_deleted_mid_run_is_a_source_error_from_pop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train_000.bin");
    let err = change_mid_run(&path, || {
        write_shard(&path, &vec![7u16; 64 * T + 1]).unwrap();
    });
    read_error(&err, &path);
    assert!(
        matches!(
            problem(&err),
            ReadProblem::Rewritten { .. } | ReadProblem::Shrank { .. }
        ),
        "{err:?}"
    );

    let path = dir.path().join("train_001.bin");
    let err = change_mid_run(&path, || std::fs::remove_file(&path).unwrap());
    read_error(&err, &path);
    assert!(matches!(problem(&err), ReadProblem::Removed), "{err:?}");
}

/// Record files too.
#[test]
fn a_record_file_truncated_mid_run_is_a_source_error_from_pop() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("records.bin");
    const R: usize = 16;
    let bytes: Vec<u8> = (0..64 * R).map(|i| (i / R) as u8).collect();
    std::fs::write(&path, &bytes).unwrap();
    let sampler = Sampler::builder(FixedRecords::open([&path], R).unwrap())
        .build()
        .unwrap();
    let config = Config::builder()
        .batch_size(B)
        .bytes_per_sample(R)
        .decode_threads(1)
        .build()
        .unwrap();
    let (samples, open) = gated(sampler.iter(), 2 * B);
    let mut pipeline = Pipeline::new(config, RecordBytes, samples).unwrap();
    let mut got = Vec::new();
    assert_eq!(drain(&mut pipeline, Some(2), &mut got), 2);
    assert!(got.concat() == bytes[..2 * B * R]);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(3 * R as u64)
        .unwrap();
    open.send(()).unwrap();
    let Err(err) = pipeline.pop() else {
        panic!("batch 2 was built from a changed file")
    };
    read_error(&err, &path);
    assert!(
        matches!(
            problem(&err),
            ReadProblem::Shrank {
                len: 48,
                opened: 1024
            }
        ),
        "{err:?}"
    );
}

/// Without a gate: batches held (the pipeline's own back-pressure), the shard truncated
/// while decodes may be running, then drained. Whatever was decoded before the change is
/// delivered whole and right; the run ends with the read error; nothing crashes.
#[test]
fn truncated_with_batches_in_flight_delivers_only_whole_batches() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("train_000.bin");
    let tokens = counting_shard(&path);
    let sampler = TokenShards::open([&path])
        .unwrap()
        .windows(T as u64 + 1)
        .build()
        .unwrap();
    let decoder = NextToken::new(TokenType::I32);
    let mut pipeline = Pipeline::new(
        token_config(&decoder, T as u64 + 1, B),
        decoder,
        sampler.iter(),
    )
    .unwrap();
    let epoch = sampler.epoch_len() as usize;
    // Hold both device slots: decode runs ahead into the host slots and stops there.
    let held = [
        pipeline.pop().unwrap().unwrap(),
        pipeline.pop().unwrap().unwrap(),
    ];
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(1024 + 2 * 100)
        .unwrap();
    let mut delivered = 0;
    let mut check = |seq: u64, bytes: &[u8]| {
        let want: Vec<u8> = (0..B)
            .flat_map(|j| next_token_sample(&tokens, ((seq as usize * B + j) % epoch) * T))
            .collect();
        assert!(bytes == want, "batch {seq} holds bytes of the changed file");
        delivered += 1;
    };
    for batch in held {
        check(batch.seq(), batch.bytes());
        batch.release(Fence::Sync).map_err(|e| e.error).unwrap();
    }
    let err = loop {
        match pipeline.pop() {
            Ok(Some(batch)) => {
                check(batch.seq(), batch.bytes());
                batch.release(Fence::Sync).map_err(|e| e.error).unwrap();
            }
            Ok(None) => panic!("an endless source ended"),
            Err(e) => break e,
        }
    };
    assert!(delivered >= 2);
    match &err {
        Error::Source(SourceError::Read {
            path: p,
            problem: ReadProblem::Shrank { .. } | ReadProblem::Rewritten { .. },
            at: Some(SampleAt { seq, .. }),
        }) => {
            assert_eq!(p, &path);
            assert_eq!(
                *seq, delivered,
                "the error is the batch after the last delivered"
            );
        }
        other => panic!("expected a read error, got {other:?}"),
    }
}

/// Read directly (no pipeline): every read of a changed file is the error, with no place;
/// a decoder passes it on as a `DecodeError` that carries it.
#[test]
fn reads_of_a_changed_file_are_errors_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.bin");
    counting_shard(&path);
    let shard = Arc::new(TokenShard::open(&path).unwrap());
    let window = Window::new(shard.clone(), 10, T + 1).unwrap();
    assert_eq!(shard.token(5).unwrap(), Some(5));
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(1024 + 2 * 20)
        .unwrap();
    // Inside what is left, or past it: both are the change.
    for err in [
        shard.token(5).unwrap_err(),
        shard.token(50).unwrap_err(),
        window.to_vec().unwrap_err(),
    ] {
        assert!(
            matches!(
                &err,
                SourceError::Read { path: p, problem: ReadProblem::Shrank { len: 1064, .. }, at: None } if p == &path
            ),
            "{err:?}"
        );
        assert_eq!(err.path(), Some(path.as_path()));
    }
    let decoder = Tokens::new(TokenType::I64);
    let mut out = vec![0u8; decoder.sample_bytes(T as u64 + 1)];
    let e = decoder.decode(window, &mut out).unwrap_err();
    assert!(
        matches!(e.source_error(), Some(SourceError::Read { .. })),
        "{e:?}"
    );
    assert_eq!(e.message(), e.source_error().unwrap().to_string());

    let rec = dir.path().join("r.bin");
    std::fs::write(&rec, [1u8; 64]).unwrap();
    let file = RecordFile::open(&rec, 8).unwrap();
    std::fs::write(&rec, [2u8; 64]).unwrap();
    let err = file.record(0).unwrap_err();
    assert!(
        matches!(
            &err,
            SourceError::Read {
                problem: ReadProblem::Rewritten {
                    len: 64,
                    opened: 64,
                    modified: true
                },
                ..
            }
        ),
        "{err:?}"
    );
}
