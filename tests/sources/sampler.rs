//! The sampler: its settings and their errors, the window grid, sharding by rank,
//! determinism, and `to_builder`.

use std::collections::BTreeSet;

use pinring::source::{
    write_shard, FixedRecords, Order, Position, Sampler, SourceError, TokenShards,
};
use pinring::Error;

use crate::helpers::{key, shards, widened};

#[test]
fn sampler_rejects_bad_settings() {
    let dir = tempfile::tempdir().unwrap();
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
    // No window fits: the longest file is named, and the units are tokens.
    match err(src.clone().windows(51)) {
        SourceError::NoWindows {
            window: 51,
            longest: 50,
            unit: "tokens",
            path: Some(p),
        } => assert_eq!(p, dir.path().join("shard_000.bin")),
        other => panic!("expected NoWindows, got {other:?}"),
    }
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
    let dir = tempfile::tempdir().unwrap();
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
        assert_eq!(
            w.shard().path(),
            dir.path().join(format!("shard_{s:03}.bin"))
        );
        assert_eq!((w.start(), w.to_vec().unwrap()), (*start, widened(tokens)));
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

#[test]
fn ranks_are_disjoint_and_complete() {
    let dir = tempfile::tempdir().unwrap();
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
    let dir = tempfile::tempdir().unwrap();
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

#[test]
fn same_seed_epoch_rank_same_order() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _) = shards(&dir, &[4000, 2500]);
    let build = |order, rank| {
        // Opened afresh each time: nothing is shared between the two samplers.
        TokenShards::glob(dir.path().join("shard_*.bin"))
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
    let dir = tempfile::tempdir().unwrap();
    write_shard(dir.path().join("a.bin"), &vec![0; 1001]).unwrap();
    write_shard(dir.path().join("b.bin"), &vec![0; 501]).unwrap();
    let src = TokenShards::glob(dir.path().join("*.bin")).unwrap(); // 100 + 50 windows of 11
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

/// The case: 100000 ranks over a shard of far fewer windows. The message's main
/// cause is the empty share, and it gives the numbers.
#[test]
fn an_empty_rank_share_is_named_as_the_cause() {
    let dir = tempfile::tempdir().unwrap();
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
    // A window longer than every file is still NoWindows, and says only that: in tokens,
    // naming the file it measured.
    let err = src
        .windows(10_001)
        .shard(99_999, 100_000)
        .build()
        .unwrap_err();
    let file = dir.path().join("shard_000.bin");
    assert_source_error!(
        err,
        SourceError::NoWindows {
            window: 10_001,
            longest: 10_000,
            unit: "tokens",
            path: Some(path),
        } if path == &file
    );
    assert_eq!(
        err.to_string(),
        format!(
            "no window of 10001 tokens fits: the longest file, {}, holds 10000 tokens; use a \
             shorter window (a smaller sequence length) or longer files",
            file.display()
        )
    );
    let Error::Source(e) = &err else {
        unreachable!()
    };
    assert_eq!(e.path(), Some(file.as_path()));
}

/// Records say "records", and the longest of several files is the one named.
#[test]
fn no_window_fits_names_the_longest_file_in_its_units() {
    let dir = tempfile::tempdir().unwrap();
    let (short, long) = (dir.path().join("a.rec"), dir.path().join("b.rec"));
    std::fs::write(&short, [0u8; 8]).unwrap();
    std::fs::write(&long, [0u8; 24]).unwrap();
    let err = Sampler::builder(FixedRecords::open([&short, &long], 4).unwrap())
        .window(7)
        .build()
        .unwrap_err();
    assert_source_error!(
        err,
        SourceError::NoWindows {
            window: 7,
            longest: 6,
            unit: "records",
            path: Some(path),
        } if path == &long
    );
    assert!(err
        .to_string()
        .starts_with("no window of 7 records fits: the longest file, "));
}

/// `to_builder` keeps every setting: its `build` is the same sampler, window for window,
/// and a changed setting changes only that.
#[test]
fn to_builder_keeps_every_setting() {
    let dir = tempfile::tempdir().unwrap();
    let (src, _) = shards(&dir, &[3000, 1234]);
    let sampler = src
        .windows(33)
        .stride(20)
        .order(Order::Random { seed: 4 })
        .shard(2, 3)
        .even_ranks(true)
        .batch_size(5)
        .drop_last(false)
        .build()
        .unwrap();
    let again = sampler.to_builder().build().unwrap();
    assert_eq!(format!("{again:?}"), format!("{sampler:?}"));
    let keys = |s: &Sampler<TokenShards>| s.iter().take(200).map(|w| key(&w)).collect::<Vec<_>>();
    assert_eq!(keys(&again), keys(&sampler));
    assert_eq!(again.checkpoint(1, 7), sampler.checkpoint(1, 7));
    assert_eq!(
        (
            again.window(),
            again.stride(),
            again.order(),
            again.rank(),
            again.world_size()
        ),
        (33, 20, Order::Random { seed: 4 }, 2, 3)
    );
    assert_eq!(
        (again.even_ranks(), again.batch_size(), again.drop_last()),
        (true, Some(5), false)
    );
    let other = sampler
        .to_builder()
        .shard(0, 2)
        .batch_size(8)
        .build()
        .unwrap();
    assert_eq!(
        (other.rank(), other.world_size(), other.batch_size()),
        (0, 2, Some(8))
    );
    assert_eq!(
        (other.window(), other.stride(), other.order()),
        (33, 20, Order::Random { seed: 4 })
    );
    // Without a batch size, even_ranks is what keeps the ranks equal: it is kept too.
    let even = src_even(&dir);
    assert_eq!(
        even.to_builder().build().unwrap().epoch_windows(),
        even.epoch_windows()
    );
}

fn src_even(dir: &tempfile::TempDir) -> Sampler<TokenShards> {
    TokenShards::glob(dir.path().join("shard_*.bin"))
        .unwrap()
        .windows(33)
        .shard(1, 7)
        .even_ranks(true)
        .build()
        .unwrap()
}
