//! The cpu-backend pipeline end to end: throughput by batch size, and decode scaling.
//!
//! ```text
//! cargo bench -p pinring-benches --bench pipeline
//! ```
//!
//! The workload is the GPU benchmark's, scaled down: a synthetic uint16 token shard
//! (8 Mi tokens, written to the temp dir), windows of 4096 tokens at random offsets,
//! widened to i32 on the decode pool ([`Tokens`]), so one sample is 16 KiB.
//!
//! - `cpu_pipeline/<size>`: 64 KiB, 1 MiB, 8 MiB and 64 MiB batches (4 to 4096 windows),
//!   default decode threads (one per core). Criterion's time per iteration is one batch:
//!   batches/s is its inverse, and the throughput it prints is the batch bytes.
//! - `decode_scaling/<threads>`: 8 MiB batches with 1, 2, … N decode threads (N = the
//!   available parallelism) and 2N, to show oversubscription.
//!
//! Each benchmark keeps one pipeline running over an endless sampler and times `iters`
//! consecutive batches (pop, touch the first word, `release(Fence::Sync)`), so start-up
//! (mapping the ring, first-touch page faults) stays out of the numbers. On the cpu
//! backend the "device" copy is a `memcpy` on the backend's stream thread, which shares
//! the cores with decode: on a 2-core machine expect both to compete, and expect noise
//! from anything else running.

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use pinring::source::{Order, SplitMix64, TokenShards, TokenType, Tokens};
use pinring::{Config, Fence, Pipeline};
use pinring_benches::{cores, TempShard};

#[path = "criterion_config.rs"]
mod criterion_config;

/// Tokens per window: 4096 × 4 bytes = 16 KiB a sample.
const WINDOW: u64 = 4096;
const SHARD_TOKENS: u64 = 8 << 20;

/// The synthetic shard: uniform GPT-2 tokens.
struct Shard(TempShard);

impl Shard {
    fn new() -> Self {
        let mut rng = SplitMix64::new(1);
        Shard(TempShard::write("pipeline", SHARD_TOKENS, || {
            rng.below(50257) as u16
        }))
    }

    /// An endless pipeline of `batch_bytes` batches from this shard.
    fn pipeline(&self, batch_bytes: usize, threads: Option<usize>) -> Pipeline {
        let decoder = Tokens::new(TokenType::I32);
        let sample_bytes = decoder.sample_bytes(WINDOW);
        let sampler = TokenShards::open([self.0.path()])
            .expect("open the shard")
            .windows(WINDOW)
            .order(Order::Random { seed: 7 })
            .build()
            .expect("sampler");
        let mut builder = Config::builder()
            .batch_size(batch_bytes / sample_bytes)
            .bytes_per_sample(sample_bytes);
        if let Some(n) = threads {
            builder = builder.decode_threads(n);
        }
        let config = builder.build().expect("valid config");
        Pipeline::new(config, decoder, sampler.iter()).expect("pipeline starts")
    }
}

/// Pops, touches and releases `iters` batches; the time it took.
fn drain(pipeline: &mut Pipeline, iters: u64) -> Duration {
    let t = Instant::now();
    for _ in 0..iters {
        let batch = pipeline.pop().expect("pop").expect("endless source");
        black_box(batch.bytes()[0]);
        batch
            .release(Fence::Sync)
            .expect("a Sync fence always captures");
    }
    t.elapsed()
}

fn label(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{}MiB", bytes >> 20)
    } else {
        format!("{}KiB", bytes >> 10)
    }
}

fn benches(c: &mut Criterion) {
    let shard = Shard::new();
    let mut group = c.benchmark_group("cpu_pipeline");
    for size in [64 << 10, 1 << 20, 8 << 20, 64 << 20] {
        let mut pipeline = shard.pipeline(size, None);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(BenchmarkId::from_parameter(label(size)), |b| {
            b.iter_custom(|iters| drain(&mut pipeline, iters))
        });
        // Which stage held it up (printed once per size; criterion's lines are above).
        let s = pipeline.stats();
        eprintln!(
            "    stats {}: decode busy {:.0} ms / waited {:.0} ms; copy busy {:.0} ms / \
             waited {:.0} ms; consumer stalls {} ({:.0} ms)",
            label(size),
            s.decode.busy.as_secs_f64() * 1e3,
            s.decode.waited.as_secs_f64() * 1e3,
            s.copy.busy.as_secs_f64() * 1e3,
            s.copy.waited.as_secs_f64() * 1e3,
            s.consumer_stalls,
            s.consumer_stall_time.as_secs_f64() * 1e3,
        );
    }
    group.finish();

    let cores = cores();
    let mut threads: Vec<usize> = std::iter::successors(Some(1), |n| Some(n * 2))
        .take_while(|&n| n < cores)
        .collect();
    threads.extend([cores, 2 * cores]);
    let mut group = c.benchmark_group("decode_scaling");
    let size = 8 << 20;
    group.throughput(Throughput::Bytes(size as u64));
    for n in threads {
        let mut pipeline = shard.pipeline(size, Some(n));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter_custom(|iters| drain(&mut pipeline, iters))
        });
    }
    group.finish();
}

criterion_group! {
    name = pipeline;
    config = criterion_config::ten_samples(Duration::from_millis(500), Duration::from_secs(2));
    targets = benches
}
criterion_main!(pipeline);
