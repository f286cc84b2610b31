//! Data sources through the public API: the shard format, malformed files, sampling,
//! sharding by rank, determinism, resume, and token batches through a real pipeline.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use pinring::source::{
    write_shard, write_shard_u32, FileProblem, FixedRecords, NextToken, Order, Position,
    RecordBytes, RecordFile, RecordWindow, Sampler, ShardFormat, ShardWriter, SourceError,
    SplitMix64, TokenShard, TokenShards, TokenType, TokenWindow, Tokens, SHARD_MAGIC,
    SHARD_MAGIC_U32, SHARD_VERSION_U32,
};
use pinring::{Config, Decode, Error, Fence, Pipeline};

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pinring-sources-{}-{name}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `u16` tokens as the `u32` a window reads them as.
fn widened(tokens: &[u16]) -> Vec<u32> {
    tokens.iter().map(|&t| u32::from(t)).collect()
}

fn random_tokens(n: usize, seed: u64) -> Vec<u16> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| rng.below(50257) as u16).collect()
}

/// A raw shard file: the header words given, then `tokens`, then `extra` bytes.
fn raw_shard(path: &Path, header: [i32; 3], tokens: &[u16], extra: &[u8]) {
    let mut bytes = vec![0u8; 1024];
    for (i, w) in header.iter().enumerate() {
        bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    bytes.extend(tokens.iter().flat_map(|t| t.to_le_bytes()));
    bytes.extend_from_slice(extra);
    std::fs::write(path, bytes).unwrap();
}

/// A raw shard file of `u32` tokens: the header words given, then `tokens`, then `extra`.
fn raw_shard_u32(path: &Path, header: [i32; 3], tokens: &[u32], extra: &[u8]) {
    let mut bytes = vec![0u8; 1024];
    for (i, w) in header.iter().enumerate() {
        bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    bytes.extend(tokens.iter().flat_map(|t| t.to_le_bytes()));
    bytes.extend_from_slice(extra);
    std::fs::write(path, bytes).unwrap();
}

/// Random `u32` tokens over a LLaMA-3-sized vocabulary (most above `u16::MAX`).
fn random_tokens_u32(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| rng.below(128_256) as u32).collect()
}

/// Shards of these lengths, tokens random; returns the source and the tokens written.
fn shards(dir: &TempDir, lens: &[usize]) -> (TokenShards, Vec<Vec<u16>>) {
    let mut written = Vec::new();
    let mut paths = Vec::new();
    for (i, &n) in lens.iter().enumerate() {
        let tokens = random_tokens(n, i as u64 + 100);
        let path = dir.path(&format!("shard_{i:03}.bin"));
        write_shard(&path, &tokens).unwrap();
        written.push(tokens);
        paths.push(path);
    }
    (TokenShards::open(&paths).unwrap(), written)
}

/// A window as (shard path, start, len): comparable across samplers.
fn key(w: &TokenWindow) -> (PathBuf, usize, usize) {
    (w.shard().path().to_owned(), w.start(), w.len())
}

fn file_problem(err: &Error) -> &FileProblem {
    match err {
        Error::Source(e) => e
            .file_problem()
            .unwrap_or_else(|| panic!("not a file error: {e}")),
        other => panic!("not a source error: {other}"),
    }
}

fn open_err(path: &Path) -> Error {
    TokenShard::open(path).expect_err("a malformed shard must not open")
}

// ---------------------------------------------------------------------------------------
// The format

#[test]
fn shard_round_trip() {
    let dir = TempDir::new("roundtrip");
    let tokens = random_tokens(10_007, 1);
    let path = dir.path("a.bin");
    write_shard(&path, &tokens).unwrap();

    // The bytes on disk are exactly the format.
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 1024 + 2 * tokens.len());
    let word = |i: usize| i32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap());
    assert_eq!((word(0), word(1), word(2)), (20240520, 1, 10_007));
    assert!(bytes[12..1024].iter().all(|&b| b == 0));

    let shard = TokenShard::open(&path).unwrap();
    assert_eq!(shard.len(), tokens.len());
    assert_eq!(shard.path(), path);
    assert!((0..tokens.len()).all(|i| shard.token(i) == Some(u32::from(tokens[i]))));
    assert_eq!(shard.token(tokens.len()), None);
    assert_eq!(shard.token(usize::MAX), None);

    // Written in pieces, the same file.
    let path2 = dir.path("b.bin");
    let mut writer = ShardWriter::create(&path2).unwrap();
    for chunk in tokens.chunks(3001) {
        writer.write(chunk).unwrap();
    }
    assert_eq!(writer.finish().unwrap(), tokens.len() as u64);
    assert_eq!(std::fs::read(&path2).unwrap(), bytes);

    // Through the sampler: one window of the whole shard is the tokens.
    let sampler = TokenShards::open([&path])
        .unwrap()
        .windows(tokens.len() as u64)
        .build()
        .unwrap();
    let all: Vec<_> = sampler.epoch(0).collect();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].to_vec(), widened(&tokens));
    assert_eq!(all[0].bytes(), &bytes[1024..]);
}

#[test]
fn glob_opens_matches_in_name_order() {
    let dir = TempDir::new("glob");
    for (name, n) in [("t_002.bin", 30), ("t_000.bin", 10), ("t_001.bin", 20)] {
        write_shard(dir.path(name), &random_tokens(n, n as u64)).unwrap();
    }
    write_shard(dir.path("v_000.bin"), &[1, 2, 3]).unwrap();
    let shards = TokenShards::glob(dir.path("t_*.bin")).unwrap();
    let lens: Vec<_> = shards.shards().iter().map(|s| s.len()).collect();
    assert_eq!(lens, [10, 20, 30]);
    assert_eq!(shards.tokens(), 60);
    assert_eq!(
        TokenShards::glob(dir.path("t_00?.bin"))
            .unwrap()
            .shards()
            .len(),
        3
    );

    match TokenShards::glob(dir.path("x_*.bin")) {
        Err(Error::Source(SourceError::NoMatch { pattern })) => {
            assert_eq!(pattern, dir.path("x_*.bin"))
        }
        other => panic!("expected NoMatch, got {other:?}"),
    }
    let err = TokenShards::glob(dir.0.join("*").join("t_000.bin")).unwrap_err();
    assert!(
        matches!(err, Error::Source(SourceError::BadPattern { .. })),
        "{err}"
    );
    let none: [&Path; 0] = [];
    assert!(matches!(
        TokenShards::open(none),
        Err(Error::Source(SourceError::NoFiles))
    ));
}

// ---------------------------------------------------------------------------------------
// Malformed files: each a clear error naming the file, never a panic

