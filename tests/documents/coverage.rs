//! Every rank's steps together use each document at most once an epoch and skip none but
//! the walk's drops (a shard's tail too short for a step, in sequential order; an epoch's,
//! in shuffled order), also across elastic resumes (W = 2 → 3 → 1), where each resumed
//! run is the model's walk from the checkpoint's cursor with the new world size.

use std::collections::{BTreeMap, BTreeSet};

use pinring::source::DocOrder;
use proptest::prelude::*;

use crate::case::{bases, orders, Case, Used};
use crate::helpers::{builder, datasets, write};
use crate::model::Data;
use crate::sizes::schedules;

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// All ranks of one run, over three epochs' worth of steps: each document at most
    /// once an epoch, none skipped inside the walk.
    #[test]
    fn every_document_at_most_once_none_skipped(
        data in datasets(),
        world in 1u64..=8,
        base in bases(),
        order in orders(),
    ) {
        let total: usize = data.shards.iter().map(Vec::len).sum();
        let steps = 3 * total / (world as usize * (base.0 as usize + 1)) + 1;
        let case = Case::write(data, false, base, Vec::new(), order);
        let mut used = Used::default();
        let merged = case.run(world, None, &[], steps, &mut used)?;
        prop_assume!(merged.is_some());
        used.check(&case.data, order)?;
    }

    /// A run on 2 ranks, resumed on 3, then on 1: each resumed run is the walk from the
    /// checkpoint's cursor with its world size; across the three, each document at most
    /// once an epoch and none skipped inside the walk.
    #[test]
    fn elastic_resume_2_3_1(
        data in datasets(),
        base in bases(),
        schedule in schedules(),
        order in orders(),
        (k1, k2, k3) in (0usize..12, 0usize..12, 1usize..12),
    ) {
        let case = Case::write(data, false, base, schedule, order);
        let mut used = Used::default();
        let Some(a) = case.run(2, None, &[], k1, &mut used)? else { return Err(TestCaseError::reject("no fit")) };
        prop_assert_eq!(a.world_size, 2);
        let Some(b) = case.run(3, Some(&a), &[], k2, &mut used)? else { return Err(TestCaseError::reject("no fit")) };
        prop_assert_eq!(b.world_size, 3);
        let Some(_) = case.run(1, Some(&b), &[], k3, &mut used)? else { return Err(TestCaseError::reject("no fit")) };
        used.check(&case.data, order)?;
    }
}

/// Shuffled order on 2 ranks over 100 documents of 10 tokens, 4 a step: every document
/// exactly once an epoch (nothing is dropped: 25 steps fill the epoch), in a fresh order
/// each epoch.
#[test]
fn shuffled_every_document_once_an_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let data = Data {
        shards: vec![
            crate::helpers::shard(crate::helpers::BOS, 2, &[10; 60]),
            crate::helpers::shard(crate::helpers::BOS, 0, &[10; 40]),
        ],
        bos: crate::helpers::BOS,
    };
    let paths = write(dir.path(), &data, false);
    let mut epochs: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    for rank in 0..2 {
        let docs = builder(&paths)
            .tokens_per_batch(19)
            .max_seq_len(64)
            .order(DocOrder::Shuffled { seed: 11 })
            .shard(rank, 2)
            .build()
            .unwrap();
        assert_eq!(docs.documents(), Some(100));
        for step in docs.iter().take(75) {
            assert_eq!(step.epoch(), step.step() / 25);
            let ids = epochs.entry(step.epoch()).or_default();
            ids.extend(step.pieces().map(|p| p.doc));
        }
    }
    let all: BTreeSet<u64> = (0..2)
        .flat_map(|s| data.bos_idx(s).into_iter().map(move |b| (s, b)))
        .map(|(s, b)| data.first_token(s) + b as u64)
        .collect();
    assert_eq!(epochs.len(), 3);
    for (epoch, ids) in &epochs {
        assert_eq!(ids.len(), 100, "epoch {epoch}");
        assert_eq!(
            ids.iter().copied().collect::<BTreeSet<_>>(),
            all,
            "epoch {epoch}"
        );
    }
    assert_ne!(epochs[&0], epochs[&1], "a fresh order each epoch");
}
