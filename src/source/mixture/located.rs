//! [`Mixture`] as a [`Locate`]: a row's place from its source and its id there.

use super::decoder::MixedDecoder;
use super::mix::Mixture;
use crate::decode::Decode;
use crate::locate::{Locate, Location};
use crate::row::Row;
use crate::source::sampling::segmented::Segmented;

impl<S: Segmented> Mixture<S> {
    /// Where the sample with id `id` of source `source` lies (see
    /// [`Sampler::location`](crate::source::Sampler::location)); `None` for a source or id
    /// the mixture does not have.
    pub fn location(&self, source: u16, id: u64) -> Option<Location> {
        let member = self.inner.members.get(usize::from(source))?;
        member.given.location(id, source)
    }

    /// A [`MixedDecoder`] of this mixture's samples with `decoder`, the decoder of its
    /// sources' samples.
    pub fn decoder<D: Decode<Sample = S::Window>>(&self, decoder: D) -> MixedDecoder<D> {
        MixedDecoder::new(decoder, self.len())
    }
}

/// A row's source index picks the source; its id is the id within that source.
impl<S: Segmented> Locate for Mixture<S> {
    fn locate(&self, row: &Row) -> Option<Location> {
        self.location(row.source, row.id)
    }
}
