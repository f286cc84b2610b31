//! A file's content fingerprint: a 64-bit hash of its size and of bytes sampled at offsets
//! that depend on the size alone, read by position when a source opens the file. It is
//! what a checkpoint records of each file's bytes
//! ([`Fingerprint::contents`](crate::source::Fingerprint::contents)), so that a state saved
//! on one dataset is refused on another of the same file names and sizes (another
//! tokenization, other files under the same names).
//!
//! The sample, for a file of `n` bytes: the whole file when `n` is at most
//! [`SAMPLED_BYTES`] (1,280); otherwise its first KiB (a token shard's whole header) and
//! [`WORDS`] (32) eight-byte words, the `k`-th at `1024 + ⌊k · (n − 1032) / 31⌋`, so the
//! first starts right after the head and the last ends at the file's end. The hash starts
//! as `n` and takes each sampled 8-byte word `w` (little-endian, the last one zero-padded)
//! as `h = mix64((h + 0x9E3779B97F4A7C15) ^ w)` (`+` wrapping; [`mix64`]). The offsets and
//! the rule are fixed: changing either changes every fingerprint, which is a new checkpoint
//! version.
//!
//! It costs one positioned read per sampled range and one check of the file, about 1.3 KiB
//! whatever the file's size: it sees a file whose sampled bytes differ — any other
//! tokenization, other text — not a change between the samples (a rewrite of a few tokens
//! in place), which hashing every byte of a multi-terabyte dataset at each start would.

use super::source_file::SourceFile;
use crate::error::source::SourceError;
use crate::source::sampling::rng::{mix64, GAMMA};

/// The head sampled whole: a token shard's header.
const HEAD_BYTES: u64 = 1024;

/// The eight-byte words sampled after the head.
const WORDS: u64 = 32;

/// Bytes sampled from a file larger than this; a file of at most this many is sampled
/// whole.
const SAMPLED_BYTES: u64 = HEAD_BYTES + 8 * WORDS;

/// The content fingerprint of `file` as opened (see the module's header); a read that fails
/// or finds the file changed is the [`SourceError::Read`] naming it.
pub(crate) fn content_of(file: &SourceFile) -> Result<u64, SourceError> {
    let size = file.len();
    let mut sample = vec![0u8; size.min(SAMPLED_BYTES) as usize];
    if size <= SAMPLED_BYTES {
        file.read_exact_at(0, &mut sample)?;
    } else {
        let (head, words) = sample.split_at_mut(HEAD_BYTES as usize);
        let span = size - HEAD_BYTES - 8;
        let reads = std::iter::once((0, head)).chain(
            words
                .chunks_exact_mut(8)
                .zip(0..)
                .map(|(word, k)| (HEAD_BYTES + k * span / (WORDS - 1), word)),
        );
        file.read_exact_at_each(reads)?;
    }
    Ok(hash(size, &sample))
}

/// The hash of a file of `size` bytes whose sample is `sample`.
fn hash(size: u64, sample: &[u8]) -> u64 {
    sample.chunks(8).fold(size, |h, chunk| {
        let mut word = [0u8; 8];
        word[..chunk.len()].copy_from_slice(chunk);
        mix64(h.wrapping_add(GAMMA) ^ u64::from_le_bytes(word))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(bytes: &[u8]) -> u64 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.bin");
        std::fs::write(&path, bytes).unwrap();
        content_of(&SourceFile::open(&path).unwrap()).unwrap()
    }

    #[test]
    fn the_rule_is_pinned() {
        // Golden values: a change of the offsets or the hash changes every state's
        // fingerprint, which needs a new checkpoint version. The 5,000-byte file's value
        // is the module header's rule computed independently (in Python).
        assert_eq!(hash(0, &[]), 0);
        assert_eq!(hash(3, &[1, 2, 3]), mix64((3 + GAMMA) ^ 0x0003_0201));
        let big: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
        assert_eq!(content(&big), 0x4377_70b5_b608_9eea);
        assert_eq!(content(b"abc"), hash(3, b"abc"));
    }

    #[test]
    fn sampled_bytes_and_the_size_count_others_do_not() {
        let base: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
        let print = content(&base);
        // A byte of the head, of the last word, and the size all change it.
        for at in [0, 1023, base.len() - 1] {
            let mut other = base.clone();
            other[at] ^= 1;
            assert_ne!(content(&other), print, "byte {at}");
        }
        assert_ne!(content(&base[..base.len() - 1]), print);
        // A byte between two samples does not (what a sample cannot see).
        let span = base.len() as u64 - HEAD_BYTES - 8;
        let between = (HEAD_BYTES + span / (WORDS - 1) / 2) as usize;
        let mut other = base.clone();
        other[between] ^= 1;
        assert_eq!(content(&other), print);
        // Small files are sampled whole.
        let small: Vec<u8> = (0..SAMPLED_BYTES).map(|i| (i % 251) as u8).collect();
        let mut other = small.clone();
        other[700] ^= 1;
        assert_ne!(content(&small), content(&other));
    }
}
