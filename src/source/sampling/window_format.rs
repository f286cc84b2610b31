//! [`WindowFormat`]: a [`Segmented`] set that says how its windows decode, what a format
//! of token windows or records implements to be a source (`as_source.rs` writes the
//! rest once).

use super::segmented::Segmented;
use crate::decode::Decode;

/// A [`Segmented`] set whose windows a loader can decode: what its windows decode with
/// and how many bytes a window of `window` units takes in the batch. Token shards decode
/// to their [`decoded_as`](crate::source::TokenShards::decoded_as) type; records are
/// copied as they are.
pub trait WindowFormat: Segmented + Clone {
    /// The decoder of its windows.
    type Decoder: Decode<Sample = Self::Window> + Clone;

    /// Its decoder.
    fn window_decoder(&self) -> Self::Decoder;

    /// Bytes a decoded window of `window` units takes.
    fn sample_bytes(&self, window: u64) -> usize;
}
