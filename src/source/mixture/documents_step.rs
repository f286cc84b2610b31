//! [`MixedDocStep`]: one step of one rank of a mixture of packed documents, as the pipeline
//! pulls it — the step's number and sizes and the rank's pieces, each a [`MixedPiece`] of
//! its source.

use std::fmt;
use std::sync::Arc;

use super::documents_member::DocMember;
use super::inner::MixInner;
use super::mixed_piece::MixedPiece;
use crate::error::source::SourceError;
use crate::source::documents::schedule::StepSizes;

/// One step of one rank of a mixture of packed documents
/// ([`Mixture<Documents>`](crate::source::Mixture)): what its
/// [`MixedSteps`](crate::source::MixedSteps) yields and its
/// [`PackMixedDocuments`](crate::source::PackMixedDocuments) decoder packs into a batch.
///
/// It holds the step's number and sizes and this rank's pieces, in the order they are
/// packed (their lengths add up to `N + 1`); the list is recycled when the step is dropped
/// (after its decode), so a run allocates no list per step once the first few are made. A
/// step that cannot be made (it needs more documents than `cu_seqlens` holds, a source's
/// shard cannot be indexed) carries its error, which the decoder returns; the iterator
/// ends after it.
pub struct MixedDocStep {
    pub(crate) inner: Arc<MixInner<DocMember>>,
    pub(crate) step: u64,
    pub(crate) sizes: StepSizes,
    /// The global position where the step's documents start.
    pub(crate) start: u64,
    pub(crate) outcome: Result<Vec<MixedPiece>, Box<SourceError>>,
}

impl fmt::Debug for MixedDocStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("MixedDocStep");
        d.field("step", &self.step)
            .field("sizes", &self.sizes)
            .field("start", &self.start);
        match &self.outcome {
            Ok(pieces) => d.field("pieces", &pieces.len()),
            Err(e) => d.field("error", e),
        };
        d.finish()
    }
}

impl MixedDocStep {
    /// The step's number, from 0 ([`Batch::step`](crate::Batch::step)).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The step's sizes, from the schedule.
    pub fn sizes(&self) -> StepSizes {
        self.sizes
    }

    /// The position in the mixture's document sequence of the step's first document (the
    /// first rank's).
    pub fn start(&self) -> u64 {
        self.start
    }

    /// This rank's pieces, in the order they are packed: none for a step that could not
    /// be made.
    pub fn pieces(&self) -> &[MixedPiece] {
        self.outcome.as_deref().unwrap_or(&[])
    }

    /// How many pieces this rank packs (rows of its batch).
    pub fn piece_count(&self) -> u64 {
        self.pieces().len() as u64
    }

    /// Why the step could not be made, if it could not.
    pub fn error(&self) -> Option<&SourceError> {
        self.outcome.as_ref().err().map(|e| &**e)
    }

    /// The error, taken out (the pieces stay).
    pub(crate) fn take_error(&mut self) -> Option<SourceError> {
        if self.outcome.is_ok() {
            return None;
        }
        match std::mem::replace(&mut self.outcome, Ok(Vec::new())) {
            Err(e) => Some(*e),
            Ok(_) => None,
        }
    }
}

impl Drop for MixedDocStep {
    fn drop(&mut self) {
        if let Ok(list) = &mut self.outcome {
            self.inner.packing.lists.give_back(std::mem::take(list));
        }
    }
}
