//! Where a packed document came from: its id (the global offset of its `bos` token over
//! the shards in order) placed in its shard by a binary search over the shards' token
//! counts, as the core's `Locate` of a `Documents` source.

use std::path::PathBuf;

use pinring::source::TokenShards;
use pinring::{Locate, Location, Row};

/// Places a `Documents` source's rows: each row is a document piece, its id the global
/// offset of the document's `bos` token, its length its tokens in the step.
#[derive(Debug)]
pub(crate) struct DocumentLocator {
    /// Each shard's path, in order.
    paths: Vec<PathBuf>,
    /// Each shard's first token's global offset, then the total (one more entry).
    starts: Vec<u64>,
}

impl DocumentLocator {
    /// The locator of documents in `shards`.
    pub(crate) fn new(shards: &TokenShards) -> Self {
        let mut starts = vec![0u64];
        let mut paths = Vec::new();
        for s in shards.shards() {
            paths.push(s.path().to_owned());
            let last = starts.last().copied().unwrap_or(0);
            starts.push(last + s.len() as u64);
        }
        DocumentLocator { paths, starts }
    }
}

impl Locate for DocumentLocator {
    fn locate(&self, row: &Row) -> Option<Location> {
        if row.source != 0 || row.id >= *self.starts.last()? {
            return None;
        }
        // The last shard starting at or before the id.
        let shard = self.starts.partition_point(|&s| s <= row.id) - 1;
        Some(Location {
            source: 0,
            path: self.paths.get(shard)?.clone(),
            offset: row.id - self.starts[shard],
            len: u64::from(row.len),
        })
    }
}
