//! [`PackMixedDocuments`]: the decoder of a mixture of packed documents — a step's pieces,
//! each read from its own source's shard, packed into the slot as one source's are — its
//! batch description (a row per piece, with its source), and each source's share of the
//! decode time.

use std::sync::Arc;

use super::documents_step::MixedDocStep;
use crate::decode::Decode;
use crate::describe::Describe;
use crate::error::DecodeError;
use crate::source::documents::pack::{describe_pieces, pack, ShardPiece};
use crate::source_tally::SourceTally;
use crate::sync::native::Instant;

/// Packs a [`MixedDocStep`] into its batch's slot, exactly as
/// [`PackDocuments`](crate::source::PackDocuments) packs one source's step: `tokens` (each
/// piece read from its source's shard by position and widened in place), `inputs` and
/// `targets` (views), `cu_seqlens` and, with
/// [`positions`](crate::source::DocumentMixtureBuilder::positions), `positions`. Made by
/// [`Mixture::<Documents>::decoder`](crate::source::Mixture::decoder); the slot's layout is
/// the mixture's [`fields`](crate::source::Mixture::fields).
///
/// It describes each batch: a row per piece with `source` its source's index in the
/// mixture, `id` the document's id within that source (the global offset of its `bos` over
/// that source's shards) and `len` its length in `cu_seqlens`; the step; the dims
/// `[N + 1, max_docs, N]`. Each batch has epoch 0.
///
/// It counts each source's pieces and shares each step's decode time among its pieces by
/// their tokens ([`SourceTally`]), which [`Pipeline::stats`](crate::Pipeline::stats)
/// reports per source (`samples` are documents there).
#[derive(Debug)]
pub struct PackMixedDocuments {
    tally: Arc<SourceTally>,
}

impl PackMixedDocuments {
    /// The decoder of a mixture of `sources` sources.
    pub(crate) fn new(sources: usize) -> Self {
        PackMixedDocuments {
            tally: Arc::new(SourceTally::new(sources)),
        }
    }

    /// Each source's decoded pieces and their share of the decode time so far.
    pub fn tally(&self) -> &Arc<SourceTally> {
        &self.tally
    }
}

impl Decode for PackMixedDocuments {
    type Sample = MixedDocStep;

    fn identify(step: &MixedDocStep) -> Option<(u64, u64)> {
        Some((step.step, 0))
    }

    fn describe(step: &MixedDocStep, out: &mut Describe<'_>) {
        if step.error().is_some() {
            out.step(step.step);
            out.batch_size(1);
            return;
        }
        let pieces = step.pieces().iter().map(|p| (p.source, p.piece));
        describe_pieces(step.step, 0, step.sizes, pieces, out);
    }

    fn decode(&self, mut step: MixedDocStep, out: &mut [u8]) -> Result<(), DecodeError> {
        if let Some(e) = step.take_error() {
            return Err(DecodeError::from(e));
        }
        let t = Instant::now();
        let members = &step.inner.members;
        let pieces = step.pieces().iter().filter_map(|p| {
            let member = members.get(usize::from(p.source))?;
            Some(ShardPiece {
                index: member.walked.bos_index(),
                piece: p.piece,
            })
        });
        let packed = pack(
            &step.inner.packing.layout,
            (step.step, step.inner.settings.run.rank),
            step.sizes,
            pieces,
            out,
        );
        let spent = t.elapsed().as_nanos();
        let tokens = step.sizes.tokens + 1;
        for p in step.pieces() {
            let share = spent * u128::from(p.piece.len) / u128::from(tokens);
            let nanos = u64::try_from(share).unwrap_or(u64::MAX);
            self.tally.record(
                usize::from(p.source),
                std::time::Duration::from_nanos(nanos),
            );
        }
        packed
    }

    fn source_tally(&self) -> Option<Arc<SourceTally>> {
        Some(self.tally.clone())
    }
}
