//! Token shards written by name into a folder: a dataset, and its twin of the same names in
//! another folder (the same tokens, or others). Shared by the source and mixture test crates
//! (each includes this file with `#[path]`).

use std::path::{Path, PathBuf};

use pinring::source::write_shard;

/// Shard `i` of `shards` written under `dir` as `names[i]`; their paths.
pub fn write_named(dir: &Path, names: &[&str], shards: &[Vec<u16>]) -> Vec<PathBuf> {
    assert_eq!(names.len(), shards.len());
    names
        .iter()
        .zip(shards)
        .map(|(name, tokens)| {
            let path = dir.join(name);
            write_shard(&path, tokens).unwrap();
            path
        })
        .collect()
}
