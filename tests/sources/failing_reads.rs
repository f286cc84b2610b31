//! Reads that a real file system fails (issue 28): a FUSE pass-through that answers EIO on
//! a byte range of a shard, as NFS, Lustre, gcsfuse or s3fs answer a read they cannot serve
//! (`tests/common/failing_fs.rs`; without FUSE here these tests say so and pass).
//!
//! Read through a memory map, such a page was a SIGBUS that a signal handler turned into
//! zeros: delivered as tokens (in release builds), reported as the file's shrinking "to N
//! bytes from the N it had" (in debug builds), and baked into indexes. Read by position, it
//! is the read's error: `ReadProblem::Io` from `pop`, with the batch and sample, after the
//! batches before it; retryable; and a new run over the same source reads the bytes again.

use std::path::Path;

use pinring::source::{
    write_shard, DocOrder, Documents, ReadProblem, SampleAt, SourceError, TokenShards, TokenType,
    Tokens,
};
use pinring::{Error, Fence, Pipeline};

use crate::helpers::{le, token_config_on};

#[path = "../common/failing_fs.rs"]
mod failing_fs;
use failing_fs::FailingFs;

/// Tokens a window (256 KiB of a `u16` shard), windows in the shard, windows a batch.
const T: usize = 128 << 10;
const WINDOWS: usize = 12;
const B: usize = 2;
/// The window whose middle page fails: batch 2, sample 1.
const BAD: usize = 5;

/// The shard's token `i`.
fn token(i: usize) -> u16 {
    (i % 50_021) as u16
}

/// Writes the shard (windows of `T + 1` tokens at stride `T`, as the sampler cuts them);
/// returns the failing range: the page in the middle of window `BAD`.
fn write(dir: &Path) -> std::ops::Range<u64> {
    let tokens: Vec<u16> = (0..WINDOWS * T + 1).map(token).collect();
    write_shard(dir.join("train_000.bin"), &tokens).unwrap();
    let middle = 1024 + 2 * (BAD * T + T / 2) as u64;
    let page = middle - middle % 4096;
    page..page + 4096
}

/// Window `w`'s sample as `ty`.
fn sample(w: usize, ty: TokenType) -> Vec<u8> {
    (w * T..=(w + 1) * T)
        .flat_map(|i| le(ty, token(i)))
        .collect()
}

/// Runs the epoch over `shards` decoded as `ty`: pops until the end or an error, checking
/// every batch delivered against the shard; the batches delivered and the error.
fn run(shards: &TokenShards, ty: TokenType) -> (u64, Option<Error>) {
    let sampler = shards.clone().windows(T as u64 + 1).build().unwrap();
    let decoder = Tokens::new(ty);
    let config = token_config_on(&decoder, T as u64 + 1, B, 1);
    let mut pipeline = Pipeline::new(config, decoder, sampler.epoch(0)).unwrap();
    let mut delivered = 0;
    loop {
        match pipeline.pop() {
            Ok(Some(batch)) => {
                let want: Vec<u8> = (0..B)
                    .flat_map(|j| sample(batch.seq() as usize * B + j, ty))
                    .collect();
                assert!(
                    batch.bytes() == want,
                    "batch {} holds other bytes",
                    batch.seq()
                );
                delivered += 1;
                batch.release(Fence::Sync).map_err(|e| e.error).unwrap();
            }
            Ok(None) => return (delivered, None),
            Err(e) => return (delivered, Some(e)),
        }
    }
}

