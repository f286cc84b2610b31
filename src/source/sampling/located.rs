//! [`Sampler`] as a [`Locate`]: a window's place from its id, by arithmetic on the grid.

use std::path::PathBuf;

use super::order::Order;
use super::sampler::Sampler;
use super::segmented::Segmented;
use crate::locate::{Locate, Location};
use crate::row::Row;

impl<S: Segmented> Sampler<S> {
    /// Where the window with id `id` lies, as a [`Location`] of source `source`: its
    /// segment's file (named by the fingerprint when the segments are not files), its
    /// first unit and its length ([`by_id`](Self::by_id)'s window, without making it).
    /// `None` when `id` is not below [`id_count`](Self::id_count).
    pub fn location(&self, id: u64, source: u16) -> Option<Location> {
        if id >= self.id_count() {
            return None;
        }
        let inner = &*self.inner;
        let (segment, offset) = match inner.order {
            Order::Random { .. } => inner.start_of(id),
            _ => inner.grid(id),
        };
        let path = match inner.source.segment_path(segment) {
            Some(path) => path.to_owned(),
            None => PathBuf::from(inner.fingerprint.files.get(segment)?),
        };
        Some(Location {
            source,
            path,
            offset,
            len: inner.window,
        })
    }
}

/// A row's id is its window's id ([`WindowSpec::id`](crate::source::WindowSpec::id)); its
/// source index is carried over as given.
impl<S: Segmented> Locate for Sampler<S> {
    fn locate(&self, row: &Row) -> Option<Location> {
        self.location(row.id, row.source)
    }
}
