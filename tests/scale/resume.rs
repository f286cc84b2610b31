//! Checkpoints and elastic resume.

use super::*;

#[test]
fn two_ranks_resume_on_three_then_on_one_and_four_on_two() {
    let src = Lengths(vec![1001, 333, 4000]);
    for order in ORDERS {
        let run = |world, batch| Run {
            window: 11,
            stride: 10,
            order,
            world,
            batch: Some(batch),
            drop_last: true,
        };
        let l = run(2, 4).sampler(&src, 0).unwrap().epoch_len();
        for k in [0, 4, 40, l - 4, l, l + 12, 2 * l + 8] {
            check_resume(&src, &run(2, 4), k, &run(3, 4));
            check_resume(&src, &run(2, 4), k, &run(1, 4));
            check_resume(&src, &run(2, 4), k, &run(3, 7));
        }
        let l4 = run(4, 8).sampler(&src, 0).unwrap().epoch_len();
        for k in [8, 16 * 8, l4 - 8, l4 + 8] {
            check_resume(&src, &run(4, 8), k, &run(2, 8));
            check_resume(&src, &run(4, 8), k, &run(2, 3));
        }
    }
}

#[test]
fn resuming_on_the_same_ranks_is_the_uninterrupted_run() {
    let src = Lengths(vec![777, 1500]);
    for order in ORDERS {
        for drop_last in [true, false] {
            let run = Run {
                window: 17,
                stride: 16,
                order,
                world: 3,
                batch: Some(6),
                drop_last,
            };
            for s in run.ranks(&src) {
                let l = s.epoch_len();
                let b = 6;
                let continuous: Vec<Win> = s.iter().take((3 * l) as usize).collect();
                // At batch boundaries (and epoch ends when the last batch is short).
                for k in [0, b, 5 * b, l - l % b, l, l + b, 2 * l + b] {
                    let state = s.checkpoint(0, k);
                    let resumed: Vec<Win> = s
                        .iter_from_checkpoint(&state)
                        .unwrap()
                        .take(continuous.len() - k as usize)
                        .collect();
                    assert_eq!(resumed[..], continuous[k as usize..], "{run:?} k {k}");
                }
            }
        }
    }
}

