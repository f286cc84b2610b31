//! The packed-documents source on the CPU: how fast a shard is indexed (the scan for
//! `bos` that `Documents::build` and the thread ahead of the walk run once per shard), how
//! fast steps are walked (what the feeder thread does per step), and how fast a step is
//! packed into memory (the decode pool's work per step, one thread). A small timing
//! harness, as `decode.rs`: CPU-time and wall-time rates, the median of five runs.
//!
//! ```text
//! cargo bench -p pinring-benches --bench documents            # every row
//! cargo bench -p pinring-benches --bench documents -- index   # rows whose name holds "index"
//! ```
//!
//! A synthetic `u16` shard of 100M tokens (200 MB, modded-nanogpt's shard size), of
//! documents of 1 to 2,000 tokens (about 1,000 on average, as FineWeb's), written to the
//! temp dir and read once so that it sits in the page cache:
//!
//! - `index`: `Documents::build` on it (the scan of the whole shard; nothing else is
//!   indexed with one shard), in ms and GB/s of shard;
//! - `walk/W=8`: the steps of rank 0 of 8 at modded-nanogpt's largest size (49,152 tokens
//!   per rank, max_seq_len 2,048), steps/s;
//! - `pack/i32`: those steps decoded into a reused buffer as `i32`, with positions, steps/s
//!   and GB/s of tokens written.

use std::hint::black_box;
use std::time::Instant;

use pinring::source::{Documents, SplitMix64, TokenShards};
use pinring::Decode;
use pinring_benches::{median, process_cpu_time, TempShard};

const SHARD_TOKENS: u64 = 100_000_000;
const BOS: u16 = 50256;
const REPEATS: usize = 5;
const STEPS: usize = 2000;

/// The shard: documents of 1 to 2,000 tokens, each starting with `BOS`, in the page cache.
fn shard() -> TempShard {
    let mut rng = SplitMix64::new(3);
    let mut left_in_doc = 0u64;
    TempShard::write("documents", SHARD_TOKENS, || {
        let token = if left_in_doc == 0 {
            left_in_doc = 1 + rng.below(2000);
            BOS
        } else {
            rng.below(50000) as u16
        };
        left_in_doc -= 1;
        token
    })
    .cached()
}

fn source(shard: &TempShard, rank: u64, world: u64, positions: bool) -> Documents {
    Documents::builder(TokenShards::open([shard.path()]).expect("open"))
        .tokens_per_batch(49152)
        .max_seq_len(2048)
        .shard(rank, world)
        .positions(positions)
        .build()
        .expect("build")
}

/// Runs `f` five times; prints the median of `per(wall)` and `per(cpu)`.
fn row(name: &str, unit: &str, mut f: impl FnMut() -> f64) {
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..REPEATS {
        let (t, c) = (Instant::now(), process_cpu_time());
        let work = f();
        let w = t.elapsed().as_secs_f64();
        // CPU time comes in clock ticks (10 ms): too coarse for a short row.
        if let (Some(a), Some(b)) = (c, process_cpu_time()) {
            let c = (b - a).as_secs_f64();
            if c >= 0.2 {
                cpu.push(work / c);
            }
        }
        wall.push(work / w);
    }
    let cpu = if cpu.len() == REPEATS {
        format!("{:>10.1} per CPU second", median(&mut cpu))
    } else {
        "(too short for CPU time)".to_owned()
    };
    println!(
        "{name:<12} {:>10.1} {unit} per wall second, {cpu}",
        median(&mut wall)
    );
}

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let wanted = |name: &str| filter.as_deref().is_none_or(|f| name.contains(f));
    let shard = shard();
    if wanted("index") {
        let mut ms = Vec::new();
        row("index", "GB", || {
            let t = Instant::now();
            black_box(source(&shard, 0, 1, false));
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            SHARD_TOKENS as f64 * 2.0 / 1e9
        });
        println!(
            "index        {:>10.1} ms a 100M-token shard (median)",
            median(&mut ms)
        );
    }
    if wanted("walk") {
        let docs = source(&shard, 0, 8, false);
        row("walk/W=8", "steps", || {
            black_box(docs.iter().take(STEPS).count());
            STEPS as f64
        });
    }
    if wanted("pack") {
        let docs = source(&shard, 0, 1, true);
        let decoder = docs.decoder();
        let mut out = vec![0u8; docs.fields().bytes()];
        // The walk is included (it is about 50 times as fast as the packing).
        let mut steps = docs.iter().take(STEPS * REPEATS);
        row("pack/i32", "steps", || {
            for _ in 0..STEPS {
                let step = steps.next().expect("walked");
                decoder.decode(step, &mut out).expect("decode");
            }
            black_box(&out);
            STEPS as f64
        });
        println!(
            "pack/i32     {:>10.1} MB of tokens a step",
            49153.0 * 4.0 / 1e6
        );
    }
}
