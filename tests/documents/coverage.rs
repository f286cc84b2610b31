//! Every rank's steps together use each document at most once an epoch and skip none but
//! the walk's drops (a shard's tail too short for a step, in sequential order; an epoch's,
//! in shuffled order), also across elastic resumes (W = 2 → 3 → 1), where each resumed
//! run is the model's walk from the checkpoint's cursor with the new world size.

use std::collections::{BTreeMap, BTreeSet};

use pinring::source::{DocOrder, Documents, DocumentsCheckpoint, SourceError};
use pinring::Error;
use proptest::prelude::*;

use crate::helpers::{builder, datasets, got, model_order, schedules, sizes_at, write, Got};
use crate::model::{self, At, Data};

/// What a run used: every piece of every rank, with its epoch.
#[derive(Debug, Default)]
pub struct Used {
    /// (epoch, document id) of every piece.
    pub pieces: Vec<(u64, u64)>,
}

impl Used {
    pub fn add(&mut self, g: &Got, data: &Data) {
        for &span in &g.spans {
            self.pieces.push((g.epoch, data.id(span)));
        }
    }

    /// No document twice in an epoch; the documents used in each (epoch, shard)
    /// (sequential) or epoch (shuffled) are a prefix of its walk.
    pub fn check(&self, data: &Data, order: DocOrder) -> Result<(), TestCaseError> {
        let mut seen = BTreeSet::new();
        for &p in &self.pieces {
            prop_assert!(
                seen.insert(p),
                "document {} used twice in epoch {}",
                p.1,
                p.0
            );
        }
        // Each document's place in its walk: (shard, index) sequential, position shuffled.
        let mut place: BTreeMap<u64, (usize, usize)> = BTreeMap::new();
        for s in 0..data.shards.len() {
            for (j, &b) in data.bos_idx(s).iter().enumerate() {
                place.insert(data.first_token(s) + b as u64, (s, j));
            }
        }
        let mut walks: BTreeMap<(u64, usize), Vec<usize>> = BTreeMap::new();
        for &(epoch, id) in &self.pieces {
            let (s, j) = place[&id];
            match order {
                DocOrder::Sequential => walks.entry((epoch, s)).or_default().push(j),
                DocOrder::Shuffled { seed } => {
                    let perm = data.permutation(seed, epoch);
                    let at = perm.iter().position(|&d| d == (s, j)).unwrap();
                    walks.entry((epoch, 0)).or_default().push(at);
                }
            }
        }
        for ((epoch, shard), mut at) in walks {
            at.sort_unstable();
            let prefix: Vec<usize> = (0..at.len()).collect();
            prop_assert_eq!(
                &at,
                &prefix,
                "epoch {} shard {}: documents skipped inside the walk",
                epoch,
                shard
            );
        }
        Ok(())
    }
}

