//! [`DocsByCount`]: a source's documents by count — the `n`-th document of its order, epoch
//! after epoch — apart from any packing: how a mixture walks each of its sources, and how
//! a source's place in a mixture's state ([`DocumentsCheckpoint`]'s cursor) and its count
//! of documents map to each other.
//!
//! [`DocumentsCheckpoint`]: crate::source::DocumentsCheckpoint

use std::sync::Arc;

use super::index::BuiltBy;
use super::inner::Inner;
use super::order::DocOrder;
use super::packed::Documents;
use super::permutation::Permutation;
use super::walk::{extent, Cursor, Extent};
use crate::error::source::SourceError;

/// A source's documents in the order of its walk, by count: document `n` is position
/// `n mod D` of epoch `⌊n / D⌋` (`D` the source's documents). In sequential order that is
/// shard by shard, document by document, the shards one after the other and the epochs
/// one after the other, nothing dropped at a shard's end (there are no steps here to cut
/// short); in shuffled order position `n mod D` of the epoch's permutation.
///
/// It keeps the epoch's permutation it last needed (shuffled order) and the documents
/// before each shard counted so far (sequential order, which counts a shard when the walk
/// first reaches it, indexing it if no one has, and tells the thread indexing ahead where
/// the walk is). Looking up the documents in order costs a binary search over the shards
/// each. (Public only as the reader of a mixture's hidden member; nothing outside the
/// crate can name it.)
pub struct DocsByCount {
    inner: Arc<Inner>,
    /// Who builds the shards it reaches.
    by: BuiltBy,
    /// Documents before shard `s`, for the shards counted so far and one more entry (the
    /// documents in the shards counted): every shard is counted when it holds shards + 1
    /// entries. Strictly increasing (a shard holds a document at least).
    before: Vec<u64>,
    /// The permutation of the epoch last looked in (shuffled order).
    perm: Option<Arc<Permutation>>,
    /// The shard the last document lay in (sequential order).
    at_shard: Option<usize>,
}

impl std::fmt::Debug for DocsByCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocsByCount")
            .field("shards_counted", &(self.before.len() - 1))
            .field("documents_counted", &self.before.last())
            .finish()
    }
}

impl DocsByCount {
    /// The documents of `docs` by count, shards it reaches built by `by`.
    pub(crate) fn new(docs: &Documents, by: BuiltBy) -> Self {
        let inner = docs.inner.clone();
        // Counted up front (shuffled order, every shard indexed at build), or as the walk
        // reaches each shard.
        let before = if inner.first_doc.is_empty() {
            let mut before = Vec::with_capacity(inner.index.shards() + 1);
            before.push(0);
            before
        } else {
            inner.first_doc.to_vec()
        };
        DocsByCount {
            perm: inner.epoch0.clone(),
            inner,
            by,
            before,
            at_shard: None,
        }
    }

    /// Documents in one epoch, when every shard is counted already.
    pub(crate) fn known_epoch_len(&self) -> Option<u64> {
        (self.before.len() > self.inner.index.shards()).then(|| self.total())
    }

    /// Documents in one epoch: every shard counted (and indexed) now if not yet.
    pub(crate) fn epoch_len(&mut self) -> Result<u64, SourceError> {
        while self.count_next()? {}
        Ok(self.total())
    }

    /// Documents in the shards counted so far.
    fn total(&self) -> u64 {
        self.before.last().copied().unwrap_or(0)
    }

    /// Counts the next shard not counted yet; false when every shard is.
    fn count_next(&mut self) -> Result<bool, SourceError> {
        let s = self.before.len() - 1;
        if s >= self.inner.index.shards() {
            return Ok(false);
        }
        let docs = self.inner.index.ensure(s, self.by)?.len() as u64;
        self.before.push(self.total() + docs);
        Ok(true)
    }

    /// Where document `n` is: before it in the walk's terms (the cursor a checkpoint after
    /// `n` documents records), and the shard it lies in (sequential order).
    pub(crate) fn cursor(&mut self, n: u64) -> Result<Cursor, SourceError> {
        match self.inner.order {
            DocOrder::Shuffled { .. } => {
                let d = self.total().max(1);
                Ok(Cursor {
                    epoch: n / d,
                    shard: 0,
                    doc: n % d,
                })
            }
            DocOrder::Sequential => {
                let (epoch, r) = loop {
                    if let Some(d) = self.known_epoch_len() {
                        break (n / d, n % d);
                    }
                    if n < self.total() {
                        break (0, n);
                    }
                    self.count_next()?;
                };
                let s = self.before.partition_point(|&c| c <= r) - 1;
                Ok(Cursor {
                    epoch,
                    shard: s as u64,
                    doc: r - self.before[s],
                })
            }
        }
    }

    /// Document `n` of the walk, and the cursor before it.
    pub(crate) fn get(&mut self, n: u64) -> Result<(Cursor, Extent), SourceError> {
        let cursor = self.cursor(n)?;
        let inner = &*self.inner;
        let found = match inner.order {
            DocOrder::Shuffled { seed } => {
                let perm = match &self.perm {
                    Some(p) if p.epoch() == cursor.epoch => p,
                    _ => self.perm.insert(Arc::new(Permutation::new(
                        self.total(),
                        seed,
                        cursor.epoch,
                    ))),
                };
                perm.get(cursor.doc).and_then(|dense| {
                    let s = self.before.partition_point(|&c| c <= dense).checked_sub(1)?;
                    extent(&inner.index, s, inner.index.get(s)?, dense - self.before[s])
                })
            }
            DocOrder::Sequential => {
                let s = cursor.shard as usize;
                if self.at_shard != Some(s) {
                    if let Some(ahead) = &inner.ahead {
                        ahead.walk_at(s);
                    }
                    self.at_shard = Some(s);
                }
                inner
                    .index
                    .get(s)
                    .and_then(|bos| extent(&inner.index, s, bos, cursor.doc))
            }
        };
        // Counted shards are indexed and hold the documents counted in them, so the
        // document is there; were it not, the position is past what the index holds.
        found
            .map(|e| (cursor, e))
            .ok_or(SourceError::BadPosition {
                index: n,
                len: self.total(),
            })
    }

    /// The count of documents before `cursor` (a cursor inside the source: check it with
    /// the source's `check_checkpoint` first): `epoch · D` plus the documents before it in
    /// its epoch.
    pub(crate) fn count(&mut self, cursor: Cursor) -> Result<u64, SourceError> {
        let within = match self.inner.order {
            DocOrder::Shuffled { .. } => cursor.doc,
            DocOrder::Sequential => {
                let s = usize::try_from(cursor.shard).unwrap_or(usize::MAX);
                while self.before.len() <= s && self.count_next()? {}
                let before = self.before.get(s).copied().unwrap_or_else(|| self.total());
                before.saturating_add(cursor.doc)
            }
        };
        if cursor.epoch == 0 {
            return Ok(within);
        }
        let d = self.epoch_len()?;
        Ok(cursor.epoch.saturating_mul(d).saturating_add(within))
    }
}
