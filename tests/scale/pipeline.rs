//! Through real pipelines.

use super::*;

/// Decodes `Tokens` as u16 from a shard whose token `i` is `i`: a sample's first token is
/// its window's start.
fn run_pipeline(
    sampler: &Sampler<TokenShards>,
    samples: pinring::source::Samples<TokenShards>,
    batches: Option<usize>,
) -> Vec<Vec<u64>> {
    let decoder = Tokens::new(TokenType::U16);
    let b = sampler.batch_size().unwrap() as usize;
    let bytes = decoder.sample_bytes(sampler.window());
    let config = Config::builder()
        .batch_size(b)
        .bytes_per_sample(bytes)
        .decode_threads(2)
        .build()
        .unwrap();
    let mut pipeline = Pipeline::new(config, decoder, samples).unwrap();
    let mut out = Vec::new();
    while batches.is_none_or(|n| out.len() < n) {
        let Some(batch) = pipeline.pop().unwrap() else {
            break;
        };
        let starts: Vec<u64> = batch
            .bytes()
            .chunks_exact(bytes)
            .map(|s| u64::from(u16::from_le_bytes([s[0], s[1]])))
            .collect();
        // The batch names its samples: each id is the window its row holds.
        let named: Vec<u64> = batch
            .sample_ids()
            .iter()
            .map(|&id| sampler.by_id(id).expect("a window's id").start() as u64)
            .collect();
        assert_eq!(named, starts, "batch {}'s sample ids", batch.seq());
        out.push(starts);
        batch
            .release(Fence::Sync)
            .expect("a Sync fence always captures");
    }
    out
}

#[test]
fn windows_reach_batches_exactly_once_across_an_elastic_resume() {
    let dir = tempfile::tempdir().unwrap();
    write_shard(
        dir.path().join("train_000.bin"),
        &(0..20_000).map(|i| i as u16).collect::<Vec<_>>(),
    )
    .unwrap();
    let shards = TokenShards::open([dir.path().join("train_000.bin")]).unwrap();
    let build = |rank, world, batch| {
        shards
            .clone()
            .windows(33)
            .order(Order::Shuffled { seed: 2024 })
            .shard(rank, world)
            .batch_size(batch)
            .build()
            .unwrap()
    };
    let n = build(0, 1, 1).grid_windows(); // 624
                                           // Two ranks, batches of 8: each pops 12 batches, decode running ahead, then stops.
    let mut starts = Vec::new();
    let mut states = Vec::new();
    for rank in 0..2 {
        let s = build(rank, 2, 8);
        let got = run_pipeline(&s, s.iter(), Some(12));
        assert!(got.iter().all(|b| b.len() == 8));
        starts.extend(got.into_iter().flatten());
        states.push(s.checkpoint(0, 12 * 8));
    }
    let state = Checkpoint::merge(&states).unwrap();
    assert_eq!(state.consumed, 2 * 12 * 8);
    // Three ranks, batches of 5, finish the epoch: the same number of batches each.
    let mut counts = Vec::new();
    for rank in 0..3 {
        let s = build(rank, 3, 5);
        let got = run_pipeline(
            &s,
            s.iter_from_checkpoint(&state).unwrap().until_epoch(1),
            None,
        );
        assert!(got.iter().all(|b| b.len() == 5));
        assert_eq!(Some(got.len() as u64), s.batches_left(&state).unwrap());
        counts.push(got.len());
        starts.extend(got.into_iter().flatten());
    }
    assert!(counts.windows(2).all(|p| p[0] == p[1]), "{counts:?}");
    // The starts the batches held are the windows of the epoch's first M' positions.
    let m = 192 + (n - 192) / 15 * 15;
    let reference = build(0, 1, 1);
    let mut want: Vec<u64> = reference
        .epoch(0)
        .take(m as usize)
        .map(|w| w.start() as u64)
        .collect();
    want.sort_unstable();
    starts.sort_unstable();
    assert_eq!(starts, want);
    assert!(starts.windows(2).all(|p| p[0] != p[1]), "a window twice");
}
