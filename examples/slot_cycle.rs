//! The slot cycle of small batches, on the cpu backend: streams 256 KiB batches (16 × 4097
//! `i32`, the GPU benchmark's small row) through a pipeline with the trace on, releases
//! each as soon as it is popped, and prints the rate and the slot timeline — each hand-off
//! of a slot's cycle (the copy thread seeing a fill or a release, the consumer seeing a
//! lease, the feeder seeing a freed host slot) with its p50, p90 and max. The GPU
//! benchmark prints the same table for its small row on the cuda backend.
//!
//! ```text
//! cargo run --release --example slot_cycle -- [--batches N] [--host-slots H] [--device-slots D]
//! ```

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use pinring::{decode_fn, Config, DecodeError, Fence, Pipeline};
use pinring_examples::args::at_least_one;
use pinring_examples::{exit, say};

const ROWS: usize = 16;
const TOKENS: usize = 4097;

/// Streams small batches on the cpu backend and prints where their slots' cycle waits.
#[derive(Debug, Parser)]
#[command(name = "slot_cycle", version)]
struct Args {
    /// Batches to stream (at least 1).
    #[arg(long, value_name = "N", default_value_t = 20_000, value_parser = at_least_one)]
    batches: u64,
    /// Host slots (H).
    #[arg(long, value_name = "H", default_value_t = 128, value_parser = at_least_one)]
    host_slots: u64,
    /// Device slots (D).
    #[arg(long, value_name = "D", default_value_t = 32, value_parser = at_least_one)]
    device_slots: u64,
}

/// A row of tokens drawn from its id, widened to `i32` as a token decoder writes them.
fn row(id: u64, out: &mut [u8]) -> Result<(), DecodeError> {
    for (i, token) in out.chunks_exact_mut(4).enumerate() {
        let t = (id.wrapping_mul(0x9e37_79b9).wrapping_add(i as u64) % 50_257) as i32;
        token.copy_from_slice(&t.to_le_bytes());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    exit::status(run(&args))
}

fn run(args: &Args) -> Result<(), String> {
    let spans = (args.batches as usize).saturating_mul(24).min(1 << 22);
    let config = Config::builder()
        .batch_size(ROWS)
        .bytes_per_sample(TOKENS * 4)
        .host_slots(args.host_slots as usize)
        .device_slots(args.device_slots as usize)
        .trace(spans)
        .build()
        .map_err(|e| e.to_string())?;
    let ids = 0..args.batches * ROWS as u64;
    let mut pipeline = Pipeline::new(config, decode_fn(row), ids).map_err(|e| e.to_string())?;
    let start = Instant::now();
    let mut n = 0u64;
    while let Some(batch) = pipeline.pop().map_err(|e| e.to_string())? {
        batch
            .release(Fence::Sync)
            .map_err(|e| e.error.to_string())?;
        n += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    say!(
        "{n} batches of {ROWS} x {TOKENS} i32 in {secs:.2} s: {:.0} batches/s (cpu backend)",
        n as f64 / secs
    );
    let timeline = pipeline.slot_timeline().ok_or("tracing is off")?;
    say!("{timeline}");
    Ok(())
}