#[test]
fn malformed_shards_are_named_errors() {
    let dir = TempDir::new("malformed");
    let good = random_tokens(100, 3);
    type Check = fn(&FileProblem) -> bool;
    /// (name, how to make the file, the problem expected, a phrase the message has).
    type Case = (&'static str, Box<dyn Fn(&Path)>, Check, &'static str);
    let cases: Vec<Case> = vec![
        (
            "empty",
            Box::new(|p| std::fs::write(p, []).unwrap()),
            |f| matches!(f, FileProblem::Empty),
            "empty",
        ),
        (
            "truncated_header",
            Box::new(|p| std::fs::write(p, SHARD_MAGIC.to_le_bytes().repeat(100)).unwrap()),
            |f| {
                matches!(
                    f,
                    FileProblem::TruncatedHeader {
                        len: 400,
                        needed: 1024
                    }
                )
            },
            "truncated header",
        ),
        (
            "one_byte",
            Box::new(|p| std::fs::write(p, [7]).unwrap()),
            |f| matches!(f, FileProblem::TruncatedHeader { len: 1, .. }),
            "truncated header",
        ),
        (
            "wrong_magic",
            Box::new(move |p| raw_shard(p, [20240521, 1, 100], &random_tokens(100, 3), &[])),
            |f| {
                matches!(
                    f,
                    FileProblem::BadMagic {
                        found: 20240521,
                        expected: 20240520
                    }
                )
            },
            "magic",
        ),
        (
            "wrong_version",
            Box::new(move |p| raw_shard(p, [20240520, 2, 100], &random_tokens(100, 3), &[])),
            |f| {
                matches!(
                    f,
                    FileProblem::BadVersion {
                        found: 2,
                        expected: 1
                    }
                )
            },
            "version",
        ),
        (
            "zero_tokens",
            Box::new(|p| raw_shard(p, [20240520, 1, 0], &[], &[])),
            |f| matches!(f, FileProblem::BadTokenCount { count: 0 }),
            "token count",
        ),
        (
            "negative_tokens",
            Box::new(|p| raw_shard(p, [20240520, 1, -5], &[], &[])),
            |f| matches!(f, FileProblem::BadTokenCount { count: -5 }),
            "token count",
        ),
        (
            "count_beyond_file",
            Box::new(move |p| raw_shard(p, [20240520, 1, 101], &random_tokens(100, 3), &[])),
            |f| {
                matches!(
                    f,
                    FileProblem::TokensBeyondFile {
                        count: 101,
                        needed: 1226,
                        len: 1224
                    }
                )
            },
            "beyond the file",
        ),
        (
            "huge_count",
            Box::new(move |p| raw_shard(p, [20240520, 1, i32::MAX], &random_tokens(100, 3), &[])),
            |f| matches!(f, FileProblem::TokensBeyondFile { .. }),
            "beyond the file",
        ),
        (
            "odd_trailing_byte",
            Box::new(move |p| raw_shard(p, [20240520, 1, 100], &random_tokens(100, 3), &[9])),
            |f| {
                matches!(
                    f,
                    FileProblem::TrailingBytes {
                        count: 100,
                        extra: 1,
                        token_bytes: 2
                    }
                )
            },
            "trailing",
        ),
        (
            "header_only",
            Box::new(|p| raw_shard(p, [20240520, 1, 1], &[], &[])),
            |f| matches!(f, FileProblem::TokensBeyondFile { count: 1, .. }),
            "beyond the file",
        ),
        (
            "unfinished_writer",
            Box::new(|p| {
                let mut w = ShardWriter::create(p).unwrap();
                w.write(&[1, 2, 3]).unwrap();
                drop(w); // never finished: the header still counts 0
            }),
            |f| matches!(f, FileProblem::BadTokenCount { count: 0 }),
            "token count",
        ),
    ];
    for (name, make, check, phrase) in cases {
        let path = dir.path(&format!("{name}.bin"));
        make(&path);
        let err = open_err(&path);
        assert!(check(file_problem(&err)), "{name}: unexpected {err:?}");
        let text = err.to_string();
        assert!(
            text.contains(&*path.to_string_lossy()),
            "{name}: `{text}` names no file"
        );
        assert!(
            text.contains(phrase),
            "{name}: `{text}` does not say `{phrase}`"
        );

        // In a list, the bad file is the error and is named, good files or not.
        let ok = dir.path("good.bin");
        write_shard(&ok, &good).unwrap();
        let err = TokenShards::open([&ok, &path]).unwrap_err();
        assert!(
            err.to_string().contains(&*path.to_string_lossy()),
            "{name}: {err}"
        );
    }

    // A missing file is an io error naming it.
    let missing = dir.path("missing.bin");
    let err = open_err(&missing);
    assert!(
        matches!(file_problem(&err), FileProblem::Io(e) if e.kind() == std::io::ErrorKind::NotFound)
    );
    assert!(err.to_string().contains(&*missing.to_string_lossy()));

    // A directory is not a shard either: the message says it is a directory.
    let err = open_err(&dir.0);
    assert!(
        matches!(file_problem(&err), FileProblem::IsDirectory),
        "{err:?}"
    );
    assert!(err.to_string().contains("is a directory"), "{err}");

    // The writer refuses to make a shard the reader would refuse.
    let err = write_shard(dir.path("nothing.bin"), &[]).unwrap_err();
    assert!(matches!(
        file_problem(&err),
        FileProblem::BadTokenCount { count: 0 }
    ));
}

#[test]
fn malformed_record_files_are_named_errors() {
    let dir = TempDir::new("records-bad");
    let empty = dir.path("empty.rec");
    std::fs::write(&empty, []).unwrap();
    let err = FixedRecords::open([&empty], 8).unwrap_err();
    assert!(matches!(file_problem(&err), FileProblem::Empty));
    assert!(err.to_string().contains(&*empty.to_string_lossy()));

    let partial = dir.path("partial.rec");
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
    let err = FixedRecords::open([dir.path("missing.rec")], 4).unwrap_err();
    assert!(matches!(file_problem(&err), FileProblem::Io(_)));
}

// ---------------------------------------------------------------------------------------
// Sampler settings

