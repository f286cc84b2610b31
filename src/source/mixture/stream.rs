//! [`Stream`]: a mixture's global sequence from some position on, with each source's
//! items by count.

use std::fmt;

use super::walk::Walk;

/// A run's global sequence from some position on: which source each position takes and
/// that source's count ([`Walk`]), and each source's items by count (its `R`, a
/// [`Member`](super::member::Member)'s `Reader`).
pub struct Stream<R> {
    pub(crate) walk: Walk,
    pub(crate) readers: Vec<R>,
}

impl<R> fmt::Debug for Stream<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stream")
            .field("position", &self.walk.position())
            .finish_non_exhaustive()
    }
}
