//! What the source tests share: tokens and raw shard files, opened sources, the errors'
//! problems, and draining pipelines.

use std::path::{Path, PathBuf};

use pinring::source::{
    write_shard, FileProblem, NextToken, ShardProblem, Source, SplitMix64, TokenShard, TokenShards,
    TokenType, Tokens, Window,
};
use pinring::{Config, Decode, Error, Fence, Loader, Pipeline};
use tempfile::TempDir;

/// `u16` tokens as the `u32` a window reads them as.
pub fn widened(tokens: &[u16]) -> Vec<u32> {
    tokens.iter().map(|&t| u32::from(t)).collect()
}

pub fn random_tokens(n: usize, seed: u64) -> Vec<u16> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| rng.below(50257) as u16).collect()
}

/// A raw shard file: the header words given, then `tokens`, then `extra` bytes.
pub fn raw_shard(path: &Path, header: [i32; 3], tokens: &[u16], extra: &[u8]) {
    raw_shard_of(
        path,
        header,
        tokens.iter().flat_map(|t| t.to_le_bytes()),
        extra,
    );
}

/// A raw shard file of `u32` tokens: the header words given, then `tokens`, then `extra`.
pub fn raw_shard_u32(path: &Path, header: [i32; 3], tokens: &[u32], extra: &[u8]) {
    raw_shard_of(
        path,
        header,
        tokens.iter().flat_map(|t| t.to_le_bytes()),
        extra,
    );
}

/// A raw shard file: a 1,024-byte header of the words given, then `token_bytes`, then
/// `extra`.
fn raw_shard_of(
    path: &Path,
    header: [i32; 3],
    token_bytes: impl Iterator<Item = u8>,
    extra: &[u8],
) {
    let mut bytes = vec![0u8; 1024];
    for (i, w) in header.iter().enumerate() {
        bytes[i * 4..i * 4 + 4].copy_from_slice(&w.to_le_bytes());
    }
    bytes.extend(token_bytes);
    bytes.extend_from_slice(extra);
    std::fs::write(path, bytes).unwrap();
}

/// Random `u32` tokens over a LLaMA-3-sized vocabulary (most above `u16::MAX`).
pub fn random_tokens_u32(n: usize, seed: u64) -> Vec<u32> {
    let mut rng = SplitMix64::new(seed);
    (0..n).map(|_| rng.below(128_256) as u32).collect()
}

/// Shards of these lengths, tokens random; returns the source and the tokens written.
pub fn shards(dir: &TempDir, lens: &[usize]) -> (TokenShards, Vec<Vec<u16>>) {
    let mut written = Vec::new();
    let mut paths = Vec::new();
    for (i, &n) in lens.iter().enumerate() {
        let tokens = random_tokens(n, i as u64 + 100);
        let path = dir.path().join(format!("shard_{i:03}.bin"));
        write_shard(&path, &tokens).unwrap();
        written.push(tokens);
        paths.push(path);
    }
    (TokenShards::open(&paths).unwrap(), written)
}

/// A window as (shard path, start, len): comparable across samplers.
pub fn key(w: &Window<TokenShard>) -> (PathBuf, usize, usize) {
    (w.shard().path().to_owned(), w.start(), w.len())
}

pub fn file_problem(err: &Error) -> &FileProblem {
    match err {
        Error::Source(e) => e
            .file_problem()
            .unwrap_or_else(|| panic!("not a file error: {e}")),
        other => panic!("not a source error: {other}"),
    }
}

/// The shard problem of a token shard that does not open.
pub fn shard_problem(problem: &FileProblem) -> Option<&ShardProblem> {
    problem.format_problem::<ShardProblem>()
}

pub fn open_err(path: &Path) -> Error {
    TokenShard::open(path).expect_err("a malformed shard must not open")
}

/// Bytes of every batch a pipeline delivers.
pub fn drain(pipeline: &mut Pipeline, batches: Option<usize>, out: &mut Vec<Vec<u8>>) -> usize {
    let mut n = 0;
    while batches.is_none_or(|b| n < b) {
        let Some(batch) = pipeline.pop().unwrap() else {
            break;
        };
        out.push(batch.bytes().to_vec());
        batch
            .release(Fence::Sync)
            .expect("a Sync fence always captures");
        n += 1;
    }
    n
}

/// Every batch's bytes of a pipeline of `decoder` over `samples`: windows of `window`
/// tokens, `batch` of them a batch ([`token_config`]).
pub fn token_batches<D, I>(decoder: D, window: u64, batch: usize, samples: I) -> Vec<Vec<u8>>
where
    D: Decode + TokenBytes,
    I: IntoIterator<Item = D::Sample>,
    I::IntoIter: Send + 'static,
{
    let config = token_config(&decoder, window, batch);
    let mut p = Pipeline::new(config, decoder, samples).unwrap();
    let mut got = Vec::new();
    drain(&mut p, None, &mut got);
    got
}

pub fn token_config(decoder: &impl TokenBytes, window: u64, batch: usize) -> Config {
    token_config_on(decoder, window, batch, 2)
}

/// As [`token_config`], on `threads` decode threads.
pub fn token_config_on(
    decoder: &impl TokenBytes,
    window: u64,
    batch: usize,
    threads: usize,
) -> Config {
    Config::builder()
        .batch_size(batch)
        .bytes_per_sample(decoder.bytes_for(window))
        .decode_threads(threads)
        .build()
        .unwrap()
}

pub fn le(ty: TokenType, t: u16) -> Vec<u8> {
    match ty {
        TokenType::U16 => t.to_le_bytes().to_vec(),
        TokenType::U32 => u32::from(t).to_le_bytes().to_vec(),
        TokenType::I32 => i32::from(t).to_le_bytes().to_vec(),
        TokenType::I64 => i64::from(t).to_le_bytes().to_vec(),
    }
}

pub trait TokenBytes {
    fn bytes_for(&self, window: u64) -> usize;
}
impl TokenBytes for Tokens {
    fn bytes_for(&self, window: u64) -> usize {
        self.sample_bytes(window)
    }
}
impl TokenBytes for NextToken {
    fn bytes_for(&self, window: u64) -> usize {
        self.sample_bytes(window)
    }
}

/// Two walks that must give the same steps, compared on each rank of a world of 2:
/// `steps(rank)` is `(got, want)`; `want` has more than `min_steps` steps (else the panic
/// says `"{counted}: N steps"`) and `got` is `want` (else `"{compared}, rank R: the steps
/// differ"`).
pub fn same_steps_on_each_rank<T: PartialEq>(
    counted: &str,
    compared: &str,
    min_steps: usize,
    mut steps: impl FnMut(u64) -> (Vec<T>, Vec<T>),
) {
    for rank in 0..2 {
        let (got, want) = steps(rank);
        assert!(want.len() > min_steps, "{counted}: {} steps", want.len());
        assert!(got == want, "{compared}, rank {rank}: the steps differ");
    }
}

/// A loader's first `n` batches (or all, if fewer) as (step, ids, bytes).
pub fn first_batches<S: Source>(
    mut loader: Loader<S>,
    n: usize,
) -> Vec<(Option<u64>, Vec<u64>, Vec<u8>)> {
    let mut out = Vec::new();
    while out.len() < n {
        let Some(b) = loader.pop().unwrap() else {
            break;
        };
        out.push((b.step(), b.sample_ids().to_vec(), b.bytes().to_vec()));
        b.release(Fence::Sync).unwrap();
    }
    out
}
