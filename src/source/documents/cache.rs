//! [`IndexCache`]: shards' indexes kept across runs, in a folder the user names
//! ([`DocumentsBuilder::index_cache`](crate::source::DocumentsBuilder::index_cache)), so that
//! a run does not scan again the shards an earlier run scanned (a shuffled run scans them
//! all at build).
//!
//! An index is used only if everything checks: the file is this crate's (magic and
//! version), was made for this shard — its canonical path, its size and modification time
//! as the open shard has them — and this `bos` and token width, holds increasing positions
//! inside the shard, and its checksum (FNV-1a over the whole file) holds; and a sample of
//! its positions (the first, the last and 14 between) are `bos` tokens in the shard as it
//! is now. Anything else and the shard is scanned as if there were no cache, and the index
//! written anew. What the checks cannot see is what the loader's changed-file check cannot
//! see either: a rewrite of the shard that keeps its size and modification time and moves
//! no sampled document start.
//!
//! Writes are atomic: the index goes to a temporary file in the folder, flushed to disk
//! (`fsync`) and renamed over the final name once complete (the folder then flushed too),
//! so a reader (another rank, another run) sees a whole index or none, also after a crash
//! or a kill mid-build: what is left then is a temporary file no reader opens.
//!
//! One build per node: a shard's index is built under an exclusive lock on a lock file
//! beside it (`.NAME.lock`, an OS file lock, released by the OS when its holder dies), so
//! that of the ranks of a node sharing the folder the first builds and writes it while the
//! others wait on the lock, then load what it wrote ([`IndexCache::load_or_build`]). A
//! cache that cannot be read, written or locked is no error: the shard is scanned.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use crate::source::tokens::TokenShard;

/// The first bytes of an index file.
const MAGIC: &[u8; 8] = b"PINRBOS\0";
/// The layout's version: up by one whenever the layout or the meaning of a field changes,
/// or indexes of earlier versions cannot be trusted. 2: an index of version 1 may have
/// been built from a read that met a page the file system lost (read through a map, such a
/// page read as zeros, documents merged), so none is used.
const VERSION: u32 = 2;
/// Positions checked against the shard when an index is loaded.
const SAMPLES: usize = 16;

/// A folder of shard indexes.
#[derive(Debug, Clone)]
pub(super) struct IndexCache {
    dir: PathBuf,
}

/// What an index file is checked against: the shard as it was opened, and the `bos`.
#[derive(Debug, PartialEq, Eq)]
struct Key {
    path: String,
    size: u64,
    secs: u64,
    nanos: u32,
    bos: u32,
    width: u32,
}

impl Key {
    /// The key of `shard` for `bos`; `None` when the shard has no modification time or
    /// canonical path to check against (then nothing is cached for it).
    fn of(shard: &TokenShard, bos: u32) -> Option<Self> {
        let since = shard.modified()?.duration_since(UNIX_EPOCH).ok()?;
        let path = std::fs::canonicalize(shard.path()).ok()?;
        Some(Key {
            path: path.to_str()?.to_owned(),
            size: shard.file_bytes(),
            secs: since.as_secs(),
            nanos: since.subsec_nanos(),
            bos,
            width: shard.format().token_bytes() as u32,
        })
    }

    /// The index file's name: the shard's file name, a hash of its canonical path (shards
    /// of one name in two folders do not share a file) and the bos.
    fn file_name(&self) -> String {
        let name = Path::new(&self.path)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("shard");
        format!(
            "{name}.{:016x}.bos{}.index",
            fnv1a(self.path.as_bytes()),
            self.bos
        )
    }

    fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(self.path.len() as u32).to_le_bytes());
        out.extend_from_slice(self.path.as_bytes());
        out.extend_from_slice(&self.size.to_le_bytes());
        out.extend_from_slice(&self.secs.to_le_bytes());
        out.extend_from_slice(&self.nanos.to_le_bytes());
        out.extend_from_slice(&self.bos.to_le_bytes());
        out.extend_from_slice(&self.width.to_le_bytes());
    }
}

impl IndexCache {
    pub(super) fn new(dir: PathBuf) -> Self {
        IndexCache { dir }
    }

    /// `shard`'s index for `bos`, if the folder holds one that passes every check.
    pub(super) fn load(&self, shard: &TokenShard, bos: u32) -> Option<Vec<u32>> {
        let key = Key::of(shard, bos)?;
        let bytes = std::fs::read(self.dir.join(key.file_name())).ok()?;
        let positions = decode(&key, &bytes, shard.len() as u64)?;
        sampled_are_bos(shard, bos, &positions).then_some(positions)
    }