/// `steps` steps of every rank of `world` from `from` (the start if `None`), checked
/// against the model from the same place; `None` if the steps do not fit (the case is
/// then skipped). Returns the merged checkpoint after them.
#[allow(clippy::too_many_arguments)]
fn run_ranks(
    data: &Data,
    paths: &[std::path::PathBuf],
    order: DocOrder,
    base: (u64, u64),
    schedule: &[(u64, u64, u64)],
    world: u64,
    from: Option<&DocumentsCheckpoint>,
    steps: usize,
    used: &mut Used,
) -> Result<Option<DocumentsCheckpoint>, TestCaseError> {
    let at = from.map_or(At::default(), |c| At {
        epoch: c.epoch,
        shard: c.shard as usize,
        doc: c.doc as usize,
        step: c.step,
    });
    let sizes = |k: u64| sizes_at(base, schedule, k);
    let (want, _, all_fit) = model::steps(
        data,
        model_order(order),
        world as usize,
        &sizes,
        None,
        at,
        steps,
    );
    if !all_fit {
        return Ok(None);
    }
    let mut states = Vec::new();
    for rank in 0..world {
        let docs: Documents = match builder(paths)
            .tokens_per_batch(base.0)
            .max_seq_len(base.1)
            .schedule(schedule.to_vec())
            .order(order)
            .shard(rank, world)
            .build()
        {
            Ok(d) => d,
            Err(Error::Source(SourceError::NoStepFits { .. })) => return Ok(None),
            Err(e) => return Err(TestCaseError::fail(format!("{e}"))),
        };
        let iter = match from {
            Some(c) => docs
                .iter_from(c)
                .map_err(|e| TestCaseError::fail(format!("{e}")))?,
            None => docs.iter(),
        };
        let mut last_after = from.map(|c| c.cursor());
        for (step, w) in iter.take(steps).zip(&want) {
            let g = got(data, &step);
            prop_assert_eq!(g.step, w.step);
            prop_assert_eq!(g.epoch, w.epoch);
            prop_assert_eq!(
                &g.spans,
                &w.ranks[rank as usize],
                "rank {} of {}",
                rank,
                world
            );
            used.add(&g, data);
            last_after = step.after();
        }
        let state = docs
            .checkpoint_after(from, steps as u64)
            .map_err(|e| TestCaseError::fail(format!("{e}")))?;
        if steps > 0 {
            prop_assert_eq!(Some(state.cursor()), last_after);
        }
        prop_assert_eq!(state.step, at.step + steps as u64);
        prop_assert_eq!(
            DocumentsCheckpoint::from_text(&state.to_text()).unwrap(),
            state.clone()
        );
        states.push(state);
    }
    Ok(Some(
        DocumentsCheckpoint::merge(&states).map_err(|e| TestCaseError::fail(format!("{e}")))?,
    ))
}

pub fn orders() -> impl Strategy<Value = DocOrder> {
    prop_oneof![
        Just(DocOrder::Sequential),
        any::<u64>().prop_map(|seed| DocOrder::Shuffled { seed }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// All ranks of one run, over three epochs' worth of steps: each document at most
    /// once an epoch, none skipped inside the walk.
    #[test]
    fn every_document_at_most_once_none_skipped(
        data in datasets(),
        world in 1u64..=8,
        n in 1u64..30,
        msl in 1u64..40,
        order in orders(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let paths = write(dir.path(), &data, false);
        let mut used = Used::default();
        let total: usize = data.shards.iter().map(Vec::len).sum();
        let steps = 3 * total / (world as usize * (n as usize + 1)) + 1;
        let merged = run_ranks(&data, &paths, order, (n, msl), &[], world, None, steps, &mut used)?;
        prop_assume!(merged.is_some());
        used.check(&data, order)?;
    }

    /// A run on 2 ranks, resumed on 3, then on 1: each resumed run is the walk from the
    /// checkpoint's cursor with its world size; across the three, each document at most
    /// once an epoch and none skipped inside the walk.
    #[test]
    fn elastic_resume_2_3_1(
        data in datasets(),
        n in 1u64..30,
        msl in 1u64..40,
        schedule in schedules(),
        order in orders(),
        (k1, k2, k3) in (0usize..12, 0usize..12, 1usize..12),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let paths = write(dir.path(), &data, false);
        let mut used = Used::default();
        let run = |world, from: Option<&DocumentsCheckpoint>, k, used: &mut Used| {
            run_ranks(&data, &paths, order, (n, msl), &schedule, world, from, k, used)
        };
        let Some(a) = run(2, None, k1, &mut used)? else { return Err(TestCaseError::reject("no fit")) };
        prop_assert_eq!(a.world_size, 2);
        let Some(b) = run(3, Some(&a), k2, &mut used)? else { return Err(TestCaseError::reject("no fit")) };
        prop_assert_eq!(b.world_size, 3);
        let Some(_) = run(1, Some(&b), k3, &mut used)? else { return Err(TestCaseError::reject("no fit")) };
        used.check(&data, order)?;
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
