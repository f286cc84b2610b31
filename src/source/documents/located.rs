//! [`Documents`] as a [`Locate`]: a row's place from its document id and length.

use super::packed::Documents;
use crate::locate::{Locate, Location};
use crate::row::Row;

impl Documents {
    /// Where a row of `len` tokens of the document with id `id` lies: the shard holding
    /// the document (a binary search of the id, the global offset of its `bos` token, over
    /// the shards' cumulative token counts), the `bos`'s token offset in it, and `len`
    /// tokens (a row's length is its length in `cu_seqlens`: the batch's tokens of that
    /// document, less the step's last token, a target only). Source 0. Nothing is read.
    ///
    /// `None` for an id past the shards' tokens or a row running past its shard's end —
    /// and, where the shard is indexed already (every shard a step used is), for an id that
    /// is no document's start or a length past the document's end.
    ///
    /// ```
    /// use pinring::source::{write_shard, Documents, TokenShards};
    /// use pinring::{Locate, Row};
    /// # let dir = std::env::temp_dir().join(format!("pinring-doclocate-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// // Documents of 10 tokens in two shards of 100.
    /// let tokens: Vec<u16> = (0..100u16).map(|i| if i % 10 == 0 { 50256 } else { i }).collect();
    /// write_shard(dir.join("a.bin"), &tokens)?;
    /// write_shard(dir.join("b.bin"), &tokens)?;
    /// let docs = Documents::builder(TokenShards::glob(dir.join("*.bin"))?)
    ///     .tokens_per_batch(19).max_seq_len(64).build()?;
    /// let at = docs.locate(&Row { id: 130, len: 9, source: 0 }).unwrap();
    /// assert_eq!((at.path.ends_with("b.bin"), at.offset, at.len), (true, 30, 9));
    /// assert!(docs.location(31, 9).is_none()); // no document starts there (a.bin is indexed)
    /// assert!(docs.location(30, 11).is_none()); // past the end of the document
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn location(&self, id: u64, len: u64) -> Option<Location> {
        let index = &self.inner.index;
        let (s, start) = index.shard_at(id)?;
        let shard_end = index.tokens(s);
        let end = match index.get(s) {
            Some(bos) => {
                let at = u32::try_from(start).ok()?;
                let j = bos.binary_search(&at).ok()?;
                bos.get(j + 1).map_or(shard_end, |&b| u64::from(b))
            }
            None => shard_end,
        };
        if start.checked_add(len)? > end {
            return None;
        }
        Some(Location {
            source: 0,
            path: index.shard(s).path().to_path_buf(),
            offset: start,
            len,
        })
    }
}

/// A row's id is its document's id; its length the row's tokens.
impl Locate for Documents {
    fn locate(&self, row: &Row) -> Option<Location> {
        self.location(row.id, u64::from(row.len))
            .map(|at| Location {
                source: row.source,
                ..at
            })
    }
}
