//! [`PackDocuments`]: the decoder of a [`Documents`](crate::source::Documents) source — a
//! step's pieces read straight into the slot's `tokens` field and widened in place, then
//! `cu_seqlens` and `positions` — and the batch description each step gives (a row per
//! document, the step, the extents).

use super::pack::{describe_pieces, pack, ShardPiece};
use super::step::DocStep;
use crate::decode::Decode;
use crate::describe::Describe;
use crate::error::DecodeError;

/// Packs a [`DocStep`] into its batch's slot: the rank's pieces of documents into `tokens`
/// (read from their shards by position through this thread's chunk, each checked to start
/// with `bos`, and widened from there to the token type), `cu_seqlens` (`[0, ends…]`, the
/// last piece less 1 so that it ends at `N`, padded with `N` to `max_docs`) and, when the
/// source has them, `positions` (each input's position in its document). Made by
/// [`Documents::decoder`](crate::source::Documents::decoder); the slot's layout is the
/// source's [`fields`](crate::source::Documents::fields).
///
/// It describes each batch ([`Decode::describe`]): a row per piece (`id` the document's
/// id, `len` its length in `cu_seqlens`), the step, and the dims `[N + 1, max_docs, N]`.
///
/// Errors: a step that could not be made returns its [`SourceError`](crate::source::SourceError)
/// (`pop` reports it as [`Error::Source`](crate::Error::Source)); a slot smaller than the
/// fields, a shard changed under the loader or that could not be read
/// (`SourceError::Read`), a piece that does not start with `bos`
/// ([`DocumentProblem::NotADocumentStart`](crate::source::DocumentProblem::NotADocumentStart):
/// the shard's index does not fit it; a cached one is removed from the cache), a `u32` token above
/// `i32::MAX` for `i32` output are [`DecodeError`]s. Walking the pieces again allocates
/// nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PackDocuments {
    _made_by_documents: (),
}

impl PackDocuments {
    pub(super) const fn new() -> Self {
        PackDocuments {
            _made_by_documents: (),
        }
    }
}

impl Decode for PackDocuments {
    type Sample = DocStep;

    fn identify(step: &DocStep) -> Option<(u64, u64)> {
        Some((step.step, step.epoch))
    }

    fn describe(step: &DocStep, out: &mut Describe<'_>) {
        if step.outcome.is_err() {
            out.step(step.step);
            out.batch_size(1);
            return;
        }
        let pieces = step.pieces().map(|p| (0, p));
        describe_pieces(step.step, step.micro, step.sizes, pieces, out);
    }

    fn decode(&self, step: DocStep, out: &mut [u8]) -> Result<(), DecodeError> {
        if let Err(e) = step.outcome {
            return Err(DecodeError::from(*e));
        }
        let index = &*step.inner.index;
        let pieces = step.pieces().map(|piece| ShardPiece { index, piece });
        let at = (step.step, step.inner.rank);
        pack(&step.inner.layout, at, step.sizes, pieces, out)
    }
}
