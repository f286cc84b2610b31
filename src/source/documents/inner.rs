//! [`Inner`]: what a [`Documents`](crate::source::Documents) source shares with its
//! iterators, steps and decoder — the shards and their index, the settings, the layout.

use std::sync::Arc;

use super::ahead::IndexAhead;
use super::checkpoint::{DocumentsCheckpoint, DOCUMENTS_CHECKPOINT_VERSION};
use super::index::BosIndex;
use super::layout::Layout;
use super::order::DocOrder;
use super::permutation::Permutation;
use super::schedule::Schedule;
use super::walk::Cursor;
use crate::source::sampling::checkpoint::Fingerprint;
use crate::source::sampling::skip::SkipSteps;
use crate::source::tokens::TokenShards;

/// What a source, its iterators, steps and decoder share.
pub(super) struct Inner {
    pub(super) shards: TokenShards,
    pub(super) index: Arc<BosIndex>,
    /// The thread indexing ahead of the walk (sequential order, more than one shard),
    /// shared by the runs of this source on other ranks ([`Inner::on_ranks`]).
    pub(super) ahead: Option<Arc<IndexAhead>>,
    /// Documents in the shards before shard `s`, and in all at the end, when every shard
    /// is indexed up front (shuffled order, or a mixture's source under a stop rule);
    /// empty otherwise (sequential order counts them as the walk reaches them).
    pub(super) first_doc: Box<[u64]>,
    /// Epoch 0's permutation, made at build (shuffled order).
    pub(super) epoch0: Option<Arc<Permutation>>,
    pub(super) bos: u32,
    pub(super) order: DocOrder,
    pub(super) schedule: Schedule,
    pub(super) rank: u64,
    pub(super) world: u64,
    pub(super) layout: Layout,
    pub(super) fingerprint: Fingerprint,
}

impl Inner {
    /// The same source walked as `rank` of `world`: everything else shared (the index,
    /// the thread ahead, epoch 0's permutation).
    pub(super) fn on_ranks(&self, rank: u64, world: u64) -> Inner {
        Inner {
            shards: self.shards.clone(),
            index: self.index.clone(),
            ahead: self.ahead.clone(),
            first_doc: self.first_doc.clone(),
            epoch0: self.epoch0.clone(),
            bos: self.bos,
            order: self.order,
            schedule: self.schedule.clone(),
            rank,
            world,
            layout: self.layout.clone(),
            fingerprint: self.fingerprint.clone(),
        }
    }

    /// Documents in the dataset when counted up front (shuffled order); 0 otherwise.
    pub(super) fn documents(&self) -> u64 {
        self.first_doc.last().copied().unwrap_or(0)
    }

    /// The checkpoint of this run at `cursor`, `step` steps done, skipping `skip`.
    pub(super) fn checkpoint_at(
        &self,
        cursor: Cursor,
        step: u64,
        skip: &SkipSteps,
    ) -> DocumentsCheckpoint {
        DocumentsCheckpoint {
            version: DOCUMENTS_CHECKPOINT_VERSION,
            dataset: self.fingerprint.clone(),
            bos: self.bos,
            order: self.order.name().to_owned(),
            seed: self.order.seed(),
            schedule: self.schedule.triples(),
            max_docs: self.schedule.max_docs().unwrap_or(0),
            max_docs_formula: self.schedule.formula_only(),
            align_to_bos: self.schedule.align_to_bos(),
            epoch: cursor.epoch,
            shard: cursor.shard,
            doc: cursor.doc,
            step,
            world_size: self.world,
            skip: skip.ranges().to_vec(),
        }
    }
}

