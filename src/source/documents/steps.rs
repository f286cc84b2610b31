//! [`Steps`]: a rank's steps, in order, from the start or a checkpoint; endless (epoch
//! after epoch). Each is a [`DocStep`]: the iterator locates the step (dropping the partial
//! steps the walk drops), checks that this step's `cu_seqlens` holds every rank's pieces,
//! and moves on; the decoder does the rest.

use std::fmt;
use std::sync::Arc;

use super::inner::Inner;
use super::index::BuiltBy;
use super::permutation::Permutation;
use super::step::DocStep;
use super::walk::Cursor;
use super::walker::Walker;
use crate::error::source::SourceError;

/// The steps of one rank of a [`Documents`](crate::source::Documents) source, in order:
/// what a [`Pipeline`](crate::Pipeline) pulls (one step a batch). Endless, epoch after
/// epoch, unless a step cannot be made: that step carries its error (the decoder returns
/// it, so `pop` reports it after the steps before it) and the iterator ends.
///
/// Each step is found by walking the shards' indexes; a shard not indexed yet by the
/// thread ahead of the walk is indexed here (the step waits:
/// [`IndexStats::on_walk`](crate::source::IndexStats::on_walk) counts it).
pub struct Steps {
    inner: Arc<Inner>,
    /// Where the walk stands: after the last step yielded.
    cursor: Cursor,
    /// The next step's number.
    step: u64,
    /// The permutation of the cursor's epoch, once made (shuffled order).
    perm: Option<Arc<Permutation>>,
    done: bool,
}

impl fmt::Debug for Steps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Steps")
            .field("cursor", &self.cursor)
            .field("step", &self.step)
            .field("done", &self.done)
            .finish()
    }
}

impl Steps {
    pub(super) fn new(
        inner: Arc<Inner>,
        cursor: Cursor,
        step: u64,
        perm: Option<Arc<Permutation>>,
    ) -> Self {
        Steps {
            inner,
            cursor,
            step,
            perm,
            done: false,
        }
    }

    /// The next step's number.
    pub fn next_step(&self) -> u64 {
        self.step
    }

    /// Where the walk stands: after the last step yielded.
    pub fn cursor(&self) -> Cursor {
        self.cursor
    }
}

impl Iterator for Steps {
    type Item = DocStep;

    fn next(&mut self) -> Option<DocStep> {
        if self.done {
            return None;
        }
        let step = self.step;
        let sizes = self.inner.schedule.at(step);
        let mut walker = Walker::new(&self.inner, BuiltBy::Walk, self.perm.take());
        let located = walker.locate(self.cursor, step);
        self.perm = walker.into_perm();
        let outcome = located.and_then(|located| {
            let (needed, rank) = located.walk.most_pieces;
            if needed > sizes.max_docs.saturating_sub(1) {
                Err(SourceError::TooManyDocuments {
                    step,
                    rank,
                    needed,
                    max_docs: sizes.max_docs,
                })
            } else {
                Ok(located)
            }
        });
        let epoch = match &outcome {
            Ok(located) => located.start.epoch,
            Err(_) => self.cursor.epoch,
        };
        match &outcome {
            Ok(located) => {
                self.cursor = located.after();
                self.step += 1;
            }
            Err(_) => self.done = true,
        }
        Some(DocStep {
            inner: self.inner.clone(),
            step,
            epoch,
            sizes,
            outcome: outcome.map_err(Box::new),
            perm: self.perm.clone(),
        })
    }

    /// At least one more step until a step fails (then that failed step), no upper bound:
    /// the steps are endless, but may end at a failure, so `collect` must not reserve for
    /// an endless run.
    fn size_hint(&self) -> (usize, Option<usize>) {
        if self.done {
            (0, Some(0))
        } else {
            (1, None)
        }
    }
}
