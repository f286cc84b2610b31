//! One random case of the property tests: a dataset written as shards, the sizes and the
//! order; its sources, the model's walk over it, and every rank of a world run against
//! that walk (also from a checkpoint and skipping steps), with what the run used.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use pinring::source::{DocOrder, Documents, DocumentsBuilder, DocumentsCheckpoint, SourceError};
use pinring::Error;
use proptest::prelude::*;
use tempfile::TempDir;

use crate::helpers::{builder, model_order, seen, write, Got};
use crate::model::{self, At, Data, ModelStep};
use crate::sizes::sizes_at;
use crate::skips::{kept_from, records, skipped};

/// Random base sizes of a case (tokens_per_batch, max_seq_len).
pub fn bases() -> impl Strategy<Value = (u64, u64)> {
    (1u64..30, 1u64..40)
}

/// A random order of a case: sequential, or shuffled with any seed.
pub fn orders() -> impl Strategy<Value = DocOrder> {
    prop_oneof![
        Just(DocOrder::Sequential),
        any::<u64>().prop_map(|seed| DocOrder::Shuffled { seed }),
    ]
}

/// A dataset written as shards into its own temporary folder, the sizes and the order.
pub struct Case {
    /// Holds the shard files for as long as the case lives.
    _dir: TempDir,
    pub data: Data,
    pub paths: Vec<PathBuf>,
    /// (tokens_per_batch, max_seq_len) before any schedule change.
    pub base: (u64, u64),
    pub schedule: Vec<(u64, u64, u64)>,
    pub order: DocOrder,
}

impl Case {
    /// `data` written as shards (`u16` unless `u32_shards`), read with these sizes and
    /// this order.
    pub fn write(
        data: Data,
        u32_shards: bool,
        base: (u64, u64),
        schedule: Vec<(u64, u64, u64)>,
        order: DocOrder,
    ) -> Case {
        let dir = tempfile::tempdir().unwrap();
        let paths = write(dir.path(), &data, u32_shards);
        Case {
            _dir: dir,
            data,
            paths,
            base,
            schedule,
            order,
        }
    }

    /// The source of rank `rank` of `world`.
    pub fn source(&self, rank: u64, world: u64) -> DocumentsBuilder {
        builder(&self.paths)
            .tokens_per_batch(self.base.0)
            .max_seq_len(self.base.1)
            .schedule(self.schedule.clone())
            .order(self.order)
            .shard(rank, world)
    }

    /// The source of rank `rank` of `world`, built; the case is rejected when no step
    /// fits.
    pub fn built(&self, rank: u64, world: u64) -> Result<Documents, TestCaseError> {
        self.source(rank, world)
            .build()
            .map_err(|_| TestCaseError::reject("no step fits"))
    }

    /// The model's walk for `world` ranks from `at`, `limit` steps: the steps, where the
    /// walk stands after them, and whether all fit (see [`model::steps`]).
    pub fn model(&self, world: u64, at: At, limit: usize) -> (Vec<ModelStep>, At, bool) {
        let sizes = |k: u64| sizes_at(self.base, &self.schedule, k);
        model::steps(
            &self.data,
            model_order(self.order),
            world as usize,
            &sizes,
            None,
            at,
            limit,
        )
    }

    /// `k` steps of every rank of `world`, each source built skipping `skip`, from `from`
    /// (the start if `None`), checked against the model walked from the same place: the
    /// steps not skipped (by `from`'s ranges or `skip`), with their numbers, epochs and
    /// pieces; the state after them at the next step delivered, with the model's cursor
    /// there (and the last step's own cursor after it, when no skipped step lies between),
    /// both lists of ranges, and its text read back. Adds the delivered pieces, and every
    /// rank's pieces of the skipped steps the walk went through, to `used`. `None` when
    /// the walk fails (the case is then rejected). Returns the merged state.
    pub fn run(
        &self,
        world: u64,
        from: Option<&DocumentsCheckpoint>,
        skip: &[(u64, u64)],
        k: usize,
        used: &mut Used,
    ) -> Result<Option<DocumentsCheckpoint>, TestCaseError> {
        let mut in_force: Vec<(u64, u64)> = from.map_or(Vec::new(), |c| c.skip.clone());
        in_force.extend_from_slice(skip);
        let at = from.map_or(At::default(), |c| At {
            epoch: c.epoch,
            shard: c.shard as usize,
            doc: c.doc as usize,
            step: c.step,
        });
        // The steps delivered, and where the run stands after them: the next one kept.
        let mut delivered = Vec::new();
        let mut step = at.step;
        while delivered.len() < k {
            step = kept_from(step, &in_force);
            delivered.push(step);
            step += 1;
        }
        let target = kept_from(step, &in_force);
        // Whether the state stands right after the last step delivered.
        let right_after_the_last = k > 0 && target == step;
        let (want, after, all_fit) = self.model(world, at, (target - at.step) as usize);
        if !all_fit {
            return Ok(None);
        }
        for w in want.iter().filter(|w| skipped(w.step, &in_force)) {
            for span in w.ranks.iter().flatten() {
                used.pieces.push((w.epoch, self.data.id(*span)));
            }
        }
        let want: Vec<_> = want
            .into_iter()
            .filter(|w| !skipped(w.step, &in_force))
            .collect();
        prop_assert_eq!(
            want.iter().map(|w| w.step).collect::<Vec<_>>(),
            delivered.clone()
        );
        let mut states = Vec::new();
        for rank in 0..world {
            let docs = match self.source(rank, world).skip_steps(skip.to_vec()).build() {
                Ok(d) => d,
                Err(Error::Source(SourceError::NoStepFits { .. })) => return Ok(None),
                Err(e) => return Err(TestCaseError::fail(format!("{e}"))),
            };
            // A resume on more ranks can find that no step fits an epoch any more where the
            // model walked no step (k is 0, nothing skipped): the source says so, as `build`
            // does for a fresh run, and the case has no fit. Where the model walked a step,
            // that error is a failure.
            let walked_none = target == at.step;
            let iter = match from.map(|c| docs.iter_from(c)) {
                Some(Ok(iter)) => iter,
                Some(Err(Error::Source(SourceError::NoStepFits { .. }))) if walked_none => {
                    return Ok(None)
                }
                Some(Err(e)) => return Err(TestCaseError::fail(format!("{e}"))),
                None => docs.iter(),
            };
            let mut last_after = None;
            for (step, w) in iter.take(k).zip(&want) {
                let g = seen(&self.data, &step).map_err(TestCaseError::fail)?;
                prop_assert_eq!(g.step, w.step);
                prop_assert_eq!(g.epoch, w.epoch);
                prop_assert_eq!(
                    &g.spans,
                    &w.ranks[rank as usize],
                    "rank {} of {}",
                    rank,
                    world
                );
                used.add(&g, &self.data);
                last_after = step.after();
            }
            let state = match docs.checkpoint_after(from, k as u64) {
                Ok(state) => state,
                Err(Error::Source(SourceError::NoStepFits { .. })) if walked_none => {
                    return Ok(None)
                }
                Err(e) => return Err(TestCaseError::fail(format!("{e}"))),
            };
            prop_assert_eq!(state.step, target);
            prop_assert_eq!(
                (state.epoch, state.shard, state.doc),
                (after.epoch, after.shard as u64, after.doc as u64)
            );
            if right_after_the_last {
                prop_assert_eq!(Some(state.cursor()), last_after);
            }
            records(&state, &in_force)?;
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
}

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
