//! What the mixture tests share: shards of random tokens, sources over them, a mixture's
//! samples as plain tuples, and each source's own walk.

use std::path::PathBuf;

use pinring::source::{
    mix64, write_shard, MixedSample, Order, Sampler, SplitMix64, TokenShard, TokenShards, Window,
};
use proptest::prelude::*;
use tempfile::TempDir;

/// Tokens per window in the tests' sources.
pub const WINDOW: u64 = 9;

/// Random `u16` tokens.
pub fn random_tokens(n: usize, seed: u64) -> Vec<u16> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| rng.below(60_000) as u16).collect()
}

/// One shard file per length in `lens`, random tokens; their paths.
pub fn shard_files(dir: &TempDir, lens: &[usize]) -> Vec<PathBuf> {
    lens.iter()
        .enumerate()
        .map(|(i, &n)| {
            let path = dir.path().join(format!("source_{i}.bin"));
            write_shard(&path, &random_tokens(n, 1000 + i as u64)).unwrap();
            path
        })
        .collect()
}

/// A source of windows of [`WINDOW`] tokens (stride 8) over `path`, shuffled with `seed`.
pub fn source(path: &PathBuf, seed: u64) -> Sampler<TokenShards> {
    TokenShards::open([path])
        .unwrap()
        .windows(WINDOW)
        .order(Order::Shuffled { seed })
        .build()
        .unwrap()
}

/// Sources over shards of these lengths (source `i` shuffled with seed `i + 1`), and the
/// folder that holds them.
pub fn sources(lens: &[usize]) -> (TempDir, Vec<Sampler<TokenShards>>) {
    let dir = TempDir::new().unwrap();
    let files = shard_files(&dir, lens);
    let sources = files
        .iter()
        .enumerate()
        .map(|(i, p)| source(p, i as u64 + 1))
        .collect();
    (dir, sources)
}

/// A world of 1 to 3 ranks and one of its ranks, as (world size, rank).
pub fn ranks() -> impl Strategy<Value = (u64, u64)> {
    (1u64..4).prop_flat_map(|world| (Just(world), 0..world))
}

/// A mixed sample as (source, epoch, id, step): comparable across runs.
pub type Drawn = (u16, u64, u64, Option<u64>);

pub fn drawn(s: MixedSample<Window<TokenShard>>) -> Drawn {
    (s.source(), s.item().epoch(), s.item().id(), s.step())
}

/// The first `n` samples of `sampler`'s own walk in a mixture of seed `seed`, as (epoch,
/// id): its order keyed by the mixture's seed, epoch after epoch.
pub fn own_walk(sampler: &Sampler<TokenShards>, seed: u64, n: u64) -> Vec<(u64, u64)> {
    let order = match sampler.order() {
        Order::Shuffled { seed: q } => Order::Shuffled {
            seed: q ^ mix64(seed),
        },
        other => other,
    };
    let walked = sampler.to_builder().order(order).build().unwrap();
    walked
        .iter()
        .take(n as usize)
        .map(|w| (w.epoch(), w.id()))
        .collect()
}
