//! [`DocStep`]: one step of one rank, as the pipeline pulls it — a small descriptor (the
//! step, where it starts, its sizes), not a list: the decoder walks the rank's pieces again
//! from where they start ([`DocStep::pieces`]), allocating nothing.

use std::fmt;
use std::sync::Arc;

use super::inner::Inner;
use super::permutation::Permutation;
use super::schedule::StepSizes;
use super::walk::{Cursor, Piece, RankPieces, StepDocs};
use super::walker::Located;
use crate::error::source::SourceError;

/// One step of one rank of a [`Documents`](crate::source::Documents) source: what its
/// [`Steps`](crate::source::Steps) iterator yields and its
/// [`PackDocuments`](crate::source::PackDocuments) decoder packs into a batch.
///
/// It holds a handle on the source (its index), the step's number, where the step starts
/// and where this rank's pieces start, and the step's sizes: a few words, however many
/// documents the step packs. A step that cannot be made (it needs more documents than
/// `cu_seqlens` holds, no step fits in a whole epoch, a shard cannot be indexed) carries
/// its error, which the decoder returns, so that `pop` reports it after the steps before
/// it; the iterator ends after it.
pub struct DocStep {
    pub(super) inner: Arc<Inner>,
    pub(super) step: u64,
    /// The micro-step within the (optimizer) step: `0..grad_accum_steps`.
    pub(super) micro: u64,
    pub(super) epoch: u64,
    pub(super) sizes: StepSizes,
    pub(super) outcome: Result<Located, Box<SourceError>>,
    /// The permutation of the step's epoch (shuffled order).
    pub(super) perm: Option<Arc<Permutation>>,
}

impl fmt::Debug for DocStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("DocStep");
        d.field("step", &self.step)
            .field("micro_step", &self.micro)
            .field("epoch", &self.epoch)
            .field("sizes", &self.sizes);
        match &self.outcome {
            Ok(located) => d
                .field("start", &located.start)
                .field("rank_doc", &located.walk.rank_doc)
                .field("pieces", &located.walk.rank_pieces),
            Err(e) => d.field("error", e),
        };
        d.finish()
    }
}

impl DocStep {
    /// The step's number, from 0 ([`Batch::step`](crate::Batch::step)).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The micro-step within the step: `0..grad_accum_steps` (a batch's `dims()[3]`).
    pub fn micro_step(&self) -> u64 {
        self.micro
    }

    /// The walk's epoch ([`Batch::epoch`](crate::Batch::epoch)).
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The step's sizes, from the schedule.
    pub fn sizes(&self) -> StepSizes {
        self.sizes
    }

    /// Where the step starts: the first rank's first document. `None` for a step that
    /// could not be made.
    pub fn start(&self) -> Option<Cursor> {
        self.outcome.as_ref().ok().map(|l| l.start)
    }

    /// Where the walk stands after the step (what a checkpoint after it records). `None`
    /// for a step that could not be made.
    pub fn after(&self) -> Option<Cursor> {
        self.outcome.as_ref().ok().map(Located::after)
    }

    /// Why the step could not be made, if it could not.
    pub fn error(&self) -> Option<&SourceError> {
        self.outcome.as_ref().err().map(|e| &**e)
    }

    /// How many pieces this rank packs (rows of its batch; `cu_seqlens` holds one more
    /// entry than that, then padding). 0 for a step that could not be made.
    pub fn piece_count(&self) -> u64 {
        self.outcome.as_ref().map_or(0, |l| l.walk.rank_pieces)
    }

    /// This rank's pieces, in the order they are packed: walked again from where they
    /// start, allocating nothing. Their lengths add up to `N + 1`; none for a step that
    /// could not be made.
    pub fn pieces(&self) -> impl Iterator<Item = Piece> + Clone + '_ {
        let inner = &*self.inner;
        if !inner.schedule.align_to_bos() {
            // A contiguous window: one piece of N + 1 tokens from the rank's position.
            let window = self.outcome.as_ref().ok().and_then(|located| {
                let s = usize::try_from(located.start.shard).ok()?;
                let start = located.walk.rank_doc;
                Some(Piece {
                    doc: inner.index.first_token(s) + start,
                    shard: s,
                    start,
                    len: self.sizes.tokens + 1,
                })
            });
            return Pieces::Window(window.into_iter());
        }
        let walked = self.outcome.as_ref().ok().and_then(|located| {
            let docs = match &self.perm {
                Some(perm) => StepDocs::Epoch {
                    index: &inner.index,
                    perm,
                    first_doc: &inner.first_doc,
                },
                None => {
                    let s = usize::try_from(located.start.shard).ok()?;
                    StepDocs::Shard {
                        index: &inner.index,
                        shard: s,
                        bos: inner.index.get(s)?,
                    }
                }
            };
            Some(RankPieces::new(docs, located.walk.rank_doc, self.sizes))
        });
        Pieces::Documents(walked.into_iter().flatten())
    }
}

/// A step's pieces: documents walked from where the rank's start, or one window.
#[derive(Clone)]
enum Pieces<D, W> {
    Documents(D),
    Window(W),
}

impl<D: Iterator<Item = Piece>, W: Iterator<Item = Piece>> Iterator for Pieces<D, W> {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        match self {
            Pieces::Documents(d) => d.next(),
            Pieces::Window(w) => w.next(),
        }
    }
}
