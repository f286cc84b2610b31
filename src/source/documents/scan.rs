//! Finding where documents start: the positions of a token shard's `bos` tokens, read
//! with positioned reads a piece at a time and searched with `memchr::memmem` (SIMD). The
//! file is checked once, after the last piece: a scan that met a read error or a change
//! is that error, and no index is made of it.

use crate::error::source::SourceError;
use crate::source::tokens::TokenShard;

/// Tokens read per chunk: 4 MiB of `u16` tokens, 8 MiB of `u32`.
const CHUNK_TOKENS: usize = 1 << 21;

/// The positions of `bos` in `shard`, increasing: every token equal to `bos`. Reads the
/// whole shard once; a shard that changed since it was opened, or a read the file system
/// failed, is the read's [`SourceError::Read`] (nothing of the scan is kept). Positions
/// are `u32`: the index refuses a file of more tokens (`BosIndex::new`).
///
/// The caller checks that the shard's format can hold `bos` (a `u16` shard never holds
/// 65536 or more: its needle would be cut to the low bytes here).
pub(super) fn bos_positions(shard: &TokenShard, bos: u32) -> Result<Vec<u32>, SourceError> {
    let width = shard.format().token_bytes();
    let needle = bos.to_le_bytes();
    let finder = memchr::memmem::Finder::new(&needle[..width]);
    let tokens = shard.len();
    let mut stage = vec![0u8; CHUNK_TOKENS.min(tokens) * width];
    let mut out = Vec::new();
    shard.read_tokens_staged(0, tokens, &mut stage, |first, bytes| {
        for at in finder.find_iter(bytes) {
            // A match across two tokens (the high byte of one, the low of the next) is
            // not a token: only aligned matches count. A piece is whole tokens, so no
            // token lies across two.
            if at % width == 0 {
                out.push((first + at / width) as u32);
            }
        }
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use crate::source::documents::scan::bos_positions;
    use crate::source::tokens::{write_shard, write_shard_u32, TokenShard};

    #[test]
    fn finds_aligned_tokens_only() {
        let dir = tempfile::tempdir().unwrap();
        // 0xC450 = 50256; [0x50, 0xC4] also straddles tokens 3 and 4 (0xC4?? after 0x??50).
        let tokens: Vec<u16> = vec![7, 50256, 1, 0x5000 | 0x50, 0x00C4, 50256, 50256];
        let path = dir.path().join("a.bin");
        write_shard(&path, &tokens).unwrap();
        let shard = TokenShard::open(&path).unwrap();
        assert_eq!(bos_positions(&shard, 50256).unwrap(), [1, 5, 6]);
        assert_eq!(bos_positions(&shard, 9).unwrap(), Vec::<u32>::new());

        let tokens: Vec<u32> = vec![128000, 5, 128000 << 8, 0, 128000];
        let path = dir.path().join("b.bin");
        write_shard_u32(&path, &tokens).unwrap();
        let shard = TokenShard::open(&path).unwrap();
        assert_eq!(bos_positions(&shard, 128000).unwrap(), [0, 4]);
    }
}
