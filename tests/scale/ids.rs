//! Ids and epochs.

use super::*;

#[test]
fn ids_are_stable_across_orders_seeds_epochs_and_ranks() {
    let src = Lengths(vec![100, 7, 64, 250]);
    let grid = |order, world, rank| {
        Run {
            window: 9,
            stride: 8,
            order,
            world,
            batch: None,
            drop_last: true,
        }
        .sampler(&src, rank)
        .unwrap()
    };
    // Sequential: ids are 0, 1, 2, ... in grid order, every epoch.
    let seq = grid(Order::Sequential, 1, 0);
    let n = seq.grid_windows();
    for e in [0, 3] {
        let w: Vec<Win> = seq.epoch(e).collect();
        assert_eq!(
            w.iter().map(|w| w.id).collect::<Vec<_>>(),
            (0..n).collect::<Vec<_>>()
        );
        assert!(w.iter().all(|w| w.epoch == e));
    }
    let place: Vec<(usize, u64)> = seq.epoch(0).map(|w| (w.segment, w.start)).collect();
    // Under every grid order, seed, epoch, rank and world size, a window's id names the
    // same place.
    for order in [Order::Shuffled { seed: 1 }, Order::Shuffled { seed: 2 }] {
        for world in [1, 3] {
            for rank in 0..world {
                let s = grid(order, world, rank);
                for e in [0, 1, 7] {
                    for w in s.epoch(e) {
                        assert_eq!(place[w.id as usize], (w.segment, w.start));
                        assert_eq!(w.epoch, e);
                        assert_eq!(s.by_id(w.id), Some(Win { epoch: 0, ..w }));
                    }
                }
            }
        }
    }
    // A shuffled epoch holds every id once.
    let mut ids: Vec<u64> = grid(Order::Shuffled { seed: 5 }, 1, 0)
        .epoch(2)
        .map(|w| w.id)
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..n).collect::<Vec<_>>());
    // Random: ids number all possible starts, in segment order.
    let random = grid(Order::Random { seed: 4 }, 2, 1);
    let starts: Vec<u64> = src.0.iter().map(|&u| u.saturating_sub(8)).collect();
    assert_eq!(random.id_count(), starts.iter().sum::<u64>());
    for w in random.iter().take(500) {
        let before: u64 = starts[..w.segment].iter().sum();
        assert_eq!(w.id, before + w.start);
        assert_eq!(
            random.by_id(w.id).map(|b| (b.segment, b.start)),
            Some((w.segment, w.start))
        );
    }
    assert_eq!(random.by_id(random.id_count()), None);
    assert_eq!(seq.by_id(n), None);
}

#[test]
fn token_and_record_windows_carry_id_and_epoch() {
    let dir = tempfile::tempdir().unwrap();
    write_shard(dir.path().join("a.bin"), &(0..1001).collect::<Vec<u16>>()).unwrap();
    write_shard_u32(dir.path().join("b.bin"), &(0..501).collect::<Vec<u32>>()).unwrap();
    let shards = TokenShards::glob(dir.path().join("*.bin")).unwrap();
    let s = shards
        .clone()
        .windows(11)
        .order(Order::Shuffled { seed: 3 })
        .build()
        .unwrap(); // 100 + 50 windows at stride 10
    for (i, w) in s.iter().take(400).enumerate() {
        assert_eq!(w.epoch(), i as u64 / 150);
        let g = w.id();
        let (shard, start) = if g < 100 {
            (0, g * 10)
        } else {
            (1, (g - 100) * 10)
        };
        assert_eq!(w.shard().path(), shards.shards()[shard].path());
        assert_eq!(w.start() as u64, start);
        assert_eq!(w.shard().token(w.start()).unwrap(), Some(start as u32)); // token i is i
    }
    let path = dir.path().join("records.bin");
    std::fs::write(&path, (0..=255u8).collect::<Vec<_>>()).unwrap();
    let records = Sampler::builder(FixedRecords::open([&path], 2).unwrap())
        .order(Order::Shuffled { seed: 1 })
        .shard(1, 2)
        .build()
        .unwrap();
    // 128 records of 2 bytes, 64 for rank 1 each epoch; record j starts with byte 2j.
    for (i, w) in records.iter().take(200).enumerate() {
        assert_eq!(u64::from(w.read_bytes().unwrap()[0]), 2 * w.id());
        assert_eq!(w.epoch(), i as u64 / 64);
    }
}