#[test]
fn sampler_rejects_bad_settings() {
    let dir = TempDir::new("settings");
    let (src, _) = shards(&dir, &[50, 20]);
    let err = |b: pinring::source::SamplerBuilder<TokenShards>| match b.build() {
        Err(Error::Source(e)) => e,
        other => panic!("expected a source error, got {other:?}"),
    };
    assert!(matches!(
        err(src.clone().windows(0)),
        SourceError::Zero("window")
    ));
    assert!(matches!(
        err(src.clone().windows(5).stride(0)),
        SourceError::Zero("stride")
    ));
    assert!(matches!(
        err(src.clone().windows(5).shard(0, 0)),
        SourceError::Zero("world_size")
    ));
    assert!(matches!(
        err(src.clone().windows(5).shard(3, 3)),
        SourceError::BadRank {
            rank: 3,
            world_size: 3
        }
    ));
    assert!(matches!(
        err(src.clone().windows(51)),
        SourceError::NoWindows {
            window: 51,
            longest: 50
        }
    ));
    // Windows of 26 at stride 25: one in the shard of 50, none in the one of 20, so rank 2
    // of 3 would get none. That is the rank's empty share, not a window that does not fit.
    let e = err(src.clone().windows(26).shard(2, 3));
    assert!(
        matches!(
            e,
            SourceError::EmptyShare {
                rank: 2,
                world_size: 3,
                windows: 1,
                even_ranks: false
            }
        ),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.starts_with("rank 2's share of the epoch is empty"),
        "{text}"
    );
    assert!(!text.contains("fits"), "{text}");
    // With even_ranks, every rank's share is empty, and the message says why.
    let e = err(src.clone().windows(26).shard(0, 3).even_ranks(true));
    assert!(
        matches!(
            e,
            SourceError::EmptyShare {
                rank: 0,
                even_ranks: true,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("even_ranks drops them all"), "{e}");

    let sampler = src.windows(11).build().unwrap(); // (50-11)/10+1 = 4, (20-11)/10+1 = 1
    assert_eq!(sampler.epoch_len(), 5);
    assert!(sampler.iter_from(Position { epoch: 2, index: 5 }).is_ok());
    match sampler.iter_from(Position { epoch: 2, index: 6 }) {
        Err(Error::Source(SourceError::BadPosition { index: 6, len: 5 })) => {}
        other => panic!("expected BadPosition, got {other:?}"),
    }
    // An index equal to the length is the next epoch's start.
    let it = sampler.iter_from(Position { epoch: 2, index: 5 }).unwrap();
    assert_eq!(it.position(), Position { epoch: 3, index: 0 });
}

#[test]
fn sequential_windows_follow_the_grid() {
    let dir = TempDir::new("grid");
    let (src, written) = shards(&dir, &[100, 7, 64]);
    // T = 8: windows of 9 at stride 8, never across a shard's end.
    let sampler = src.windows(9).build().unwrap();
    let mut expected = Vec::new();
    for (s, tokens) in written.iter().enumerate() {
        let mut start = 0;
        while start + 9 <= tokens.len() {
            expected.push((s, start, tokens[start..start + 9].to_vec()));
            start += 8;
        }
    }
    assert_eq!(sampler.grid_windows(), expected.len() as u64);
    let got: Vec<_> = sampler.epoch(0).collect();
    assert_eq!(got.len(), expected.len());
    for (w, (s, start, tokens)) in got.iter().zip(&expected) {
        assert_eq!(w.shard().path(), dir.path(&format!("shard_{s:03}.bin")));
        assert_eq!((w.start(), w.to_vec()), (*start, widened(tokens)));
    }
    // Sequential epochs repeat, and the endless iterator runs straight into the next.
    let two: Vec<_> = sampler
        .iter()
        .take(2 * got.len())
        .map(|w| key(&w))
        .collect();
    let one: Vec<_> = got.iter().map(key).collect();
    assert_eq!(two[..one.len()], one[..]);
    assert_eq!(two[one.len()..], one[..]);
}

// ---------------------------------------------------------------------------------------
// Sharding by rank

#[test]
fn ranks_are_disjoint_and_complete() {
    let dir = TempDir::new("ranks");
    // Odd lengths, one shard too short for any window.
    let (src, _) = shards(&dir, &[1000, 5, 333, 1777]);
    for order in [
        Order::Sequential,
        Order::Shuffled { seed: 9 },
        Order::Random { seed: 9 },
    ] {
        let whole = src.clone().windows(17).order(order).build().unwrap();
        for epoch in [0, 1, 5] {
            let all: Vec<_> = whole.epoch(epoch).map(|w| key(&w)).collect();
            assert_eq!(all.len() as u64, whole.grid_windows());
            if order != (Order::Random { seed: 9 }) {
                // A grid epoch visits every window exactly once.
                let set: BTreeSet<_> = all.iter().cloned().collect();
                assert_eq!(set.len(), all.len(), "{order:?}: a window twice");
            }
            for world in 1..=6u64 {
                let ranks: Vec<Vec<_>> = (0..world)
                    .map(|r| {
                        let s = src.clone().windows(17).order(order).shard(r, world).build();
                        s.unwrap().epoch(epoch).map(|w| key(&w)).collect()
                    })
                    .collect();
                // Rank r's i-th sample is sample r + world*i of the unsharded epoch:
                // disjoint (as draws) and, together, exactly the whole epoch.
                let mut merged = vec![None; all.len()];
                for (r, samples) in ranks.iter().enumerate() {
                    let lens: Vec<_> = ranks.iter().map(Vec::len).collect();
                    assert!(lens.iter().max().unwrap() - lens.iter().min().unwrap() <= 1);
                    for (i, k) in samples.iter().enumerate() {
                        let j = r + world as usize * i;
                        assert!(merged[j].is_none(), "{order:?}: draw {j} twice");
                        merged[j] = Some(k.clone());
                    }
                }
                let merged: Vec<_> = merged
                    .into_iter()
                    .map(|k| k.expect("a draw no rank took"))
                    .collect();
                assert_eq!(merged, all, "{order:?} epoch {epoch} world {world}");
                if order != (Order::Random { seed: 9 }) {
                    let mut seen = BTreeSet::new();
                    for k in ranks.iter().flatten() {
                        assert!(seen.insert(k.clone()), "{order:?}: ranks overlap at {k:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn even_ranks_have_equal_epochs() {
    let dir = TempDir::new("even");
    let (src, _) = shards(&dir, &[1001]);
    let windows = src.clone().windows(11).build().unwrap().grid_windows(); // 100
    assert_eq!(windows, 100);
    for world in [3u64, 7] {
        let mut seen = BTreeSet::new();
        for r in 0..world {
            let s = src
                .clone()
                .windows(11)
                .order(Order::Shuffled { seed: 1 })
                .shard(r, world)
                .even_ranks(true)
                .build()
                .unwrap();
            assert_eq!(s.epoch_len(), windows / world);
            assert_eq!(s.epoch_windows(), windows - windows % world);
            for w in s.epoch(0) {
                assert!(seen.insert(key(&w)));
            }
        }
        assert_eq!(seen.len() as u64, windows - windows % world);
    }
}

// ---------------------------------------------------------------------------------------
// Determinism

#[test]
fn same_seed_epoch_rank_same_order() {
    let dir = TempDir::new("determinism");
    let (_, _) = shards(&dir, &[4000, 2500]);
    let build = |order, rank| {
        // Opened afresh each time: nothing is shared between the two samplers.
        TokenShards::glob(dir.path("shard_*.bin"))
            .unwrap()
            .windows(33)
            .order(order)
            .shard(rank, 3)
            .build()
            .unwrap()
    };
    let starts = |s: &Sampler<TokenShards>, e| -> Vec<_> { s.epoch(e).map(|w| key(&w)).collect() };
    for order in [Order::Shuffled { seed: 5 }, Order::Random { seed: 5 }] {
        for rank in 0..3 {
            let (a, b) = (build(order, rank), build(order, rank));
            for e in [0, 1, 1_000_000] {
                assert_eq!(
                    starts(&a, e),
                    starts(&b, e),
                    "{order:?} rank {rank} epoch {e}"
                );
            }
            assert_ne!(
                starts(&a, 0),
                starts(&a, 1),
                "{order:?}: epochs must reshuffle"
            );
        }
        let other = match order {
            Order::Shuffled { .. } => Order::Shuffled { seed: 6 },
            _ => Order::Random { seed: 6 },
        };
        assert_ne!(starts(&build(order, 0), 0), starts(&build(other, 0), 0));
    }
}

/// The orders are pinned to these values, on every build and version: a change to the
/// generator, the shuffle or the epoch key fails here.
#[test]
fn orders_are_pinned() {
    let dir = TempDir::new("golden");
    write_shard(dir.path("a.bin"), &vec![0; 1001]).unwrap();
    write_shard(dir.path("b.bin"), &vec![0; 501]).unwrap();
    let src = TokenShards::glob(dir.path("*.bin")).unwrap(); // 100 + 50 windows of 11
    let first = |order, rank, epoch| -> Vec<(usize, usize)> {
        let s = src
            .clone()
            .windows(11)
            .order(order)
            .shard(rank, 2)
            .build()
            .unwrap();
        s.epoch(epoch)
            .take(6)
            .map(|w| (usize::from(w.shard().len() == 501), w.start()))
            .collect()
    };
    let shuffled = Order::Shuffled { seed: 1337 };
    let random = Order::Random { seed: 1337 };
    let got = [
        first(shuffled, 0, 0),
        first(shuffled, 1, 0),
        first(shuffled, 0, 1),
        first(random, 0, 0),
        first(random, 1, 3),
    ];
    // (shard, start) pairs. Cross-checked against an independent implementation of the
    // documented generator (splitmix64, epoch_key, Durstenfeld shuffle, Lemire's below).
    let golden: [[(usize, usize); 6]; 5] = [
        [(0, 780), (0, 770), (1, 360), (1, 200), (0, 480), (0, 160)],
        [(0, 890), (1, 90), (0, 980), (0, 380), (1, 70), (1, 300)],
        [(0, 840), (0, 660), (1, 10), (0, 400), (1, 120), (0, 210)],
        [(0, 577), (1, 369), (1, 349), (0, 792), (0, 518), (0, 445)],
        [(1, 283), (0, 326), (0, 130), (0, 316), (1, 82), (1, 229)],
    ];
    assert_eq!(got, golden.map(|g| g.to_vec()));
}

// ---------------------------------------------------------------------------------------
// Resume

#[test]
fn resumed_iterators_continue_exactly() {
    let dir = TempDir::new("resume-iter");
    let (src, _) = shards(&dir, &[900, 433]);
    for order in [
        Order::Sequential,
        Order::Shuffled { seed: 77 },
        Order::Random { seed: 77 },
    ] {
        let s = src
            .clone()
            .windows(9)
            .order(order)
            .shard(1, 3)
            .build()
            .unwrap();
        let len = s.epoch_len();
        let continuous: Vec<_> = s
            .iter()
            .take((3 * len + 7) as usize)
            .map(|w| key(&w))
            .collect();
        for stop in [0, 1, len - 1, len, len + 1, 2 * len + 3] {
            let mut run = s.iter();
            let before: Vec<_> = run.by_ref().take(stop as usize).map(|w| key(&w)).collect();
            let at = s.position_after(Position::default(), stop);
            assert_eq!(run.position(), at);
            assert_eq!(
                at,
                Position {
                    epoch: stop / len,
                    index: stop % len
                }
            );
            let after: Vec<_> = s
                .iter_from(at)
                .unwrap()
                .take(continuous.len() - stop as usize)
                .map(|w| key(&w))
                .collect();
            assert_eq!(
                [before, after].concat(),
                continuous,
                "{order:?} stop {stop}"
            );
            assert_eq!(
                s.sample_at(at).map(|w| key(&w)),
                continuous.get(stop as usize).cloned()
            );
        }
    }
}

/// Bytes of every batch a pipeline delivers.
fn drain(pipeline: &mut Pipeline, batches: Option<usize>, out: &mut Vec<Vec<u8>>) -> usize {
    let mut n = 0;
    while batches.is_none_or(|b| n < b) {
        let Some(batch) = pipeline.pop().unwrap() else {
            break;
        };
        out.push(batch.bytes().to_vec());
        batch
            .release(Fence::Sync)
            .expect("a Sync fence always captures");
        n += 1;
    }
    n
}

fn token_config(decoder: &impl TokenBytes, window: u64, batch: usize) -> Config {
    Config::builder()
        .batch_size(batch)
        .bytes_per_sample(decoder.bytes_for(window))
        .decode_threads(2)
        .build()
        .unwrap()
}

trait TokenBytes {
    fn bytes_for(&self, window: u64) -> usize;
}
impl TokenBytes for Tokens {
    fn bytes_for(&self, window: u64) -> usize {
        self.sample_bytes(window)
    }
}
impl TokenBytes for NextToken {
    fn bytes_for(&self, window: u64) -> usize {
        self.sample_bytes(window)
    }
}

#[test]
fn resumed_pipeline_gives_the_batches_of_a_continuous_run() {
    let dir = TempDir::new("resume-pipeline");
    let (src, _) = shards(&dir, &[3000, 1234]);
    const B: usize = 4;
    const W: u64 = 33;
    let decoder = NextToken::new(TokenType::I32);
    let sampler = src
        .windows(W)
        .order(Order::Shuffled { seed: 2024 })
        .shard(1, 2)
        .build()
        .unwrap();
    // Crosses epoch boundaries; a batch ends at each (the epochs are not multiples of B).
    let samples = 3 * sampler.epoch_len() as usize + 5 * B;
    let sample_bytes = decoder.sample_bytes(W);
    let mut continuous = Vec::new();
    let mut p = Pipeline::new(
        token_config(&decoder, W, B),
        decoder,
        sampler.iter().take(samples),
    )
    .unwrap();
    let total = drain(&mut p, None, &mut continuous);
    drop(p);
    assert_eq!(
        continuous.iter().map(Vec::len).sum::<usize>(),
        samples * sample_bytes
    );
    assert!(total > samples / B, "short batches at the epochs' ends");

    for stop in [1, sampler.epoch_len() as usize / B + 1, total - 1] {
        let mut resumed = Vec::new();
        // The first run is endless and stopped after `stop` batches, decode running ahead.
        let mut first =
            Pipeline::new(token_config(&decoder, W, B), decoder, sampler.iter()).unwrap();
        assert_eq!(drain(&mut first, Some(stop), &mut resumed), stop);
        drop(first);
        let consumed = resumed.iter().map(Vec::len).sum::<usize>() / sample_bytes;
        let at = sampler.position_after(Position::default(), consumed as u64);
        let mut second = Pipeline::new(
            token_config(&decoder, W, B),
            decoder,
            sampler.iter_from(at).unwrap().take(samples - consumed),
        )
        .unwrap();
        assert_eq!(drain(&mut second, None, &mut resumed), total - stop);
        assert!(resumed == continuous, "resume after {stop} batches differs");
    }
}

// ---------------------------------------------------------------------------------------
// Through a real pipeline, every byte

fn le(ty: TokenType, t: u16) -> Vec<u8> {
    match ty {
        TokenType::U16 => t.to_le_bytes().to_vec(),
        TokenType::I32 => i32::from(t).to_le_bytes().to_vec(),
        TokenType::I64 => i64::from(t).to_le_bytes().to_vec(),
    }
}

#[test]
fn token_batches_through_the_pipeline_byte_for_byte() {
    let dir = TempDir::new("pipeline");
    let (src, written) = shards(&dir, &[5000, 129, 2049]);
    const T: usize = 64;
    const B: usize = 8;
    // The expected samples, from the tokens written (not from the reader).
    let mut windows: Vec<&[u16]> = Vec::new();
    for tokens in &written {
        let mut s = 0;
        while s + T < tokens.len() {
            windows.push(&tokens[s..s + T + 1]);
            s += T;
        }
    }
    let sampler = src.windows(T as u64 + 1).build().unwrap();
    assert_eq!(sampler.epoch_len(), windows.len() as u64);
    for ty in [TokenType::U16, TokenType::I32, TokenType::I64] {
        let epochs = 2;
        let expected: Vec<u8> = windows
            .iter()
            .cycle()
            .take(epochs * windows.len())
            .flat_map(|w| {
                let inputs = w[..T].iter().flat_map(|&t| le(ty, t));
                let targets = w[1..].iter().flat_map(|&t| le(ty, t));
                inputs.chain(targets).collect::<Vec<_>>()
            })
            .collect();
        let decoder = NextToken::new(ty);
        let mut p = Pipeline::new(
            token_config(&decoder, T as u64 + 1, B),
            decoder,
            sampler.iter().take(epochs * windows.len()),
        )
        .unwrap();
        let mut got = Vec::new();
        let n = drain(&mut p, None, &mut got);
        assert_eq!(n, (epochs * windows.len()).div_ceil(B));
        let got = got.concat();
        assert_eq!(got.len(), expected.len(), "{ty}");
        assert!(got == expected, "{ty}: batch bytes differ");

        // The plain widening decoder: each sample is the window itself.
        let decoder = Tokens::new(ty);
        let mut p = Pipeline::new(
            token_config(&decoder, T as u64 + 1, B),
            decoder,
            sampler.epoch(0),
        )
        .unwrap();
        let mut got = Vec::new();
        drain(&mut p, None, &mut got);
        let expected: Vec<u8> = windows
            .iter()
            .flat_map(|w| w.iter().flat_map(|&t| le(ty, t)))
            .collect();
        assert!(got.concat() == expected, "{ty}: Tokens bytes differ");
    }
}

#[test]
fn records_through_the_pipeline() {
    let dir = TempDir::new("records");
    const R: usize = 24;
    let mut paths = Vec::new();
    let mut all = BTreeMap::new();
    for (f, n) in [(0u8, 37usize), (1, 64)] {
        let bytes: Vec<u8> = (0..n * R)
            .map(|i| (i * 7 + usize::from(f) * 13) as u8)
            .collect();
        for (i, rec) in bytes.chunks(R).enumerate() {
            all.insert((f, i), rec.to_vec());
        }
        let path = dir.path(&format!("rec_{f}.bin"));
        std::fs::write(&path, &bytes).unwrap();
        paths.push(path);
    }
    let records = FixedRecords::glob(dir.path("rec_*.bin"), R).unwrap();
    assert_eq!(records.records(), 101);
    let sampler = Sampler::builder(records)
        .order(Order::Shuffled { seed: 3 })
        .build()
        .unwrap();
    let order: Vec<_> = sampler
        .epoch(0)
        .map(|w| (u8::from(w.file().path() == paths[1]), w.start()))
        .collect();
    let config = Config::builder()
        .batch_size(10)
        .bytes_per_sample(R)
        .decode_threads(2)
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, RecordBytes, sampler.epoch(0)).unwrap();
    let mut got = Vec::new();
    assert_eq!(drain(&mut p, None, &mut got), 11); // 10 full batches and one of 1
    let expected: Vec<u8> = order.iter().flat_map(|k| all[k].clone()).collect();
    assert!(got.concat() == expected);
    let visited: BTreeSet<_> = order.into_iter().collect();
    assert_eq!(visited.len(), 101, "every record once per epoch");
}

// ---------------------------------------------------------------------------------------
// Decoders never panic

#[test]
fn decoders_reject_wrong_sizes() {
    let dir = TempDir::new("decoders");
    let (src, _) = shards(&dir, &[100]);
    let window = |len: u64| {
        src.clone()
            .windows(len)
            .build()
            .unwrap()
            .iter()
            .next()
            .unwrap()
    };
    for ty in [TokenType::U16, TokenType::I32, TokenType::I64] {
        for len in [0, 1, 9, 10, 11, 100, 10_000] {
            let mut out = vec![0u8; len];
            let w = window(10);
            let tokens_ok = len == 10 * ty.bytes();
            assert_eq!(
                Tokens::new(ty).decode(w.clone(), &mut out).is_ok(),
                tokens_ok
            );
            let next_ok = len == 18 * ty.bytes();
            assert_eq!(NextToken::new(ty).decode(w, &mut out).is_ok(), next_ok);
        }
        // A window of one token has no (input, target) pair.
        let err = NextToken::new(ty).decode(window(1), &mut []).unwrap_err();
        assert!(err.to_string().contains("at least 2 tokens"), "{err}");
    }

    // A misconfigured pipeline reports the decoder's message, no panic.
    let decoder = NextToken::new(TokenType::I32);
    let config = Config::builder()
        .batch_size(2)
        .bytes_per_sample(decoder.sample_bytes(11) + 4)
        .decode_threads(1)
        .build()
        .unwrap();
    let sampler = src.windows(11).build().unwrap();
    let mut p = Pipeline::new(config, decoder, sampler.iter()).unwrap();
    match p.pop() {
        Err(Error::Decode {
            seq: 0,
            sample: 0,
            message,
        }) => {
            assert!(message.contains("NextToken::sample_bytes"), "{message}")
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Errors that name the real cause

#[test]
fn a_directory_or_a_device_is_named_as_such() {
    let dir = TempDir::new("not-files");
    let sub = dir.path("data");
    std::fs::create_dir(&sub).unwrap();
    // As a shard, as a record file, in a list, and through a glob that matches it.
    let errs = [
        TokenShard::open(&sub).unwrap_err(),
        FixedRecords::open([&sub], 4).unwrap_err(),
        TokenShards::open([&sub]).unwrap_err(),
        TokenShards::glob(dir.path("dat*")).unwrap_err(),
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

/// The case: 100000 ranks over a shard of far fewer windows. The message's main
/// cause is the empty share, and it gives the numbers.
#[test]
fn an_empty_rank_share_is_named_as_the_cause() {
    let dir = TempDir::new("empty-share");
    let (src, _) = shards(&dir, &[10_000]);
    let err = src
        .clone()
        .windows(1025)
        .shard(99_999, 100_000)
        .build()
        .unwrap_err();
    let Error::Source(e) = &err else {
        panic!("not a source error: {err:?}")
    };
    // 10000 tokens at stride 1024: 9 windows of 1025.
    assert!(
        matches!(
            e,
            SourceError::EmptyShare {
                rank: 99_999,
                world_size: 100_000,
                windows: 9,
                even_ranks: false
            }
        ),
        "{e:?}"
    );
    assert_eq!(
        err.to_string(),
        "rank 99999's share of the epoch is empty: the epoch has 9 window(s) for 100000 \
         ranks, so ranks 9 to 99999 get none; use fewer ranks, shorter windows or more data"
    );
    // Rank 8 of the same world still gets its one window.
    assert_eq!(
        src.clone()
            .windows(1025)
            .shard(8, 100_000)
            .build()
            .unwrap()
            .epoch_len(),
        1
    );
    // A window longer than every file is still NoWindows, and says only that.
    let err = src
        .windows(10_001)
        .shard(99_999, 100_000)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Source(SourceError::NoWindows {
                window: 10_001,
                longest: 10_000
            })
        ),
        "{err:?}"
    );
    assert_eq!(
        err.to_string(),
        "no window of 10001 units fits: the longest file holds 10000"
    );
}

// ---------------------------------------------------------------------------------------
// llm.c's u32 (LLaMA-3) shards

#[test]
fn u32_shards_round_trip() {
    let dir = TempDir::new("u32-roundtrip");
    let tokens = random_tokens_u32(10_007, 5);
    assert!(tokens.iter().any(|&t| t > u32::from(u16::MAX)));
    let path = dir.path("a.bin");
    write_shard_u32(&path, &tokens).unwrap();

    // The bytes on disk are llm.c's LLaMA-3 format exactly.
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 1024 + 4 * tokens.len());
    let word = |i: usize| i32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap());
    assert_eq!((word(0), word(1), word(2)), (20240801, 7, 10_007));
    assert_eq!((SHARD_MAGIC_U32, SHARD_VERSION_U32), (20240801, 7));
    assert!(bytes[12..1024].iter().all(|&b| b == 0));
    let on_disk: Vec<u32> = bytes[1024..]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(on_disk, tokens);

    let shard = TokenShard::open(&path).unwrap();
    assert_eq!(shard.format(), ShardFormat::U32);
    assert_eq!(shard.format().token_bytes(), 4);
    assert_eq!(shard.len(), tokens.len());
    assert!((0..tokens.len()).all(|i| shard.token(i) == Some(tokens[i])));
    assert_eq!(shard.token(tokens.len()), None);
    assert_eq!(shard.token_bytes(), &bytes[1024..]);

    // Written in pieces, by either constructor, the same file.
    for (i, generic) in [false, true].into_iter().enumerate() {
        let path2 = dir.path(&format!("b{i}.bin"));
        let mut writer = if generic {
            ShardWriter::<u32>::create_as(&path2).unwrap()
        } else {
            ShardWriter::create_u32(&path2).unwrap()
        };
        assert_eq!(writer.format(), ShardFormat::U32);
        for chunk in tokens.chunks(3001) {
            writer.write(chunk).unwrap();
        }
        assert_eq!(writer.finish().unwrap(), tokens.len() as u64);
        assert_eq!(std::fs::read(&path2).unwrap(), bytes);
    }

    // Windows read the u32 tokens.
    let sampler = TokenShards::open([&path])
        .unwrap()
        .windows(65)
        .build()
        .unwrap();
    for w in sampler.epoch(0) {
        assert_eq!(w.format(), ShardFormat::U32);
        assert_eq!(w.to_vec(), tokens[w.start()..w.start() + w.len()]);
        assert_eq!(w.bytes().len(), 4 * w.len());
    }

    // A file made by hand in the format (not by this crate's writer) opens too.
    let by_hand = dir.path("hand.bin");
    raw_shard_u32(&by_hand, [20240801, 7, 3], &[0, 128_255, u32::MAX], &[]);
    let shard = TokenShard::open(&by_hand).unwrap();
    assert_eq!(
        (0..3).map(|i| shard.token(i)).collect::<Vec<_>>(),
        [Some(0), Some(128_255), Some(u32::MAX)]
    );
    // The GPT-2 format still reads as u16.
    write_shard(dir.path("u16.bin"), &[1, 2, 65535]).unwrap();
    let shard = TokenShard::open(dir.path("u16.bin")).unwrap();
    assert_eq!(
        (shard.format(), shard.token(2)),
        (ShardFormat::U16, Some(65535))
    );
}

#[test]
fn malformed_shards_of_each_format_are_named_errors() {
    let dir = TempDir::new("malformed-formats");
    let t16 = random_tokens(100, 3);
    let t32 = random_tokens_u32(100, 3);
    let as_u32: Vec<u32> = t16.iter().map(|&t| u32::from(t)).collect();
    let as_u16: Vec<u16> = t32
        .iter()
        .flat_map(|&t| [t as u16, (t >> 16) as u16])
        .collect();
    type Check = fn(&FileProblem) -> bool;
    /// (name, how to make the file, the problem expected, phrases the message has).
    type Case = (
        &'static str,
        Box<dyn Fn(&Path)>,
        Check,
        &'static [&'static str],
    );
    let cases: Vec<Case> = vec![
        (
            "u16_magic_u32_version",
            Box::new({
                let t = t16.clone();
                move |p| raw_shard(p, [20240520, 7, 100], &t, &[])
            }),
            |f| {
                matches!(
                    f,
                    FileProblem::BadVersion {
                        found: 7,
                        expected: 1
                    }
                )
            },
            &[
                "unsupported version 7",
                "u16 (llm.c GPT-2)",
                "magic 20240520",
                "expected 1",
            ],
        ),
        (
            "u32_magic_u16_version",
            Box::new({
                let t = t32.clone();
                move |p| raw_shard_u32(p, [20240801, 1, 100], &t, &[])
            }),
            |f| {
                matches!(
                    f,
                    FileProblem::BadVersion {
                        found: 1,
                        expected: 7
                    }
                )
            },
            &[
                "unsupported version 1",
                "u32 (llm.c LLaMA-3)",
                "magic 20240801",
                "expected 7",
            ],
        ),
        (
            "u32_bad_version",
            Box::new({
                let t = t32.clone();
                move |p| raw_shard_u32(p, [20240801, 8, 100], &t, &[])
            }),
            |f| {
                matches!(
                    f,
                    FileProblem::BadVersion {
                        found: 8,
                        expected: 7
                    }
                )
            },
            &["unsupported version 8", "u32"],
        ),
        (
            "neither_magic",
            Box::new({
                let t = t32.clone();
                move |p| raw_shard_u32(p, [20240802, 7, 100], &t, &[])
            }),
            |f| {
                matches!(
                    f,
                    FileProblem::BadMagic {
                        found: 20240802,
                        ..
                    }
                )
            },
            &["wrong magic number 20240802", "20240520", "20240801"],
        ),
        (
            "u32_truncated",
            Box::new({
                let t = t32.clone();
                move |p| raw_shard_u32(p, [20240801, 7, 101], &t, &[])
            }),
            |f| {
                matches!(
                    f,
                    FileProblem::TokensBeyondFile {
                        count: 101,
                        needed: 1428,
                        len: 1424
                    }
                )
            },
            &["beyond the file"],
        ),
        (
            "u32_truncated_header",
            Box::new(|p| std::fs::write(p, SHARD_MAGIC_U32.to_le_bytes().repeat(10)).unwrap()),
            |f| {
                matches!(
                    f,
                    FileProblem::TruncatedHeader {
                        len: 40,
                        needed: 1024
                    }
                )
            },
            &["truncated header"],
        ),
        (
            "u32_trailing_bytes",
            Box::new({
                let t = t32.clone();
                move |p| raw_shard_u32(p, [20240801, 7, 100], &t, &[1, 2, 3])
            }),
            |f| {
                matches!(
                    f,
                    FileProblem::TrailingBytes {
                        count: 100,
                        extra: 3,
                        token_bytes: 4
                    }
                )
            },
            &["3 trailing bytes"],
        ),
        (
            // A u32 shard behind a u16 header: the file is twice the size it should be.
            "u32_tokens_under_u16_header",
            Box::new({
                let t = as_u32.clone();
                move |p| raw_shard_u32(p, [20240520, 1, 100], &t, &[])
            }),
            |f| {
                matches!(
                    f,
                    FileProblem::TrailingBytes {
                        count: 100,
                        extra: 200,
                        token_bytes: 2
                    }
                )
            },
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
            Box::new({
                let t = as_u16.clone();
                move |p| raw_shard(p, [20240801, 7, 200], &t, &[])
            }),
            |f| matches!(f, FileProblem::TokensBeyondFile { count: 200, .. }),
            &[
                "beyond the file",
                "exactly 2 bytes per counted token",
                "16-bit",
                "u16 tokens go with magic 20240520",
            ],
        ),
    ];
    for (name, make, check, phrases) in cases {
        let path = dir.path(&format!("{name}.bin"));
        make(&path);
        let err = open_err(&path);
        assert!(check(file_problem(&err)), "{name}: unexpected {err:?}");
        let text = err.to_string();
        assert!(text.contains(&*path.to_string_lossy()), "{name}: `{text}`");
        for phrase in phrases {
            assert!(
                text.contains(phrase),
                "{name}: `{text}` does not say `{phrase}`"
            );
        }
    }
    // An odd number of trailing bytes fits no width: no hint.
    let path = dir.path("odd.bin");
    raw_shard(&path, [20240520, 1, 100], &t16, &[9]);
    let text = open_err(&path).to_string();
    assert!(!text.contains("per counted token"), "{text}");
}

/// The token decoders read u32 shards: i32 and i64 byte for byte through the pipeline;
/// u16 refused up front and per window; a token above i32::MAX never wrapped.
#[test]
fn u32_token_batches_through_the_pipeline() {
    let dir = TempDir::new("u32-pipeline");
    let tokens = random_tokens_u32(3001, 9);
    let path = dir.path("llama.bin");
    write_shard_u32(&path, &tokens).unwrap();
    // A GPT-2 shard beside it: shards of both formats may be mixed.
    let t16 = random_tokens(1001, 10);
    write_shard(dir.path("gpt2.bin"), &t16).unwrap();
    let src = TokenShards::open([dir.path("gpt2.bin"), path.clone()]).unwrap();
    assert_eq!(src.format(), ShardFormat::U32);
    assert_eq!(
        TokenShards::open([dir.path("gpt2.bin")]).unwrap().format(),
        ShardFormat::U16
    );
    const T: usize = 32;
    const B: usize = 4;
    let mut windows: Vec<Vec<u32>> = Vec::new();
    for all in [widened(&t16), tokens.clone()] {
        let mut s = 0;
        while s + T < all.len() {
            windows.push(all[s..s + T + 1].to_vec());
            s += T;
        }
    }
    let sampler = src.clone().windows(T as u64 + 1).build().unwrap();
    assert_eq!(sampler.epoch_len(), windows.len() as u64);
    for ty in [TokenType::I32, TokenType::I64] {
        src.check_token_type(ty).unwrap();
        let le = |t: u32| match ty {
            TokenType::I32 => i32::try_from(t).unwrap().to_le_bytes().to_vec(),
            _ => i64::from(t).to_le_bytes().to_vec(),
        };
        let expected: Vec<u8> = windows
            .iter()
            .flat_map(|w| {
                let inputs = w[..T].iter().map(|&t| le(t));
                let targets = w[1..].iter().map(|&t| le(t));
                inputs.chain(targets).flatten().collect::<Vec<_>>()
            })
            .collect();
        let decoder = NextToken::new(ty);
        let mut p = Pipeline::new(
            token_config(&decoder, T as u64 + 1, B),
            decoder,
            sampler.epoch(0),
        )
        .unwrap();
        let mut got = Vec::new();
        drain(&mut p, None, &mut got);
        assert!(got.concat() == expected, "{ty}: batch bytes differ");

        let decoder = Tokens::new(ty);
        let mut p = Pipeline::new(
            token_config(&decoder, T as u64 + 1, B),
            decoder,
            sampler.epoch(0),
        )
        .unwrap();
        let mut got = Vec::new();
        drain(&mut p, None, &mut got);
        let expected: Vec<u8> = windows.iter().flatten().flat_map(|&t| le(t)).collect();
        assert!(got.concat() == expected, "{ty}: Tokens bytes differ");
    }

    // u16 cannot hold u32 tokens: refused up front, naming the shard...
    let err = src.check_token_type(TokenType::U16).unwrap_err();
    match &err {
        Error::Source(SourceError::TokenTypeTooNarrow {
            path: p,
            format: ShardFormat::U32,
            ty: TokenType::U16,
        }) => assert_eq!(p, &path),
        other => panic!("expected TokenTypeTooNarrow, got {other:?}"),
    }
    assert!(err.to_string().contains("decode it as i32 or i64"), "{err}");
    // ...and, unchecked, every window of the u32 shard is a decode error (the u16 shard's
    // decode fine).
    let u32_window = sampler
        .epoch(0)
        .find(|w| w.format() == ShardFormat::U32)
        .unwrap();
    let u16_window = sampler.epoch(0).next().unwrap();
    let decoder = NextToken::new(TokenType::U16);
    let mut out = vec![0u8; decoder.sample_bytes(T as u64 + 1)];
    let e = decoder.decode(u32_window.clone(), &mut out).unwrap_err();
    assert!(e.to_string().contains("which u16 cannot hold"), "{e}");
    decoder.decode(u16_window, &mut out).unwrap();
    let mut out = vec![0u8; Tokens::new(TokenType::U16).sample_bytes(T as u64 + 1)];
    assert!(Tokens::new(TokenType::U16)
        .decode(u32_window, &mut out)
        .is_err());
}

#[test]
fn a_u32_token_above_i32_max_is_an_error_not_a_wrap() {
    let dir = TempDir::new("u32-big");
    let path = dir.path("big.bin");
    let mut tokens: Vec<u32> = (0..65).collect();
    tokens[37] = 3_000_000_000;
    write_shard_u32(&path, &tokens).unwrap();
    let src = TokenShards::open([&path]).unwrap();
    // The up-front check passes i32 (it cannot scan the data): decode finds the token.
    src.check_token_type(TokenType::I32).unwrap();
    let sampler = src.windows(17).build().unwrap(); // windows at 0, 16, 32, 48
    let windows: Vec<TokenWindow> = sampler.epoch(0).collect();
    assert_eq!(windows.len(), 4);
    for (i, w) in windows.iter().enumerate() {
        let holds_big = i == 2;
        let tokens = Tokens::new(TokenType::I32);
        let mut out = vec![0u8; tokens.sample_bytes(17)];
        let r = tokens.decode(w.clone(), &mut out);
        assert_eq!(r.is_err(), holds_big, "window {i}");
        if let Err(e) = r {
            let text = e.to_string();
            assert!(text.contains("token 3000000000 (index 37 of"), "{text}");
            assert!(text.contains("does not fit i32"), "{text}");
            assert!(text.contains("decode as i64"), "{text}");
        }
        // i64 holds it.
        let wide = Tokens::new(TokenType::I64);
        let mut out = vec![0u8; wide.sample_bytes(17)];
        wide.decode(w.clone(), &mut out).unwrap();
        let got: Vec<i64> = out
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let want: Vec<i64> = w.tokens().map(i64::from).collect();
        assert_eq!(got, want);
    }
    // Through the pipeline: the batch holding the window fails with the decoder's message,
    // after every batch before it.
    let decoder = NextToken::new(TokenType::I32);
    let mut p = Pipeline::new(token_config(&decoder, 17, 1), decoder, sampler.epoch(0)).unwrap();
    let mut got = Vec::new();
    assert_eq!(drain(&mut p, Some(2), &mut got), 2);
    match p.pop() {
        Err(Error::Decode {
            seq: 2,
            sample: 0,
            message,
        }) => assert!(message.contains("token 3000000000"), "{message}"),
        other => panic!("expected a decode error, got {other:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// Names that match

/// Both window types say where they start and how long they are with the same words,
/// counted in their units (tokens, records), and agree with the bytes they hold.
#[test]
fn windows_name_start_and_len_alike() {
    let dir = TempDir::new("names");
    let path = dir.path("r.bin");
    let bytes: Vec<u8> = (0..40u8).collect();
    std::fs::write(&path, &bytes).unwrap();
    let file = std::sync::Arc::new(RecordFile::open(&path, 4).unwrap());
    let w = RecordWindow::new(file.clone(), 3, 2).unwrap();
    assert_eq!((w.start(), w.len(), w.is_empty()), (3, 2, false));
    assert_eq!(w.bytes(), &bytes[12..20]);
    assert!(RecordWindow::new(file.clone(), 9, 2).is_none());
    assert!(RecordWindow::new(file, usize::MAX, 2).is_none());
    let sampler = Sampler::builder(FixedRecords::open([&path], 4).unwrap())
        .window(3)
        .build()
        .unwrap();
    let starts: Vec<_> = sampler.epoch(0).map(|w| (w.start(), w.len())).collect();
    assert_eq!(starts, [(0, 3), (3, 3), (6, 3)]);

    let spath = dir.path("t.bin");
    write_shard(&spath, &(0..40u16).collect::<Vec<_>>()).unwrap();
    let shard = std::sync::Arc::new(TokenShard::open(&spath).unwrap());
    let w = TokenWindow::new(shard.clone(), 3, 2).unwrap();
    assert_eq!((w.start(), w.len(), w.is_empty()), (3, 2, false));
    assert_eq!(w.to_vec(), [3, 4]);
    assert!(TokenWindow::new(shard, 39, 2).is_none());
}

/// Samples of 512 KiB are one decode item each, so an epoch's short last batch has fewer
/// items than a full one: the lone decode worker's claims on the missing items find the
/// batch filled (or its slot already reused) and must go on to the next batch, epoch after
/// epoch. (They once ended the worker, and the pipeline waited forever.)
#[test]
fn one_decode_worker_crosses_epoch_ends_with_short_batches() {
    let dir = TempDir::new("epoch-ends");
    let t1: u64 = 131_073; // 512 KiB of i32 a sample
    let tokens: Vec<u16> = (0..10 * (t1 - 1) + 1)
        .map(|i| (i / (t1 - 1)) as u16)
        .collect();
    write_shard(dir.path("train_000.bin"), &tokens).unwrap();
    let decoder = Tokens::new(TokenType::I32);
    let sampler = TokenShards::open([dir.path("train_000.bin")])
        .unwrap()
        .windows(t1)
        .order(Order::Shuffled { seed: 3 })
        .build()
        .unwrap(); // 10 windows an epoch: batches of 4, 4 and 2
    for host_slots in [2, 4] {
        let config = Config::builder()
            .batch_size(4)
            .bytes_per_sample(decoder.sample_bytes(t1))
            .host_slots(host_slots)
            .decode_threads(1)
            .pop_timeout(std::time::Duration::from_secs(60)) // a hang fails, not waits
            .build()
            .unwrap();
        let samples = sampler.iter().until_epoch(5);
        let mut pipeline = Pipeline::new(config, decoder, samples).unwrap();
        let mut got = Vec::new();
        while let Some(batch) = pipeline.pop().unwrap() {
            // Window w holds tokens w as i32: each row's first element is its window.
            let rows: Vec<u64> = batch
                .bytes()
                .chunks_exact(decoder.sample_bytes(t1))
                .map(|row| u64::from(u32::from_le_bytes(row[..4].try_into().unwrap())))
                .collect();
            assert_eq!(rows, batch.sample_ids(), "batch {}", batch.seq());
            got.push((batch.epoch(), rows));
            batch.release(Fence::Sync).map_err(|e| e.error).unwrap();
        }
        let sizes: Vec<usize> = got.iter().map(|(_, r)| r.len()).collect();
        assert_eq!(sizes, [4, 4, 2].repeat(5), "H = {host_slots}");
        for epoch in 0..5 {
            let mut ids: Vec<u64> = got
                .iter()
                .filter(|(e, _)| *e == epoch)
                .flat_map(|(_, r)| r.iter().copied())
                .collect();
            ids.sort_unstable();
            assert_eq!(
                ids,
                (0..10).collect::<Vec<_>>(),
                "epoch {epoch}, H = {host_slots}"
            );
        }
    }
}