#[test]
fn a_resumed_run_checkpoints_again_and_resumes_again() {
    let src = Lengths(vec![2000, 2000]);
    let order = Order::Shuffled { seed: 99 };
    let run = |world, batch| Run {
        window: 9,
        stride: 8,
        order,
        world,
        batch: Some(batch),
        drop_last: true,
    };
    let n = run(1, 1).sampler(&src, 0).unwrap().grid_windows(); // 2 × 249
                                                                // Run 1: 2 ranks, batches of 8, 5 batches each.
    let first = Checkpoint::merge(
        &run(2, 8)
            .ranks(&src)
            .iter()
            .map(|s| s.checkpoint(0, 40))
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert_eq!((first.epoch, first.consumed), (0, 80));
    let mut seen: Vec<u64> = run(2, 8)
        .ranks(&src)
        .iter()
        .flat_map(|s| s.iter().take(40).map(|w| w.id).collect::<Vec<_>>())
        .collect();
    // Run 2: 3 ranks, batches of 5, resumed from run 1, 7 batches each.
    let ranks2 = run(3, 5).ranks(&src);
    let second = Checkpoint::merge(
        &ranks2
            .iter()
            .map(|s| s.checkpoint_after(&first, 35).unwrap())
            .collect::<Vec<_>>(),
    )
    .unwrap();
    assert_eq!(
        (second.epoch, second.consumed, second.world_size),
        (0, 80 + 105, 3)
    );
    for s in &ranks2 {
        seen.extend(
            s.iter_from_checkpoint(&first)
                .unwrap()
                .take(35)
                .map(|w| w.id),
        );
    }
    // Run 3: 4 ranks, batches of 2, finishes the epoch.
    let mut last = Vec::new();
    for s in run(4, 2).ranks(&src) {
        let left = s.samples_left(&second).unwrap();
        assert_eq!(left, (n - 185) / 8 * 8 / 4);
        seen.extend(
            s.iter_from_checkpoint(&second)
                .unwrap()
                .take(left as usize)
                .map(|w| w.id),
        );
        last.push(s.checkpoint_after(&second, left).unwrap());
    }
    let end = Checkpoint::merge(&last).unwrap();
    assert_eq!((end.epoch, end.consumed), (1, 0));
    seen.sort_unstable();
    let end_pos = 185 + (n - 185) / 8 * 8;
    assert_eq!(seen, first_positions(&run(1, 1), &src, 0, end_pos));
    assert!(seen.windows(2).all(|p| p[0] != p[1]));
    // checkpoint_after from an epoch start is checkpoint.
    let s = &ranks2[1];
    for k in [0, 5, 300, 1000] {
        assert_eq!(
            s.checkpoint_after(&s.checkpoint(2, 0), k).unwrap(),
            s.checkpoint(2, k)
        );
    }
}

#[test]
fn a_resumed_epoch_with_nothing_left_starts_the_next() {
    let src = Lengths(vec![100]); // 10 windows of 10
    let run = |world, batch| Run {
        window: 10,
        stride: 10,
        order: Order::Shuffled { seed: 1 },
        world,
        batch: Some(batch),
        drop_last: true,
    };
    // One rank consumed 8 of 10; three ranks of batch 1 cannot share the last 2 equally.
    let state = run(1, 2).sampler(&src, 0).unwrap().checkpoint(0, 8);
    assert_eq!((state.epoch, state.consumed), (0, 8));
    for s in run(3, 1).ranks(&src) {
        assert_eq!(s.samples_left(&state).unwrap(), 0);
        assert_eq!(s.batches_left(&state).unwrap(), Some(0));
        let next: Vec<Win> = s.iter_from_checkpoint(&state).unwrap().take(3).collect();
        assert_eq!(next, s.epoch(1).collect::<Vec<_>>());
        assert_eq!(s.checkpoint_after(&state, 0).unwrap().epoch, 1);
    }
    // A state at the epoch's very end (consumed = N) is the next epoch's start too.
    let end = Checkpoint {
        consumed: 10,
        ..state
    };
    let s = run(2, 1).sampler(&src, 1).unwrap();
    assert_eq!(
        s.iter_from_checkpoint(&end).unwrap().next().unwrap().epoch,
        1
    );
}

#[test]
fn without_a_batch_size_ranks_differ_by_one_and_merge_says_when_they_are_not_in_step() {
    let src = Lengths(vec![100]); // 10 windows
    let run = Run {
        window: 10,
        stride: 10,
        order: Order::Sequential,
        world: 3,
        batch: None,
        drop_last: true,
    };
    let ranks = run.ranks(&src);
    let lens: Vec<u64> = ranks.iter().map(|s| s.epoch_len()).collect();
    assert_eq!(lens, [4, 3, 3]);
    assert_eq!(ranks[0].epoch_batches(), None);
    // In step for 3 samples: positions 0..9 consumed on every rank.
    let at3: Vec<_> = ranks.iter().map(|s| s.checkpoint(0, 3)).collect();
    assert_eq!(Checkpoint::merge(&at3).unwrap().consumed, 9);
    // Rank 0 takes its 4th: the epoch is over for it, not for the others' view.
    let uneven = [ranks[0].checkpoint(0, 4), at3[1].clone(), at3[2].clone()];
    let err = Checkpoint::merge(&uneven).unwrap_err();
    let Error::Source(SourceError::UnequalRanks { positions }) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(positions, &[(1, 0), (0, 9), (0, 9)]);
    // Resumed from position 9, only rank 0 of 3 has the last window.
    let left: Vec<u64> = ranks
        .iter()
        .map(|s| s.samples_left(&at3[0]).unwrap())
        .collect();
    assert_eq!(left, [1, 0, 0]);
}

#[test]
fn mismatched_checkpoints_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let tokens: Vec<u16> = (0..5000).map(|i| i as u16).collect();
    write_shard(dir.path().join("train_000.bin"), &tokens).unwrap();
    write_shard(dir.path().join("train_001.bin"), &tokens[..3000]).unwrap();
    let shards = TokenShards::glob(dir.path().join("train_*.bin")).unwrap();
    let build = |shards: &TokenShards, window, order| {
        shards
            .clone()
            .windows(window)
            .order(order)
            .shard(1, 2)
            .batch_size(4)
            .build()
            .unwrap()
    };
    let order = Order::Shuffled { seed: 7 };
    let sampler = build(&shards, 65, order);
    let state = sampler.checkpoint(0, 40);
    assert_eq!((state.version, state.consumed), (CHECKPOINT_VERSION, 80));
    assert_eq!(state.dataset.files, ["train_000.bin", "train_001.bin"]);
    assert_eq!(state.dataset.sizes, [1024 + 2 * 5000, 1024 + 2 * 3000]);
    assert_eq!(state.dataset.format, "u16");
    assert_eq!((state.window, state.stride), (65, 64));
    assert_eq!((state.order.as_str(), state.seed), ("shuffled", 7));
    assert_eq!(state.order().unwrap(), order);
    assert_eq!((state.world_size, state.batch_size), (2, 4));
    sampler.check_checkpoint(&state).unwrap();

    let mismatch = |s: &Sampler<TokenShards>, c: &Checkpoint, what: &str| {
        let err = s.iter_from_checkpoint(c).unwrap_err();
        match &err {
            Error::Source(SourceError::CheckpointMismatch { what: w, .. }) => {
                assert!(w.contains(what), "{err}");
            }
            other => panic!("expected CheckpointMismatch about {what}, got {other:?}"),
        }
        assert!(s.check_checkpoint(c).is_err());
        assert!(s.samples_left(c).is_err());
        assert!(s.checkpoint_after(c, 1).is_err());
        err.to_string()
    };
    // Another seq_len.
    let text = mismatch(&build(&shards, 129, order), &state, "window");
    assert_eq!(
        text,
        "the checkpoint does not match: the window (units per window, T + 1) is 65 in the \
         checkpoint but 129 here; a checkpoint resumes only the same dataset, window, stride, \
         order and seed (the world size and batch size may change)"
    );
    // Another stride, order, seed.
    let strided = shards
        .clone()
        .windows(65)
        .stride(65)
        .order(order)
        .build()
        .unwrap();
    mismatch(&strided, &state, "stride");
    mismatch(
        &build(&shards, 65, Order::Random { seed: 7 }),
        &state,
        "order",
    );
    mismatch(
        &build(&shards, 65, Order::Shuffled { seed: 8 }),
        &state,
        "seed",
    );
    // Another dataset: one file fewer, another file's size, another name, u32 tokens.
    let one = TokenShards::open([dir.path().join("train_000.bin")]).unwrap();
    mismatch(&build(&one, 65, order), &state, "number of files");
    write_shard(dir.path().join("other_000.bin"), &tokens).unwrap();
    write_shard(dir.path().join("other_001.bin"), &tokens[..2999]).unwrap();
    let other = TokenShards::glob(dir.path().join("other_*.bin")).unwrap();
    let text = mismatch(&build(&other, 65, order), &state, "file 0's name");
    assert!(text.contains("\"train_000.bin\""), "{text}");
    let moved = tempfile::tempdir().unwrap();
    write_shard(moved.path().join("train_000.bin"), &tokens).unwrap();
    write_shard(moved.path().join("train_001.bin"), &tokens[..2999]).unwrap();
    let resized = TokenShards::glob(moved.path().join("train_*.bin")).unwrap();
    mismatch(&build(&resized, 65, order), &state, "size of file 1");
    drop(resized); // unmapped before the file is rewritten
    let wide: Vec<u32> = tokens.iter().map(|&t| u32::from(t)).collect();
    write_shard_u32(moved.path().join("train_001.bin"), &wide[..3000]).unwrap();
    let widened = TokenShards::glob(moved.path().join("train_*.bin")).unwrap();
    mismatch(&build(&widened, 65, order), &state, "format");
    drop(widened);
    // The same files under another directory: accepted (names, not paths).
    write_shard(moved.path().join("train_001.bin"), &tokens[..3000]).unwrap();
    let elsewhere = build(
        &TokenShards::glob(moved.path().join("train_*.bin")).unwrap(),
        65,
        order,
    );
    elsewhere.check_checkpoint(&state).unwrap();
    // Records are another dataset, even of the same files' bytes.
    let records = Sampler::builder(
        FixedRecords::open(
            [
                dir.path().join("train_000.bin"),
                dir.path().join("train_001.bin"),
            ],
            2,
        )
        .unwrap(),
    )
    .window(65)
    .stride(64)
    .order(order)
    .build()
    .unwrap();
    assert!(matches!(
        records.check_checkpoint(&state),
        Err(Error::Source(SourceError::CheckpointMismatch { .. }))
    ));
    // Another checkpoint version.
    let old = Checkpoint {
        version: CHECKPOINT_VERSION + 1,
        ..state.clone()
    };
    mismatch(&sampler, &old, "version");
    // Consumed past the epoch.
    let past = Checkpoint {
        consumed: state.windows + 1,
        ..state.clone()
    };
    let err = sampler.iter_from_checkpoint(&past).unwrap_err();
    assert_source_error!(
        err,
        SourceError::CheckpointPastEpoch { consumed, windows, .. }
            if *consumed == windows + 1 && *windows == state.windows
    );
    // A world size or batch size of its own is fine.
    let other_world = shards
        .clone()
        .windows(65)
        .order(order)
        .shard(2, 5)
        .batch_size(3);
    other_world
        .build()
        .unwrap()
        .check_checkpoint(&state)
        .unwrap();
}

