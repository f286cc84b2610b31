//! `Mixture<Documents>` as a [`Locate`]: a row's place from its source and its document id
//! there.

use crate::locate::{Locate, Location};
use crate::row::Row;
use crate::source::documents::packed::Documents;
use crate::source::mixture::mix::Mixture;

impl Mixture<Documents> {
    /// Where a row of `len` tokens of document `id` of source `source` lies (see
    /// [`Documents::location`]); `None` for a source or document the mixture does not have.
    pub fn location(&self, source: u16, id: u64, len: u64) -> Option<Location> {
        let member = self.inner.members.get(usize::from(source))?;
        let at = member.walked.location(id, len)?;
        Some(Location { source, ..at })
    }
}

/// A row's source index picks the source; its id is the document's id within that source,
/// its length the row's tokens.
impl Locate for Mixture<Documents> {
    fn locate(&self, row: &Row) -> Option<Location> {
        self.location(row.source, row.id, u64::from(row.len))
    }
}
