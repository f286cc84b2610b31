//! [`MixedPiece`]: a piece of a document in a step of a mixture of packed documents, and the
//! source it comes from.

use crate::source::documents::walk::Piece;

/// A piece of a document in a mixture's step: the source it comes from (its index in the
/// mixture) and the piece (its `doc` is the document's id within that source, its `shard`
/// that source's shard).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct MixedPiece {
    /// The source's index in the mixture.
    pub source: u16,
    /// The piece, in that source's terms.
    pub piece: Piece,
}