#[test]
fn merge_takes_equal_ranks_and_refuses_unequal_or_foreign_ones() {
    let src = Lengths(vec![1000]);
    let run = Run {
        window: 10,
        stride: 10,
        order: Order::Shuffled { seed: 3 },
        world: 4,
        batch: Some(5),
        drop_last: true,
    };
    let ranks = run.ranks(&src);
    let states: Vec<_> = ranks.iter().map(|s| s.checkpoint(0, 15)).collect();
    assert_eq!(Checkpoint::merge(&states).unwrap(), states[0]);
    assert_eq!(states[0].consumed, 60);
    // Rank 2 consumed one batch more.
    let mut unequal = states.clone();
    unequal[2] = ranks[2].checkpoint(0, 20);
    let err = Checkpoint::merge(&unequal).unwrap_err();
    let Error::Source(SourceError::UnequalRanks { positions }) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(positions, &[(0, 60), (0, 60), (0, 80), (0, 60)]);
    let text = err.to_string();
    assert!(text.contains("rank 2 at epoch 0 consumed 80"), "{text}");
    assert_eq!(
        text,
        "the ranks' checkpoints differ (rank 0 at epoch 0 consumed 60, rank 1 at epoch 0 \
         consumed 60, rank 2 at epoch 0 consumed 80, rank 3 at epoch 0 consumed 60): every \
         rank must have popped the same number of samples when it saves (data-parallel \
         training keeps the ranks in step), so that one global position describes them all"
    );
    // Another run's checkpoint (another seed).
    let mut foreign = states.clone();
    foreign[1] = Run {
        order: Order::Shuffled { seed: 4 },
        ..run
    }
    .sampler(&src, 1)
    .unwrap()
    .checkpoint(0, 15);
    let err = Checkpoint::merge(&foreign).unwrap_err();
    assert_source_error!(
        err,
        SourceError::CheckpointMismatch { what, .. }
            if what.contains("seed") && what.contains("rank 1")
    );
    assert!(matches!(
        Checkpoint::merge(&[]),
        Err(Error::Source(SourceError::Zero("checkpoints")))
    ));
}