    /// `shard`'s index for `bos` from the folder, or built by `build` and stored, under
    /// the folder's lock for it: of the processes that share the folder (a node's ranks)
    /// one builds while the others wait, then load its index. The positions, and whether
    /// they came from the folder. Without a lock to take (a folder that cannot be made or
    /// written), `build` runs unlocked.
    pub(super) fn load_or_build<E>(
        &self,
        shard: &TokenShard,
        bos: u32,
        build: impl FnOnce() -> Result<Vec<u32>, E>,
    ) -> Result<(Vec<u32>, bool), E> {
        if let Some(positions) = self.load(shard, bos) {
            return Ok((positions, true));
        }
        let lock = Key::of(shard, bos).and_then(|key| self.lock(&key));
        if lock.is_some() {
            // Another process may have built it while this one waited.
            if let Some(positions) = self.load(shard, bos) {
                return Ok((positions, true));
            }
        }
        let positions = build()?;
        self.store(shard, bos, &positions);
        drop(lock);
        Ok((positions, false))
    }

    /// The exclusive lock on `key`'s lock file, waited for; `None` when the folder holds
    /// none (it cannot be made or written, or the file system has no locks).
    fn lock(&self, key: &Key) -> Option<File> {
        std::fs::create_dir_all(&self.dir).ok()?;
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(self.dir.join(format!(".{}.lock", key.file_name())))
            .ok()?;
        file.lock().ok()?;
        Some(file)
    }

    /// Removes `shard`'s index for `bos` from the folder (found wrong for the shard as it
    /// is now), so that the next build scans the shard; the file it was, if there was one.
    pub(super) fn forget(&self, shard: &TokenShard, bos: u32) -> Option<PathBuf> {
        let path = self.dir.join(Key::of(shard, bos)?.file_name());
        std::fs::remove_file(&path).ok()?;
        Some(path)
    }

    /// Keeps `shard`'s index for `bos`: written to a temporary file renamed into place.
    /// Nothing happens when the folder cannot be written (the next run scans again).
    pub(super) fn store(&self, shard: &TokenShard, bos: u32, positions: &[u32]) {
        let Some(key) = Key::of(shard, bos) else {
            return;
        };
        let mut bytes = Vec::with_capacity(64 + key.path.len() + 4 * positions.len());
        key.encode(&mut bytes);
        bytes.extend_from_slice(&(positions.len() as u64).to_le_bytes());
        for p in positions {
            bytes.extend_from_slice(&p.to_le_bytes());
        }
        let sum = fnv1a(&bytes);
        bytes.extend_from_slice(&sum.to_le_bytes());
        let name = key.file_name();
        let tmp = self.dir.join(format!(
            ".{name}.{}.{}.tmp",
            std::process::id(),
            fnv1a(&sum.to_le_bytes()) ^ u64::from(key.nanos)
        ));
        let written = std::fs::create_dir_all(&self.dir)
            .and_then(|()| File::create(&tmp))
            .and_then(|mut f| f.write_all(&bytes).and_then(|()| f.sync_all()))
            .and_then(|()| std::fs::rename(&tmp, self.dir.join(&name)));
        match written {
            // The rename on disk too (where a folder can be opened to be flushed).
            Ok(()) => {
                let _ = File::open(&self.dir).and_then(|d| d.sync_all());
            }
            Err(_) => {
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }
}

/// The positions of an index file's `bytes`, if it was made for `key` and holds together:
/// its checksum, its length, increasing positions below `tokens`.
fn decode(key: &Key, bytes: &[u8], tokens: u64) -> Option<Vec<u32>> {
    let (body, sum) = bytes.split_at_checked(bytes.len().checked_sub(8)?)?;
    if fnv1a(body) != u64::from_le_bytes(sum.try_into().ok()?) {
        return None;
    }
    let mut want = Vec::new();
    key.encode(&mut want);
    let rest = body.strip_prefix(want.as_slice())?;
    let (count, rest) = rest.split_at_checked(8)?;
    let count = u64::from_le_bytes(count.try_into().ok()?);
    if count == 0 || rest.len() as u64 != count.checked_mul(4)? {
        return None;
    }
    let positions: Vec<u32> = rest
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let increasing = positions.windows(2).all(|w| w[0] < w[1]);
    let inside = positions.last().is_some_and(|&p| u64::from(p) < tokens);
    (increasing && inside).then_some(positions)
}

/// Whether the first, the last and evenly spaced positions between are `bos` tokens of
/// the shard as it is now.
fn sampled_are_bos(shard: &TokenShard, bos: u32, positions: &[u32]) -> bool {
    let n = positions.len();
    (0..SAMPLES.min(n))
        .map(|k| if SAMPLES >= n { k } else { k * (n - 1) / (SAMPLES - 1) })
        .all(|i| matches!(shard.token(positions[i] as usize), Ok(Some(t)) if t == bos))
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