/// A window read over the failing range is an I/O error from `pop` (not a change), at its
/// batch and sample, after the batches before it; once the file system reads again, a new
/// run over the same source object delivers every batch, right.
#[test]
fn a_read_the_file_system_fails_is_an_io_error_and_a_new_run_reads_the_file_again() {
    // Straight into the slot (u16) and widened through the chunk (i32); each over a file
    // system of its own (the kernel caches the pages a healed run read).
    for ty in [TokenType::U16, TokenType::I32] {
        let dir = tempfile::tempdir().unwrap();
        let bad = write(dir.path());
        let Some(fs) = FailingFs::mount(dir.path(), "train_000.bin", bad) else {
            return;
        };
        let path = fs.path("train_000.bin");
        let shards = TokenShards::open([&path]).unwrap();
        let (delivered, err) = run(&shards, ty);
        let err = err.unwrap_or_else(|| panic!("{ty}: the failing read was delivered as data"));
        assert_eq!(delivered, (BAD / B) as u64, "{ty}: the batches before it");
        match &err {
            Error::Source(SourceError::Read {
                path: p,
                problem: ReadProblem::Io(io),
                at: Some(SampleAt { seq, sample }),
            }) => {
                assert_eq!(p, &path);
                assert_eq!((*seq, *sample), ((BAD / B) as u64, BAD % B), "{ty}: {err}");
                assert_eq!(io.raw_os_error(), Some(5), "EIO: {io:?}");
            }
            other => panic!("{ty}: expected an I/O error from pop, got {other:?}"),
        }
        let Error::Source(source) = &err else {
            unreachable!()
        };
        assert!(source.is_retryable(), "{err}");
        let text = err.to_string();
        assert!(text.contains("could not be read"), "{text}");
        assert!(
            !text.contains("shrank") && !text.contains("must not change"),
            "{text}"
        );
        // Healed: the same source, a new run, every byte right.
        fs.heal();
        let (delivered, err) = run(&shards, ty);
        assert!(err.is_none(), "{ty}: {err:?}");
        assert_eq!(delivered, (WINDOWS / B) as u64);
    }
}

/// Read directly (no pipeline), the failing range is the same error, with no place.
#[test]
fn a_direct_read_the_file_system_fails_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = write(dir.path());
    let Some(fs) = FailingFs::mount(dir.path(), "train_000.bin", bad.clone()) else {
        return;
    };
    let shard =
        std::sync::Arc::new(pinring::source::TokenShard::open(fs.path("train_000.bin")).unwrap());
    let inside = ((bad.start - 1024) / 2) as usize;
    let err = shard.token(inside).unwrap_err();
    assert!(
        matches!(
            &err,
            SourceError::Read {
                problem: ReadProblem::Io(_),
                at: None,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    let window = pinring::source::Window::new(shard.clone(), inside - 10, 20).unwrap();
    assert!(window.to_vec().unwrap_err().is_retryable());
    // Outside the range, and after healing, the file's tokens.
    assert_eq!(shard.token(0).unwrap(), Some(token(0) as u32));
    fs.heal();
    assert_eq!(shard.token(inside).unwrap(), Some(token(inside) as u32));
    assert_eq!(
        window.to_vec().unwrap(),
        (inside - 10..inside + 10)
            .map(|i| token(i) as u32)
            .collect::<Vec<_>>()
    );
}

/// An index build (the `bos` scan) that meets a failing read fails with it and writes
/// nothing to the index cache; once the file system reads again, the build indexes the
/// shard as it is.
#[test]
fn an_index_build_that_meets_a_failing_read_fails_and_caches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let tokens: Vec<u16> = (0..200_000)
        .map(|i| {
            if i % 10 == 0 {
                7
            } else {
                100 + (i % 50) as u16
            }
        })
        .collect();
    write_shard(dir.path().join("docs.bin"), &tokens).unwrap();
    let page = 1024 + 2 * 100_000u64;
    let page = page - page % 4096;
    let Some(fs) = FailingFs::mount(dir.path(), "docs.bin", page..page + 4096) else {
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let build = || {
        Documents::builder(TokenShards::open([fs.path("docs.bin")]).unwrap())
            .bos(7)
            .tokens_per_batch(19)
            .max_seq_len(64)
            // Shuffled: every shard is indexed at build.
            .order(DocOrder::Shuffled { seed: 1 })
            .index_cache(cache.path())
            .build()
    };
    let err = build().unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Source(SourceError::Read {
                problem: ReadProblem::Io(_),
                ..
            })
        ),
        "{err:?}"
    );
    // Index files only: not the lock file beside each (`.NAME.lock`) nor a temporary one.
    let indexes = || {
        std::fs::read_dir(cache.path())
            .unwrap()
            .filter(|e| {
                !e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with('.')
            })
            .count()
    };
    assert_eq!(indexes(), 0, "an index made of a failed read was cached");
    fs.heal();
    let docs = build().unwrap();
    assert_eq!(docs.documents(), Some(20_000));
    assert_eq!(indexes(), 1);
}