#[test]
fn checkpoint_text_round_trips_and_bad_text_is_named() {
    let dir = tempfile::tempdir().unwrap();
    write_shard(dir.path().join("odd\\name\nwith lines.bin"), &[0; 100]).unwrap();
    let sampler = TokenShards::open([dir.path().join("odd\\name\nwith lines.bin")])
        .unwrap()
        .windows(9)
        .order(Order::Random { seed: u64::MAX })
        .batch_size(2)
        .build()
        .unwrap();
    let state = sampler.checkpoint(3, 7);
    let text = state.to_text();
    assert!(text.starts_with("{\n  \"version\": 3,\n"), "{text}");
    assert_eq!(Checkpoint::from_text(&text).unwrap(), state);
    assert_eq!(state.dataset.files, ["odd\\name\nwith lines.bin"]);
    for (bad, line) in [
        ("", 1),
        ("{\"version\": \"x\"}", 1),
        (&text.replace("\"window\": 9", "\"window\": \"nine\""), 14),
        (&text.replace("  \"stride\": 8,\n", ""), 24),
        (&text.replace("\"seed\"", "\"colour\""), 17),
    ] {
        match Checkpoint::from_text(bad) {
            Err(Error::Source(SourceError::BadCheckpointText { line: l, .. })) => {
                assert_eq!(l, line, "{bad:?}")
            }
            other => panic!("{bad:?} gave {other:?}"),
        }
    }
    let unknown = Checkpoint {
        order: "sorted".into(),
        ..state
    };
    assert!(unknown.order().is_err());
    assert!(sampler.check_checkpoint(&unknown).is_err());
}
