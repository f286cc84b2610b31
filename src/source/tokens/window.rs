//! What a window of a token shard reads: `Window<TokenShard>`'s own methods.

use std::sync::Arc;

use super::format::ShardFormat;
use super::shard::TokenShard;
use crate::error::source::SourceError;
use crate::source::sampling::window::Window;

/// A window of tokens, the sample the sampler yields for
/// [`TokenShards`](crate::source::TokenShards): [`start`](Window::start) and
/// [`len`](Window::len) count tokens. The [`decoders`](crate::source::Tokens) read it
/// straight into the batch; these reads are for everything else.
impl Window<TokenShard> {
    /// The shard the window lies in (its [`file`](Window::file)).
    pub fn shard(&self) -> &Arc<TokenShard> {
        self.file()
    }

    /// The shard's format: the width of the tokens [`read_into`](Self::read_into) reads.
    pub fn format(&self) -> ShardFormat {
        self.file().format()
    }

    /// Bytes the window's tokens take in the file: `len × format().token_bytes()`.
    pub fn byte_len(&self) -> usize {
        self.len() * self.format().token_bytes()
    }

    /// Reads the window's tokens as the file's little-endian bytes
    /// ([`format().token_bytes()`](ShardFormat::token_bytes) per token) into the start of
    /// `out`: all of them, or the first `out.len()` bytes when `out` is shorter. Returns
    /// the bytes read. A shard that changed since it was opened is
    /// [`SourceError::Read`] (which `?` turns into a [`DecodeError`](crate::DecodeError)
    /// in a decoder of your own).
    pub fn read_into(&self, out: &mut [u8]) -> Result<usize, SourceError> {
        let n = self.byte_len().min(out.len());
        self.file().read_tokens(self.start(), &mut out[..n])?;
        Ok(n)
    }

    /// The window's tokens as the file's little-endian bytes, read into a new vector.
    pub fn read_bytes(&self) -> Result<Vec<u8>, SourceError> {
        let mut bytes = vec![0; self.byte_len()];
        self.read_into(&mut bytes)?;
        Ok(bytes)
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
