//! [`PieceLists`]: the lists a mixture's steps keep their pieces in, recycled.

use super::mixed_piece::MixedPiece;
use crate::sync::native::Mutex;

/// Lists of pieces, recycled: a step takes one, its drop gives it back. Holds at most
/// [`KEPT`] spare lists, each with room for a step's `max_docs` pieces.
pub(crate) struct PieceLists {
    spare: Mutex<Vec<Vec<MixedPiece>>>,
    /// Pieces a list has room for: the most a step of the run keeps.
    room: usize,
}

/// Spare lists kept: more than the steps a pipeline holds at once (its host slots, the
/// feeder's and the decode pool's in flight).
const KEPT: usize = 64;

impl PieceLists {
    /// Lists with room for `max_docs` pieces (a rank packs at most `max_docs - 1`).
    pub(crate) fn new(max_docs: u64) -> Self {
        PieceLists {
            spare: Mutex::new(Vec::new()),
            room: usize::try_from(max_docs).unwrap_or(usize::MAX).min(1 << 20),
        }
    }

    /// The most pieces a list keeps.
    pub(crate) fn room(&self) -> usize {
        self.room
    }

    /// An empty list: a spare one, or a new one.
    pub(crate) fn take(&self) -> Vec<MixedPiece> {
        let spare = self.spare.lock().unwrap_or_else(|e| e.into_inner()).pop();
        spare.unwrap_or_else(|| Vec::with_capacity(self.room))
    }

    /// Takes `list` back, emptied, unless enough are spare.
    pub(crate) fn give_back(&self, mut list: Vec<MixedPiece>) {
        if list.capacity() == 0 {
            return;
        }
        list.clear();
        let mut spare = self.spare.lock().unwrap_or_else(|e| e.into_inner());
        if spare.len() < KEPT {
            spare.push(list);
        }
    }
}
