//! The token decoders alone, on one thread: how fast a window of a `u16` shard becomes a
//! sample of wider tokens in memory (the decode pool's work per sample, without the
//! pipeline around it).
//!
//! ```text
//! cargo bench -p pinring-benches --bench decode
//! ```
//!
//! A synthetic `u16` shard of 32 Mi tokens (64 MiB, written to the temp dir and read once,
//! so it sits in the page cache) and windows at random offsets:
//!
//! - `decode/large`: a batch of 64 windows of 131073 tokens (`T = 128 Ki`), 32 MiB as i32;
//! - `decode/small`: a batch of 16 windows of 4097 tokens (`T = 4096`), 256 KiB as i32;
//!
//! each with [`Tokens`] as `i32` and `i64` and [`NextToken`] as `i32`. One iteration
//! decodes the whole batch into one reused buffer; criterion's throughput is the bytes
//! written (the batch's size), so GiB/s compares across rows.

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pinring::source::{NextToken, Order, ShardWriter, SplitMix64, TokenShards, TokenType, Tokens};
use pinring::Decode;

const SHARD_TOKENS: u64 = 32 << 20;

struct Shard(PathBuf);

impl Shard {
    fn new() -> Self {
        let path =
            std::env::temp_dir().join(format!("pinring-bench-decode-{}.bin", std::process::id()));
        let mut rng = SplitMix64::new(7);
        let mut writer = ShardWriter::create(&path).expect("create the shard");
        let mut chunk = vec![0u16; 1 << 16];
        for _ in 0..SHARD_TOKENS / chunk.len() as u64 {
            for t in &mut chunk {
                *t = rng.below(50257) as u16;
            }
            writer.write(&chunk).expect("write the shard");
        }
        writer.finish().expect("finish the shard");
        // Read it once, so that every row reads from the page cache.
        black_box(std::fs::read(&path).expect("read the shard back"));
        Shard(path)
    }
}

impl Drop for Shard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

fn bench(c: &mut Criterion) {
    let shard = Shard::new();
    let shards = TokenShards::open([&shard.0]).expect("open the shard");
    let mut group = c.benchmark_group("decode");
    for (name, batch, window) in [("large", 64usize, 131_073u64), ("small", 16, 4097)] {
        let windows: Vec<_> = shards
            .clone()
            .windows(window)
            .order(Order::Random { seed: 3 })
            .build()
            .expect("a sampler")
            .iter()
            .take(batch)
            .collect();
        for ty in [TokenType::I32, TokenType::I64] {
            let decoder = Tokens::new(ty);
            let sample = decoder.sample_bytes(window);
            let mut out = vec![0u8; batch * sample];
            group.throughput(Throughput::Bytes(out.len() as u64));
            group.bench_function(BenchmarkId::new(format!("{name}/Tokens"), ty), |b| {
                b.iter(|| {
                    for (w, o) in windows.iter().zip(out.chunks_exact_mut(sample)) {
                        decoder.decode(w.clone(), o).expect("decode");
                    }
                    black_box(&out);
                })
            });
        }
        let decoder = NextToken::new(TokenType::I32);
        let sample = decoder.sample_bytes(window);
        let mut out = vec![0u8; batch * sample];
        group.throughput(Throughput::Bytes(out.len() as u64));
        group.bench_function(BenchmarkId::new(format!("{name}/NextToken"), "i32"), |b| {
            b.iter(|| {
                for (w, o) in windows.iter().zip(out.chunks_exact_mut(sample)) {
                    decoder.decode(w.clone(), o).expect("decode");
                }
                black_box(&out);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
