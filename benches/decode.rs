//! The token decoders alone, on one thread: how fast a window of a `u16` shard becomes a
//! sample of wider tokens in memory (the decode pool's work per sample, without the
//! pipeline around it). A small timing harness, not criterion: it reports throughput by
//! this process's CPU time as well as by wall time, since on a shared machine other
//! processes' load moves wall time far more than CPU time.
//!
//! ```text
//! cargo bench -p pinring-benches --bench decode            # every row
//! cargo bench -p pinring-benches --bench decode -- small   # rows whose name holds "small"
//! ```
//!
//! A synthetic `u16` shard of 32 Mi tokens (64 MiB, written to the temp dir and read once,
//! so that it sits in the page cache) and windows at random offsets:
//!
//! - `large`: batches of 64 windows of 131073 tokens (`T = 128 Ki`), 32 MiB as i32;
//! - `small`: batches of 16 windows of 4097 tokens (`T = 4096`), 256 KiB as i32;
//!
//! each with [`Tokens`] as `i32` and `i64` and [`NextToken`] as `i32`; and the same
//! windows of a `u32` shard (LLaMA-3's format, 32 Mi tokens) as `i32`, where nothing
//! widens (`u32/...`). One iteration
//! decodes a whole batch into one reused buffer (ordinary memory, not pinned). Each row
//! runs for `PINRING_BENCH_SECONDS` (default 1) five times; the median of the five is
//! printed, in GiB/s of bytes written (the batch's size) per CPU second and per wall
//! second.

use std::hint::black_box;
use std::time::Instant;

use pinring::source::{NextToken, Order, ShardToken, SplitMix64, TokenShards, TokenType, Tokens};
use pinring::Decode;
use pinring_benches::{median, process_cpu_time, TempShard};

const SHARD_TOKENS: u64 = 32 << 20;
const REPEATS: usize = 5;

/// A shard of random `T` tokens below `vocab` (which `T` holds), in the page cache.
fn shard<T: ShardToken + TryFrom<u64>>(vocab: u64) -> TempShard {
    let mut rng = SplitMix64::new(7);
    TempShard::write(&format!("decode-{vocab}"), SHARD_TOKENS, || {
        T::try_from(rng.below(vocab))
            .ok()
            .expect("a token below the vocabulary")
    })
    .cached()
}

/// Runs `batch` for `seconds` `REPEATS` times; prints the medians of bytes per CPU second
/// and per wall second.
fn row(name: &str, bytes: usize, seconds: f64, mut batch: impl FnMut()) {
    for _ in 0..3 {
        batch(); // warm the caches and the output buffer
    }
    let (mut cpu, mut wall) = (Vec::new(), Vec::new());
    for _ in 0..REPEATS {
        let (c0, t0) = (process_cpu_time(), Instant::now());
        let mut n = 0u64;
        while t0.elapsed().as_secs_f64() < seconds {
            batch();
            n += 1;
        }
        let (c1, t1) = (process_cpu_time(), t0.elapsed());
        let gib = (n as f64 * bytes as f64) / f64::from(1u32 << 30);
        let cpu_s = match (c0, c1) {
            (Some(a), Some(b)) if b > a => (b - a).as_secs_f64(),
            _ => f64::NAN,
        };
        cpu.push(gib / cpu_s);
        wall.push(gib / t1.as_secs_f64());
    }
    println!(
        "{name:<32} {:>6.2} GiB/s per CPU second  {:>6.2} GiB/s per wall second",
        median(&mut cpu),
        median(&mut wall)
    );
}

/// The row of `decoder` decoding `windows` into one reused buffer of `batch` samples of
/// `sample` bytes.
fn decode_row<D: Decode>(
    name: &str,
    decoder: &D,
    windows: &[D::Sample],
    (batch, sample): (usize, usize),
    seconds: f64,
) where
    D::Sample: Clone,
{
    let mut out = vec![0u8; batch * sample];
    row(name, out.len(), seconds, || {
        for (w, o) in windows.iter().zip(out.chunks_exact_mut(sample)) {
            decoder.decode(w.clone(), o).expect("decode");
        }
        black_box(&out);
    });
}

fn main() {
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let seconds = std::env::var("PINRING_BENCH_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0);
    let wanted = |name: &str| filter.is_empty() || filter.iter().any(|f| name.contains(f));
    let (gpt2, llama) = (shard::<u16>(50257), shard::<u32>(128_256));
    let rows = [
        ("large", &gpt2, 64usize, 131_073u64),
        ("small", &gpt2, 16, 4097),
        ("u32/large", &llama, 64, 131_073),
        ("u32/small", &llama, 16, 4097),
    ];
    for (size, shard, batch, window) in rows {
        let shards = TokenShards::open([shard.path()]).expect("open the shard");
        let types: &[TokenType] = if size.starts_with("u32") {
            &[TokenType::I32]
        } else {
            &[TokenType::I32, TokenType::I64]
        };
        let windows: Vec<_> = shards
            .clone()
            .windows(window)
            .order(Order::Random { seed: 3 })
            .build()
            .expect("a sampler")
            .iter()
            .take(batch)
            .collect();
        for &ty in types {
            let name = format!("decode/{size}/Tokens/{ty}");
            if !wanted(&name) {
                continue;
            }
            let decoder = Tokens::new(ty);
            let sample = decoder.sample_bytes(window);
            decode_row(&name, &decoder, &windows, (batch, sample), seconds);
        }
        let name = format!("decode/{size}/NextToken/i32");
        if !wanted(&name) {
            continue;
        }
        let decoder = NextToken::new(TokenType::I32);
        let sample = decoder.sample_bytes(window);
        decode_row(&name, &decoder, &windows, (batch, sample), seconds);
    }
}
