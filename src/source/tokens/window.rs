//! What a window of a token file is beside every window's reads: `Window<TokenShard>`'s
//! own methods.

use std::sync::Arc;

use super::format::ShardFormat;
use super::shard::TokenShard;
use crate::error::source::SourceError;
use crate::source::sampling::window::Window;

/// A window of tokens, the sample the sampler yields for
/// [`TokenShards`](crate::source::TokenShards): [`start`](Window::start) and
/// [`len`](Window::len) count tokens, and [`read_into`](Window::read_into) and
/// [`read_bytes`](Window::read_bytes) read their little-endian bytes. The
/// [`decoders`](crate::source::Tokens) read it straight into the batch; these reads are
/// for everything else.
impl Window<TokenShard> {
    /// The shard the window lies in (its [`file`](Window::file)).
    pub fn shard(&self) -> &Arc<TokenShard> {
        self.file()
    }

    /// The shard's format: the width of the tokens [`read_into`](Window::read_into) reads
    /// (little-endian, [`format().token_bytes()`](ShardFormat::token_bytes) each).
    pub fn format(&self) -> ShardFormat {
        self.file().format()
    }

    /// The window's tokens, read into a new vector as `u32` whichever the shard's width.
    pub fn to_vec(&self) -> Result<Vec<u32>, SourceError> {
        let width = self.format().token_bytes();
        let bytes = self.read_bytes()?;
        Ok(bytes
            .chunks_exact(width)
            .map(|b| {
                let mut t = [0u8; 4];
                t[..width].copy_from_slice(b);
                u32::from_le_bytes(t)
            })
            .collect())
    }
}
