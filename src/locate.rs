//! Lineage: where a batch's row came from. A source that knows its rows' places is a
//! [`Locate`]; a pipeline given one ([`ConfigBuilder::locator`](crate::ConfigBuilder::locator))
//! answers [`Batch::locate`](crate::Batch::locate) for every row of every batch.

use std::fmt;
use std::path::PathBuf;

use crate::row::Row;

/// Where one row of a batch came from: the source (its index in a mixture; 0 otherwise),
/// the file, and the row's first unit and length in the source's units — tokens for token
/// shards (and packed documents), records for files of records. A token row's bytes are
/// `len × token bytes` from `header + offset × token bytes` of the file; a record row's
/// `len × record bytes` from `offset × record bytes`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    /// The source's index in its mixture (0 for a single source).
    pub source: u16,
    /// The file (the path as the source opened it). A source whose segments are not files
    /// names the segment as its checkpoint's fingerprint does (`"segment 3"`).
    pub path: PathBuf,
    /// The row's first unit in the file: a token index for token shards, a record index
    /// for records.
    pub offset: u64,
    /// Units in the row.
    pub len: u64,
}

impl fmt::Display for Location {
    /// `source 1: /data/code/train_003.bin, tokens 81920..82945`-like: the source, the file
    /// and the unit range.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "source {}: {}, units {}..{}",
            self.source,
            self.path.display(),
            self.offset,
            self.offset.saturating_add(self.len)
        )
    }
}

/// A source that can say where each of its rows came from, from the row alone (its id,
/// length and source index as the batch describes it: [`Row`]). Nothing is read: a
/// location is arithmetic on the source's layout.
///
/// [`Sampler`](crate::source::Sampler) implements it through
/// [`by_id`](crate::source::Sampler::by_id) (a window's id is its grid index), and
/// [`Mixture`](crate::source::Mixture) by asking the row's source. A source of packed
/// documents implements it from the document id (the global offset of its BOS token over
/// the shards in order: a binary search over the shards' token counts gives the file and
/// the offset in it) and the row's length (its length in `cu_seqlens`: the document's
/// tokens in the batch, the step's last piece one token shorter, its last token a target
/// only).
///
/// ```
/// use std::sync::Arc;
/// use pinring::source::{write_shard, TokenShards};
/// use pinring::{Locate, Row};
/// # let dir = std::env::temp_dir().join(format!("pinring-locate-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// write_shard(dir.join("a.bin"), &[0; 41])?; // windows of 11, stride 10: 4
/// write_shard(dir.join("b.bin"), &[0; 21])?; // 2 more: ids 4 and 5
/// let sampler = TokenShards::glob(dir.join("*.bin"))?.windows(11).build()?;
/// let at = sampler.locate(&Row::id(5)).unwrap();
/// assert_eq!((at.path.ends_with("b.bin"), at.offset, at.len), (true, 10, 11));
/// let locator: Arc<dyn Locate> = Arc::new(sampler);
/// # let _ = locator;
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
pub trait Locate: Send + Sync + fmt::Debug + 'static {
    /// Where `row` came from; `None` when it is not a row of this source (an id past its
    /// end, a source index it does not have).
    fn locate(&self, row: &Row) -> Option<Location>;
}
