//! `Loader::reshard` for every kind of source: 4 → 3 → 5 ranks mid-run at random steps
//! (every rank that stays after the same pops, the leaving rank dropped, the joining ranks
//! built from a staying rank's state), every row delivered at most once across the
//! changes, none of the uninterrupted run's left out but the tail the walk drops.

use std::collections::BTreeSet;

use pinring::source::{DocOrder, Documents, Mixture, Order, Source, Stop, TokenShards};
use pinring::{Batch, Fence, Loader, LoaderBuilder};
use proptest::prelude::*;

use crate::helpers::{records, shards, windows_per_shard, BOS};

/// A row: (its source in a mixture, its id).
type Row = (u16, u64);

fn rows(batch: Batch) -> Vec<Row> {
    let ids = batch.sample_ids().to_vec();
    let srcs = batch.row_sources().to_vec();
    batch.release(Fence::Sync).unwrap();
    ids.iter()
        .enumerate()
        .map(|(i, &id)| (srcs.get(i).copied().unwrap_or(0), id))
        .collect()
}

/// Pops up to `n` batches of each loader, each row into `seen`; a row seen before fails.
fn take<S: Source>(
    loaders: &mut [Loader<S>],
    n: usize,
    seen: &mut BTreeSet<Row>,
) -> Result<(), TestCaseError> {
    for l in loaders {
        for _ in 0..n {
            let Some(batch) = l.pop().unwrap() else { break };
            for row in rows(batch) {
                prop_assert!(seen.insert(row), "row {:?} twice", row);
            }
        }
    }
    Ok(())
}

/// Runs `make`'s loaders 4 → 3 → 5 (after `first`, then `second` pops a rank) and returns
/// every row delivered, with the rows of the same run on one rank, never resharded.
fn resharded<S: Source>(
    make: impl Fn() -> LoaderBuilder<S>,
    first: usize,
    second: usize,
) -> Result<(BTreeSet<Row>, BTreeSet<Row>), TestCaseError> {
    let mut seen = BTreeSet::new();
    let mut loaders: Vec<_> = (0..4)
        .map(|r| make().rank(r).world_size(4).build().unwrap())
        .collect();
    take(&mut loaders, first, &mut seen)?;
    loaders.truncate(3);
    for (r, l) in loaders.iter_mut().enumerate() {
        l.reshard(r as u64, 3).unwrap();
        prop_assert_eq!(l.run().world_size, 3);
    }
    take(&mut loaders, second, &mut seen)?;
    for (r, l) in loaders.iter_mut().enumerate() {
        l.reshard(r as u64, 5).unwrap();
    }
    let state = loaders[0].state();
    for r in 3..5 {
        loaders.push(make().rank(r).world_size(5).resume(&state).build().unwrap());
    }
    take(&mut loaders, usize::MAX, &mut seen)?;
    let mut alone = BTreeSet::new();
    take(&mut [make().build().unwrap()], usize::MAX, &mut alone)?;
    Ok((seen, alone))
}

/// `got` is of `alone` and leaves out fewer than `tail` of its rows.
fn all_but_the_tail(
    got: &BTreeSet<Row>,
    alone: &BTreeSet<Row>,
    tail: usize,
) -> Result<(), TestCaseError> {
    prop_assert!(
        got.is_subset(alone),
        "a row the run does not have: {:?}",
        got.difference(alone).next()
    );
    prop_assert!(
        alone.len() - got.len() < tail,
        "{} of {} rows",
        got.len(),
        alone.len()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

    #[test]
    fn resharding_records_delivers_each_record_once(first in 1usize..6, second in 1usize..6, batch in 1u64..4) {
        let (_dir, set) = records(300, 16);
        let src = pinring::source::Sampler::builder(set).order(Order::Shuffled { seed: 4 }).build().unwrap();
        let (got, alone) = resharded(|| Loader::builder(src.clone()).batch_size(batch).epochs(1), first, second)?;
        all_but_the_tail(&got, &alone, 5 * batch as usize)?;
    }

    #[test]
    fn resharding_documents_uses_each_document_once(first in 1usize..5, second in 1usize..5, shuffled in any::<bool>()) {
        let (_dir, paths) = shards(&[12_000, 8_000]);
        let b = Documents::builder(TokenShards::open(&paths).unwrap()).bos(u32::from(BOS))
            .tokens_per_batch(256).max_seq_len(128);
        let src = if shuffled { b.order(DocOrder::Shuffled { seed: 5 }) } else { b }.build().unwrap();
        let (got, alone) = resharded(|| Loader::builder(src.clone()).epochs(1), first, second)?;
        // What a walk drops: a partial step at each shard's end (sequential) or the epoch's
        // (shuffled), of 5 ranks' steps at most, documents of 40 tokens or more.
        all_but_the_tail(&got, &alone, 2 * 5 * (256 / 40 + 2))?;
    }

    #[test]
    fn resharding_a_mixture_of_windows_delivers_each_position_once(first in 1usize..6, second in 1usize..6, batch in 1u64..4) {
        let (_dir, paths) = shards(&[4000, 2500]);
        let members = windows_per_shard(&paths, 11, |i| Order::Shuffled { seed: i });
        let mix = Mixture::builder(members).weights([0.6, 0.4]).stop(Stop::First).build().unwrap();
        let (got, alone) = resharded(|| Loader::builder(mix.clone()).batch_size(batch), first, second)?;
        all_but_the_tail(&got, &alone, 5 * batch as usize)?;
    }

    #[test]
    fn resharding_a_mixture_of_documents_uses_each_document_once(first in 1usize..5, second in 1usize..5) {
        let (_dir, paths) = shards(&[14_000, 9_000]);
        let member = |p: &std::path::PathBuf| {
            Documents::builder(TokenShards::open([p]).unwrap()).bos(u32::from(BOS))
        };
        let mix = Mixture::documents([member(&paths[0]), member(&paths[1])])
            .weights([0.7, 0.3]).stop(Stop::First).tokens_per_batch(256).max_seq_len(128)
            .build().unwrap();
        let (got, alone) = resharded(|| Loader::builder(mix.clone()), first, second)?;
        all_but_the_tail(&got, &alone, 2 * 5 * (256 / 40 + 2))?;
    }
}
