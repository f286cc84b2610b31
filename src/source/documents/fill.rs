//! [`Fill`]: the packing rule of one rank's share of a step, whatever stream the documents
//! come from — a shard's or an epoch's documents ([`RankPieces`](super::walk::RankPieces)),
//! or a mixture's documents, one source after another as its blend picks them.

use super::schedule::StepSizes;

/// One rank filling its share of a step: it takes documents in order until it holds
/// `N + 1` tokens, each document cut at `max_seq_len` and the last one cut to fill exactly
/// `N + 1` — modded-nanogpt's `align_to_bos` packing. What a cut leaves of a document is
/// dropped (the next rank, or step, starts at the next document).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fill {
    sizes: StepSizes,
    /// Tokens taken so far.
    filled: u64,
}

impl Fill {
    /// An empty share of a step of `sizes`.
    pub(crate) fn new(sizes: StepSizes) -> Self {
        Fill { sizes, filled: 0 }
    }

    /// Whether the share holds its `N + 1` tokens (it takes no more).
    pub(crate) fn is_full(&self) -> bool {
        self.filled > self.sizes.tokens
    }

    /// Takes the next document, of `tokens` tokens (at least 1: its `bos`): the length of
    /// the piece of it the share keeps — at most `max_seq_len`, and what fills `N + 1`.
    /// Call it only while the share [`is_full`](Self::is_full) is false.
    pub(crate) fn take(&mut self, tokens: u64) -> u64 {
        let room = self.sizes.tokens - self.filled + 1;
        let len = tokens.min(self.sizes.max_seq_len).min(room);
        self.filled += len;
        len
    }
}

#[cfg(test)]
mod tests {
    use crate::source::documents::fill::Fill;
    use crate::source::documents::schedule::StepSizes;

    #[test]
    fn cuts_at_max_seq_len_and_fills_exactly() {
        let sizes = StepSizes {
            tokens: 10,
            max_seq_len: 4,
            max_docs: 8,
        };
        let mut fill = Fill::new(sizes);
        let taken: Vec<u64> = [9, 2, 3, 100]
            .into_iter()
            .map(|t| fill.take(t))
            .collect();
        // 4 (cut at max_seq_len) + 2 + 3 + 2 (what fills 11).
        assert_eq!(taken, [4, 2, 3, 2]);
        assert!(fill.is_full());
    }
}
