//! The document walk within one shard (sequential order) or one epoch (shuffled order):
//! which documents, and which part of each, every rank packs into a step, as
//! modded-nanogpt's `distributed_data_generator(align_to_bos=True)` takes them.
//!
//! A document starts at a `bos` token and runs to the next one (or the shard's end). A
//! step hands documents to ranks in rank order: rank `r` takes documents until it holds
//! `N + 1` tokens, cutting each at `max_seq_len` and its last one to fill exactly `N + 1`;
//! what a cut leaves of a document is dropped (the next rank starts at the next document).
//! When the documents run out before every rank is full, the step does not fit: the
//! caller ([`Walker`](super::walker::Walker)) drops that partial step and tries the next
//! shard, or epoch.
//!
//! Everything here is a pure function of the index, the step's sizes and the world size,
//! and allocates nothing: the decoder walks a rank's pieces again from where its pieces
//! start ([`RankPieces`]), so a step's descriptor carries a few numbers, never a list.

use super::fill::Fill;
use super::index::BosIndex;
use super::permutation::Permutation;
use super::schedule::StepSizes;

/// Where the walk stands: before document `doc` of `shard` in `epoch` (sequential order),
/// or before position `doc` of `epoch`'s permutation (shuffled order, `shard` 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, PartialOrd, Ord)]
pub struct Cursor {
    /// The epoch, from 0.
    pub epoch: u64,
    /// The shard (sequential order; 0 in shuffled order).
    pub shard: u64,
    /// The document within the shard (sequential order), or the position in the epoch's
    /// permutation (shuffled order).
    pub doc: u64,
}

/// One piece of a step: a document, or the part of it the step keeps (its first `len`
/// tokens).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Piece {
    /// The document's id: the global offset of its `bos` token over the shards' tokens in
    /// order (shard `s`'s first token is at the sum of the tokens of the shards before
    /// it). The same whatever the order, seed, rank and world size.
    pub doc: u64,
    /// The shard it lies in.
    pub shard: usize,
    /// Its first token in the shard (the `bos`).
    pub start: u64,
    /// Tokens of it the step keeps: at most `max_seq_len`, and the rank's last piece is
    /// cut to fill exactly `N + 1` tokens.
    pub len: u64,
}

/// One document: its shard, first token (the `bos`), the token after its end (the next
/// `bos`, or the shard's end) and id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extent {
    pub(crate) shard: usize,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) id: u64,
}

impl Extent {
    /// Its tokens (at least 1: its `bos`).
    pub(crate) fn tokens(&self) -> u64 {
        self.end - self.start
    }

    /// The piece of it that keeps its first `len` tokens.
    pub(crate) fn piece(&self, len: u64) -> Piece {
        Piece {
            doc: self.id,
            shard: self.shard,
            start: self.start,
            len,
        }
    }
}

/// The documents a step is walked over: one shard's, in order (sequential), or one
/// epoch's, permuted (shuffled). Indexed from 0; a cursor's `doc` counts in it.
#[derive(Debug, Clone, Copy)]
pub(super) enum StepDocs<'a> {
    /// Shard `shard`'s documents, whose starts are `bos`.
    Shard {
        index: &'a BosIndex,
        shard: usize,
        bos: &'a [u32],
    },
    /// Every document of every shard, in `perm`'s order; document `j` of shard `s` is
    /// dense number `first_doc[s] + j`. Every shard is indexed.
    Epoch {
        index: &'a BosIndex,
        perm: &'a Permutation,
        first_doc: &'a [u64],
    },
}

impl StepDocs<'_> {
    /// Document `i`, or `None` past the last.
    fn doc(&self, i: u64) -> Option<Extent> {
        match *self {
            StepDocs::Shard { index, shard, bos } => extent(index, shard, bos, i),
            StepDocs::Epoch {
                index,
                perm,
                first_doc,
            } => {
                let dense = perm.get(i)?;
                let s = first_doc.partition_point(|&c| c <= dense).checked_sub(1)?;
                extent(index, s, index.get(s)?, dense - first_doc[s])
            }
        }
    }
}

/// Document `j` of shard `s` (whose `bos` positions are `bos`).
pub(super) fn extent(index: &BosIndex, s: usize, bos: &[u32], j: u64) -> Option<Extent> {
    let j = usize::try_from(j).ok()?;
    let start = u64::from(*bos.get(j)?);
    let end = bos
        .get(j + 1)
        .map_or_else(|| index.tokens(s), |&b| u64::from(b));
    Some(Extent {
        shard: s,
        start,
        end,
        id: index.first_token(s) + start,
    })
}

/// The pieces one rank packs into a step, walked from the document where they start: an
/// iterator that allocates nothing. After it ends, [`ran_out`](Self::ran_out) says whether
/// the documents ran out first (the step does not fit) and [`next_doc`](Self::next_doc)
/// where the next rank starts.
#[derive(Debug, Clone)]
pub(super) struct RankPieces<'a> {
    docs: StepDocs<'a>,
    /// The next document.
    at: u64,
    /// The rank's share of the step, as filled so far.
    fill: Fill,
    ran_out: bool,
}

impl<'a> RankPieces<'a> {
    /// The pieces of a rank that starts at document `from` of `docs`.
    pub(super) fn new(docs: StepDocs<'a>, from: u64, sizes: StepSizes) -> Self {
        RankPieces {
            docs,
            at: from,
            fill: Fill::new(sizes),
            ran_out: false,
        }
    }

    /// Whether the documents ran out before the rank held `N + 1` tokens.
    pub(super) fn ran_out(&self) -> bool {
        self.ran_out
    }

    /// The document after the last one walked: where the next rank starts.
    pub(super) fn next_doc(&self) -> u64 {
        self.at
    }
}

impl Iterator for RankPieces<'_> {
    type Item = Piece;

    fn next(&mut self) -> Option<Piece> {
        if self.fill.is_full() || self.ran_out {
            return None;
        }
        let Some(d) = self.docs.doc(self.at) else {
            self.ran_out = true;
            return None;
        };
        self.at += 1;
        Some(d.piece(self.fill.take(d.tokens())))
    }
}

/// A whole step walked for every rank, as far as one rank needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct StepWalk {
    /// Where `rank`'s pieces start.
    pub(super) rank_doc: u64,
    /// How many pieces `rank` packs.
    pub(super) rank_pieces: u64,
    /// The most pieces any rank packs, and the first rank that packs that many.
    pub(super) most_pieces: (u64, u64),
    /// The document after the step.
    pub(super) after: u64,
}

/// Walks one step of `sizes` for `world` ranks from document `from` of `docs`, for
/// `rank`; `None` when the documents run out before every rank is full.
pub(super) fn walk_step(
    docs: StepDocs<'_>,
    from: u64,
    sizes: StepSizes,
    world: u64,
    rank: u64,
) -> Option<StepWalk> {
    let mut at = from;
    let mut out = StepWalk {
        rank_doc: from,
        rank_pieces: 0,
        most_pieces: (0, 0),
        after: from,
    };
    for r in 0..world {
        let mut pieces = RankPieces::new(docs, at, sizes);
        let count = pieces.by_ref().count() as u64;
        if pieces.ran_out() {
            return None;
        }
        if r == rank {
            out.rank_doc = at;
            out.rank_pieces = count;
        }
        if count > out.most_pieces.0 {
            out.most_pieces = (count, r);
        }
        at = pieces.next_doc();
    }
    out.after = at;
    Some(out)
}
