//! What the proptest twins of the fuzz targets share (`tests/prop_*.rs`, each of which
//! includes this file with `#[path]`): the deterministic bytes their reach checks feed the
//! property, the count each outcome must reach, and the fuzz target's checked-in seeds.
#![allow(dead_code)] // each includer uses its own part

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::path::PathBuf;

/// Deterministic pseudo-random bytes (xorshift64): the same inputs on every run.
pub struct XorShift(pub u64);

impl XorShift {
    /// The next byte (the low byte of the next state).
    pub fn byte(&mut self) -> u8 {
        let x = &mut self.0;
        *x ^= *x << 13;
        *x ^= *x >> 7;
        *x ^= *x << 17;
        *x as u8
    }

    /// The next `n` bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.byte()).collect()
    }
}

/// Runs `reach` `runs` times on the deterministic bytes of `seed` (it draws the input it
/// checks from them and returns the outcome), and panics unless each outcome was reached
/// at least as many times as its row of `least` says.
pub fn assert_each_reached<K: Hash + Eq + Debug>(
    seed: u64,
    runs: usize,
    mut reach: impl FnMut(&mut XorShift) -> K,
    least: &[(K, usize)],
) {
    let mut bytes = XorShift(seed);
    let mut counts = HashMap::new();
    for _ in 0..runs {
        *counts.entry(reach(&mut bytes)).or_insert(0) += 1;
    }
    for (outcome, least) in least {
        assert!(
            counts.get(outcome).copied().unwrap_or(0) >= *least,
            "{counts:?}"
        );
    }
}

/// Each checked-in seed of the fuzz target `target` (`fuzz/corpus/<target>/`): its path
/// and its bytes.
pub fn seeds(target: &str) -> impl Iterator<Item = (PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/fuzz/corpus")).join(target);
    std::fs::read_dir(dir).unwrap().map(|entry| {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        (path, data)
    })
}
