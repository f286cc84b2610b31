//! Opening token shards: what a run's start costs for the shards of a folder — each shard's
//! header check and its content fingerprint (its first KiB and 32 eight-byte words spread
//! to its end, read by position: what a checkpoint records and checks on resume) — beside
//! reading the 12 header bytes alone (the reads an open made before the fingerprint).
//!
//! ```text
//! # Write 100 shards of 100M tokens (200 MB each, 20 GB) into DIR, then time:
//! cargo bench -p pinring-benches --bench open -- DIR --write 100 100000000
//! # Time the shards already in DIR (DIR/*.bin):
//! cargo bench -p pinring-benches --bench open -- DIR [open|header]
//! ```
//!
//! Each run prints its first pass (cold when the page cache was dropped just before, as
//! root: `sync; echo 3 > /proc/sys/vm/drop_caches`) and the median of five warm passes,
//! in ms for all shards and µs per shard. `open` is `TokenShards::glob(DIR/*.bin)`;
//! `header` opens each file and reads its first 12 bytes. Measure each cold in a run of its
//! own, the cache dropped before each. The shards written are of distinct tokens (shard
//! `i`'s token `j` is `(i · 7919 + j) mod 50257`).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::Instant;

use pinring::source::TokenShards;
use pinring_benches::{median, write_tokens};

const REPEATS: usize = 5;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let Some(dir) = args.first().map(PathBuf::from) else {
        eprintln!("usage: open DIR [open|header] | open DIR --write COUNT TOKENS");
        std::process::exit(2);
    };
    let mode = args.get(1).map_or("open", String::as_str);
    if mode == "--write" {
        let count: usize = args.get(2).and_then(|a| a.parse().ok()).expect("COUNT");
        let tokens: u64 = args.get(3).and_then(|a| a.parse().ok()).expect("TOKENS");
        write(&dir, count, tokens);
        return;
    }
    let pattern = dir.join("*.bin");
    let paths = shard_paths(&dir);
    assert!(!paths.is_empty(), "no *.bin in {}", dir.display());
    let pass = || -> f64 {
        let t = Instant::now();
        match mode {
            "open" => {
                black_box(TokenShards::glob(&pattern).expect("open the shards"));
            }
            "header" => {
                for p in &paths {
                    black_box(header(p));
                }
            }
            other => panic!("unknown mode {other:?}: open or header"),
        }
        t.elapsed().as_secs_f64() * 1e3
    };
    let first = pass();
    let mut warm: Vec<f64> = (0..REPEATS).map(|_| pass()).collect();
    let warm = median(&mut warm);
    let n = paths.len() as f64;
    println!(
        "{mode:>6}: {} shards, first pass {first:.2} ms ({:.1} µs a shard), warm median of \
         {REPEATS} {warm:.2} ms ({:.1} µs a shard)",
        paths.len(),
        first * 1e3 / n,
        warm * 1e3 / n
    );
}

/// The `*.bin` files in `dir`, sorted.
fn shard_paths(dir: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read the folder")
        .map(|e| e.expect("a folder entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin"))
        .collect();
    paths.sort();
    paths
}

/// The first 12 bytes of the file at `path` (magic, version, token count).
fn header(path: &Path) -> [u8; 12] {
    let mut bytes = [0u8; 12];
    let file = std::fs::File::open(path).expect("open");
    std::os::unix::fs::FileExt::read_exact_at(&file, &mut bytes, 0).expect("read the header");
    bytes
}

/// Writes `count` shards of `tokens` tokens into `dir` (`shard_000.bin`, ...).
fn write(dir: &Path, count: usize, tokens: u64) {
    std::fs::create_dir_all(dir).expect("create the folder");
    let t = Instant::now();
    for i in 0..count as u64 {
        let path = dir.join(format!("shard_{i:03}.bin"));
        write_tokens(&path, tokens, |j| ((i * 7919 + j) % 50257) as u16);
    }
    println!(
        "wrote {count} shards of {tokens} tokens into {} in {:.1} s",
        dir.display(),
        t.elapsed().as_secs_f64()
    );
}
