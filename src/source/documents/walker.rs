//! [`Walker`]: finds where the next whole step fits from a cursor, across shards and
//! epochs — the partial steps modded-nanogpt drops at a shard's end (sequential order) or
//! an epoch's (shuffled order) — indexing shards and making epochs' permutations as it
//! reaches them.

use std::sync::Arc;

use super::inner::Inner;
use super::index::BuiltBy;
use super::order::DocOrder;
use super::permutation::Permutation;
use super::walk::{walk_step, Cursor, StepDocs, StepWalk};
use crate::error::source::SourceError;

/// A step located: where it starts, and what this rank needs to know of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Located {
    /// Where the step starts (the first rank's first document).
    pub(super) start: Cursor,
    /// The step, walked.
    pub(super) walk: StepWalk,
}

impl Located {
    /// The cursor after the step.
    pub(super) fn after(&self) -> Cursor {
        Cursor {
            doc: self.walk.after,
            ..self.start
        }
    }
}

/// modded-nanogpt's validation walk (`align_to_bos=False`): the step of `tokens` tokens a
/// rank from token `pos` of shard `s`, rank `r`'s window the `tokens + 1` from
/// `pos + r · tokens`; `None` when `pos + W · tokens + 1` reaches the shard's end (master's
/// `pos + num_tokens + 1 >= len(tokens)`: the next shard). A cursor's `doc` is `pos`.
fn window_step(inner: &Inner, s: usize, pos: u64, tokens: u64) -> Option<StepWalk> {
    let span = tokens.checked_mul(inner.world)?;
    let end = pos.checked_add(span)?.checked_add(1)?;
    (end < inner.index.tokens(s)).then_some(StepWalk {
        rank_doc: pos + inner.rank * tokens,
        rank_pieces: 1,
        // How many documents a window holds is known once its tokens are read: the
        // decoder checks that they fit `cu_seqlens`.
        most_pieces: (0, 0),
        after: pos + span,
    })
}

/// Walks steps over a source's index: who builds the shards it reaches (`by`), and the
/// permutation of the epoch it is in (shuffled order).
pub(super) struct Walker<'a> {
    inner: &'a Inner,
    by: BuiltBy,
    perm: Option<Arc<Permutation>>,
}

impl<'a> Walker<'a> {
    /// A walker over `inner`'s index, building what it reaches as `by`, starting with
    /// `perm` (an epoch's permutation at hand, if any).
    pub(super) fn new(inner: &'a Inner, by: BuiltBy, perm: Option<Arc<Permutation>>) -> Self {
        Walker { inner, by, perm }
    }

    /// The permutation of the epoch of the last step located (shuffled order).
    pub(super) fn into_perm(self) -> Option<Arc<Permutation>> {
        self.perm
    }

    /// Where step `step` starts, from `from`: `from` itself if the step fits there, else
    /// the start of the first later shard (sequential) or epoch where it fits. A whole
    /// epoch without a fit is [`SourceError::NoStepFits`]; a shard that cannot be indexed
    /// is its error.
    pub(super) fn locate(&mut self, from: Cursor, step: u64) -> Result<Located, SourceError> {
        let inner = self.inner;
        let sizes = inner.schedule.at(step);
        let shards = inner.index.shards() as u64;
        let mut cursor = from;
        loop {
            let fits = match inner.order {
                _ if !inner.schedule.align_to_bos() => {
                    (cursor.shard < shards).then_some(()).and_then(|()| {
                        window_step(inner, cursor.shard as usize, cursor.doc, sizes.tokens)
                    })
                }
                DocOrder::Sequential if cursor.shard < shards => {
                    let s = cursor.shard as usize;
                    let bos = inner.index.ensure(s, self.by)?;
                    if let Some(ahead) = &inner.ahead {
                        ahead.walk_at(s);
                    }
                    let docs = StepDocs::Shard {
                        index: &inner.index,
                        shard: s,
                        bos,
                    };
                    walk_step(docs, cursor.doc, sizes, inner.world, inner.rank)
                }
                DocOrder::Sequential => None,
                DocOrder::Shuffled { seed } => {
                    let perm = match &self.perm {
                        Some(p) if p.epoch() == cursor.epoch => p,
                        _ => self.perm.insert(Arc::new(Permutation::new(
                            inner.documents(),
                            seed,
                            cursor.epoch,
                        ))),
                    };
                    let docs = StepDocs::Epoch {
                        index: &inner.index,
                        perm,
                        first_doc: &inner.first_doc,
                    };
                    walk_step(docs, cursor.doc, sizes, inner.world, inner.rank)
                }
            };
            if let Some(walk) = fits {
                return Ok(Located {
                    start: cursor,
                    walk,
                });
            }
            // The partial step is dropped: the next shard's first document, or the next
            // epoch's first.
            cursor = match inner.order {
                DocOrder::Sequential if cursor.shard + 1 < shards => Cursor {
                    epoch: cursor.epoch,
                    shard: cursor.shard + 1,
                    doc: 0,
                },
                _ => Cursor {
                    epoch: cursor.epoch + 1,
                    shard: 0,
                    doc: 0,
                },
            };
            // From inside an epoch the walk only gets shorter, so a whole epoch after
            // `from`'s without a fit means none ever fits.
            if cursor.epoch > from.epoch + 1 {
                return Err(SourceError::NoStepFits {
                    step,
                    tokens_per_batch: sizes.tokens,
                    max_seq_len: sizes.max_seq_len,
                    world_size: inner.world,
                });
            }
        }
    }
}
