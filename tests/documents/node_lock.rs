//! One index build per node (`DocumentsBuilder::index_cache` shared by a node's ranks):
//! processes racing to index the same shards over one cache folder scan each shard once
//! between them — the first builds under the folder's lock, the others wait and load it —
//! and a builder killed mid-build leaves no partial index and no lock held. The ranks are
//! this test binary run again (an ignored test as the child), started together by a line
//! on their standard input.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use pinring::source::{write_shard, DocOrder, Documents, TokenShards};

/// The child's environment: the cache folder, and the shards (`:`-separated).
const CACHE: &str = "PINRING_NODE_LOCK_CACHE";
const SHARDS: &str = "PINRING_NODE_LOCK_SHARDS";

/// Shards big enough that a scan outlasts the children's start (`n` of `tokens` each).
fn shards(dir: &Path, n: usize, tokens: usize) -> Vec<PathBuf> {
    (0..n)
        .map(|s| {
            let path = dir.join(format!("train_{s:03}.bin"));
            let t: Vec<u16> = (0..tokens)
                .map(|i| {
                    if i % 97 == 0 {
                        7
                    } else {
                        100 + ((i + s) % 50) as u16
                    }
                })
                .collect();
            write_shard(&path, &t).unwrap();
            path
        })
        .collect()
}

fn build(paths: &[PathBuf], cache: &Path) -> Documents {
    // Shuffled: every shard indexed at build.
    Documents::builder(TokenShards::open(paths).unwrap())
        .bos(7)
        .tokens_per_batch(64)
        .max_seq_len(64)
        .order(DocOrder::Shuffled { seed: 1 })
        .index_cache(cache)
        .build()
        .unwrap()
}

/// A rank: waits for its start line, builds the source, prints `indexed from_cache`.
#[test]
#[ignore = "a child of the tests below, run by them"]
fn node_lock_child() {
    let cache = PathBuf::from(std::env::var(CACHE).expect("run by the tests of node_lock.rs"));
    let paths: Vec<PathBuf> = std::env::var(SHARDS)
        .unwrap()
        .split(':')
        .map(PathBuf::from)
        .collect();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).unwrap();
    let stats = build(&paths, &cache).index_stats();
    println!("STATS {} {}", stats.indexed, stats.from_cache);
}

fn spawn(cache: &Path, paths: &[PathBuf]) -> Child {
    let joined: Vec<&str> = paths.iter().map(|p| p.to_str().unwrap()).collect();
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            "node_lock::node_lock_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CACHE, cache)
        .env(SHARDS, joined.join(":"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// A child's (indexed, from_cache), once it finished.
fn stats(child: Child) -> (u64, u64) {
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find_map(|l| l.split_once("STATS "))
        .unwrap_or_else(|| panic!("{text}"))
        .1;
    let mut n = line.split_whitespace().map(|v| v.parse().unwrap());
    (n.next().unwrap(), n.next().unwrap())
}

#[test]
fn ranks_of_a_node_racing_for_one_cache_scan_each_shard_once() {
    let dir = tempfile::tempdir().unwrap();
    let paths = shards(dir.path(), 3, 2_000_000);
    let cache = dir.path().join("cache");
    let mut ranks: Vec<Child> = (0..4).map(|_| spawn(&cache, &paths)).collect();
    // Every rank is started before any begins: they race.
    for r in &mut ranks {
        r.stdin.take().unwrap().write_all(b"go\n").unwrap();
    }
    let all: Vec<(u64, u64)> = ranks.into_iter().map(stats).collect();
    assert!(all.iter().all(|&(indexed, _)| indexed == 3), "{all:?}");
    let scans: u64 = all.iter().map(|&(indexed, cached)| indexed - cached).sum();
    assert_eq!(
        scans, 3,
        "each shard scanned once between the 4 ranks: {all:?}"
    );
}

#[test]
fn a_builder_killed_mid_build_leaves_no_partial_index_and_no_lock() {
    let dir = tempfile::tempdir().unwrap();
    let paths = shards(dir.path(), 2, 2_000_000);
    let cache = dir.path().join("cache");
    for _ in 0..3 {
        let mut child = spawn(&cache, &paths);
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        // Killed at once: mid-scan, mid-write or after, wherever it got to.
        child.kill().unwrap();
        child.wait().unwrap();
        // Every index file in the folder is whole: a fresh run loads each one it finds.
        let finals = std::fs::read_dir(&cache)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().into_string().unwrap())
                    .filter(|n| !n.starts_with('.'))
                    .count() as u64
            })
            .unwrap_or(0);
        let mut child = spawn(&cache, &paths);
        child.stdin.take().unwrap().write_all(b"go\n").unwrap();
        // No lock is left held (the next rank would wait forever), and what the folder
        // held was loaded, not scanned again.
        let (indexed, cached) = stats(child);
        assert_eq!(indexed, 2);
        assert_eq!(
            cached, finals,
            "{finals} whole index files, {cached} loaded"
        );
        std::fs::remove_dir_all(&cache).unwrap();
    }
}
