//! [`MixedDecoder`]: decodes a mixture's samples with their sources' decoder, describes
//! each row with its source, and times each source's decodes.

use std::sync::Arc;

use super::windows_samples::MixedSample;
use crate::decode::Decode;
use crate::describe::Describe;
use crate::error::DecodeError;
use crate::source_tally::SourceTally;
use crate::sync::native::Instant;

/// Decodes a [`Mixture`](crate::source::Mixture)'s samples with the decoder of its
/// sources (one decoder for all: they are of one kind and shape), and describes each row
/// with `source` = the sample's source index and `id` = its id within that source
/// ([`Batch::row_sources`](crate::Batch::row_sources),
/// [`sample_ids`](crate::Batch::sample_ids)) and the batch's step. It times each source's
/// decodes ([`SourceTally`]), which [`Pipeline::stats`](crate::Pipeline::stats) reports
/// per source. A mixture's batches all have epoch 0 (each source has epochs of its own):
/// batches are cut by count alone. Made by
/// [`Mixture::decoder`](crate::source::Mixture::decoder) or [`new`](Self::new).
#[derive(Debug)]
pub struct MixedDecoder<D> {
    decoder: D,
    tally: Arc<SourceTally>,
}

impl<D: Decode> MixedDecoder<D> {
    /// `decoder` for a mixture of `sources` sources.
    pub fn new(decoder: D, sources: usize) -> Self {
        MixedDecoder {
            decoder,
            tally: Arc::new(SourceTally::new(sources)),
        }
    }

    /// The sources' decoder.
    pub fn decoder(&self) -> &D {
        &self.decoder
    }

    /// Each source's decoded samples and decode time so far.
    pub fn tally(&self) -> &Arc<SourceTally> {
        &self.tally
    }
}

impl<D: Decode> Decode for MixedDecoder<D> {
    type Sample = MixedSample<D::Sample>;

    fn decode(&self, sample: Self::Sample, out: &mut [u8]) -> Result<(), DecodeError> {
        let source = usize::from(sample.source());
        let t = Instant::now();
        let done = self.decoder.decode(sample.into_item(), out);
        self.tally.record(source, t.elapsed());
        done
    }

    fn identify(sample: &Self::Sample) -> Option<(u64, u64)> {
        D::identify(sample.item()).map(|(id, _)| (id, 0))
    }

    fn describe(sample: &Self::Sample, out: &mut Describe<'_>) {
        out.source(sample.source());
        D::describe(sample.item(), out);
        if let Some(step) = sample.step() {
            out.step(step);
        }
        if let Some(samples) = sample.batch_size() {
            out.batch_size(samples);
        }
    }

    fn source_tally(&self) -> Option<Arc<SourceTally>> {
        Some(self.tally.clone())
    }
}
