//! What the loader tests share: shards written to a folder, sources over them, and a
//! loader's batches as plain data.

use std::path::PathBuf;

use pinring::source::{
    write_shard, Documents, FixedRecords, Order, Sampler, Source, SplitMix64, TokenShards,
};
use pinring::{Batch, Fence, Loader};
use tempfile::TempDir;

/// The bos of the document shards.
pub const BOS: u16 = 50256;

/// Random tokens below 50000, with a document start (`BOS`) every 40 to 200 tokens.
pub fn document_tokens(n: usize, seed: u64) -> Vec<u16> {
    let mut rng = SplitMix64::new(seed);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        out.push(BOS);
        let len = 40 + rng.below(160) as usize;
        out.extend((1..len).map(|_| rng.below(50_000) as u16));
    }
    out.truncate(n);
    out
}

/// Shard files of these lengths (document tokens), in a new folder.
pub fn shards(lens: &[usize]) -> (TempDir, Vec<PathBuf>) {
    let dir = TempDir::new().unwrap();
    let paths = lens
        .iter()
        .enumerate()
        .map(|(i, &n)| {
            let path = dir.path().join(format!("train_{i:03}.bin"));
            write_shard(&path, &document_tokens(n, 7 + i as u64)).unwrap();
            path
        })
        .collect();
    (dir, paths)
}

/// Windows of `window` tokens over `paths`, in `order`.
pub fn windows(paths: &[PathBuf], window: u64, order: Order) -> Sampler<TokenShards> {
    TokenShards::open(paths)
        .unwrap()
        .windows(window)
        .order(order)
        .build()
        .unwrap()
}

/// One source per shard, for a mixture: windows of `window` tokens over shard `i` alone,
/// in `order(i)`.
pub fn windows_per_shard(
    paths: &[PathBuf],
    window: u64,
    order: impl Fn(u64) -> Order,
) -> Vec<Sampler<TokenShards>> {
    paths
        .iter()
        .enumerate()
        .map(|(i, p)| windows(std::slice::from_ref(p), window, order(i as u64)))
        .collect()
}

/// Packed documents over `paths`: steps of `tokens` tokens, documents cut at `max_seq_len`.
pub fn documents(paths: &[PathBuf], tokens: u64, max_seq_len: u64, shuffled: bool) -> Documents {
    let b = Documents::builder(TokenShards::open(paths).unwrap())
        .bos(u32::from(BOS))
        .tokens_per_batch(tokens)
        .max_seq_len(max_seq_len);
    let b = if shuffled {
        b.order(pinring::source::DocOrder::Shuffled { seed: 5 })
    } else {
        b
    };
    b.build().unwrap()
}

/// Records of `bytes` bytes: one file of `n` records, record `i` filled with its index.
pub fn records(n: usize, bytes: usize) -> (TempDir, FixedRecords) {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("records.bin");
    let data: Vec<u8> = (0..n)
        .flat_map(|i| (0..bytes).map(move |j| (i * 7 + j) as u8))
        .collect();
    std::fs::write(&path, data).unwrap();
    let set = FixedRecords::open([&path], bytes).unwrap();
    (dir, set)
}

/// A batch as plain data: (step, epoch, row ids, its bytes).
pub type Got = (Option<u64>, u64, Vec<u64>, Vec<u8>);

/// `batch` as plain data, released.
pub fn got(batch: Batch) -> Got {
    let out = (
        batch.step(),
        batch.epoch(),
        batch.sample_ids().to_vec(),
        batch.bytes().to_vec(),
    );
    batch.release(Fence::Sync).unwrap();
    out
}

/// Up to `n` batches of `loader`, as plain data.
pub fn pop<S: Source>(loader: &mut Loader<S>, n: usize) -> Vec<Got> {
    let mut out = Vec::new();
    while out.len() < n {
        match loader.pop().unwrap() {
            Some(b) => out.push(got(b)),
            None => break,
        }
    }
    out
}

/// Every batch to the loader's end, as plain data.
pub fn pop_all<S: Source>(loader: &mut Loader<S>) -> Vec<Got> {
    pop(loader, usize::MAX)
}
