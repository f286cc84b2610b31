//! The GPU benchmark: pinring's cuda backend against the limits and the peers, one process.
//! Needs an NVIDIA GPU; `scripts/gpu-check.sh --run` (or `--bench`) builds it here, makes
//! its inputs there (the token shard, the PyTorch figures from
//! `benches/torch_dataloader.py`), runs it and prints the table.
//!
//! ```text
//! cargo bench -p pinring-benches --bench gpu -- --shard PATH [--torch FILE] [--only SECTION[,SECTION...]]
//! ```
//!
//! `--shard`: a uint16 token shard (`make_shard`), at least 10 Mi tokens.
//! `--torch`: `TORCH\t<key>\t<value>` lines from `benches/torch_dataloader.py`.
//! Sections: transport, small, copies, large, overlap, scaling, consumer, poison, cpu
//! (default: all of these); `explore` (only when named) tries the pipeline's knobs on the token workloads
//! and prints `EXPLORE` lines, for tuning; `enqueue` (only when named) prints what one
//! `cuMemcpyHtoDAsync` call costs by size and kind of pinned memory, and what stream-side
//! waits on completed events cost the copy stream. The kernels (`hold`, `spin`) are the
//! GPU suite's, shared through `tests/gpu/harness.rs`.
//!
//! Diagnostics, set in the environment: `PINRING_BENCH_TRACE=DIR` writes each section's
//! pipeline timeline (Perfetto JSON) there; `PINRING_BENCH_TIMELINE=1` prints the overlap
//! section's GPU-side waits before each kernel (`TIMELINE` lines);
//! `PINRING_BENCH_CONSUMER_SPLIT=1` prints the token consumers' time per batch in `pop`,
//! `wait_on` and `release` (`SPLIT` lines).
//!
//! Each result is a line `ROW\t<what>\t<pinring>\t<reference>\t<target>\t<met>`; stage
//! times behind it are `STATS\t...` lines; a section that fails prints
//! `RESULT\tbench_<section>\tFAIL\t<why>`. GB = 1e9 bytes, GiB = 2^30 bytes.
//!
//! One module per section (`transport`, `small`, `copies`, `large`, `overlap`, `scaling`,
//! `consumer`, `poison`, `cpu`, `enqueue`, `explore`); what they share: `nothing` (pipelines of a
//! decoder that writes nothing), `tokens` (token pipelines and their consumer), `raw`
//! (copies without pinring), `timeline`, `sched` (the `SCHED_OTHER` switch of an A/B), and what the benchmark prints (`report`, `trace`,
//! `torch`). This file parses the command line (`args`) and runs the sections.

mod args;
mod consumer;
mod copies;
mod cpu;
mod enqueue;
mod explore;
#[path = "../../tests/gpu/harness.rs"]
mod harness;
mod large;
mod nothing;
mod overlap;
mod poison;
mod raw;
mod report;
mod scaling;
mod sched;
mod small;
mod timeline;
mod tokens;
mod torch;
mod trace;
mod transport;

use std::process::ExitCode;
use std::time::Instant;

use pinring::source::TokenShards;

use crate::args::{parse, Args, Command, USAGE};
use crate::consumer::consumer;
use crate::copies::copies;
use crate::cpu::cpu;
use crate::enqueue::enqueue_cost;
use crate::explore::explore;
use crate::harness::{s, Gpu, Res};
use crate::large::large;
use crate::overlap::overlap;
use crate::poison::poison;
use crate::scaling::scaling;
use crate::small::small;
use crate::torch::read_torch;
use crate::transport::transport;

fn main() -> ExitCode {
    match parse(std::env::args().skip(1)) {
        Ok(Command::Run(args)) => run(&args),
        Ok(Command::Help) => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("error: {why}");
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}

/// Runs the sections the command line names (or the default ones), each caught on its
/// own: a failing section prints its `RESULT` line and the others still run.
fn run(args: &Args) -> ExitCode {
    let gpu = match Gpu::new() {
        Ok(gpu) => gpu,
        Err(e) => {
            println!(
                "RESULT\tbench_setup\tFAIL\t{}",
                e.replace(['\t', '\n'], " ")
            );
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = TokenShards::open([&args.shard]) {
        println!(
            "RESULT\tbench_setup\tFAIL\t{}",
            s(e).replace(['\t', '\n'], " ")
        );
        return ExitCode::FAILURE;
    }
    let torch = read_torch(args.torch.as_deref());
    let on = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
    let g = &gpu;
    let shard = args.shard.as_str();
    let mut all = true;
    if on("transport") {
        all &= section("transport", || transport(g));
    }
    if on("small") {
        all &= section("small", || small(g, shard, &torch));
    }
    if on("copies") {
        all &= section("copies", || copies(g));
    }
    if on("large") {
        all &= section("large", || large(g, shard, &torch));
    }
    if on("overlap") {
        all &= section("overlap", || overlap(g));
    }
    if on("scaling") {
        all &= section("scaling", || scaling(g, shard));
    }
    if on("consumer") {
        all &= section("consumer", || consumer(g));
    }
    if on("poison") {
        all &= section("poison", || poison(g));
    }
    if on("cpu") {
        all &= section("cpu", || cpu(g, shard));
    }
    // Only when asked for by name.
    if args.only.iter().any(|o| o == "enqueue") {
        all &= section("enqueue", || enqueue_cost(g));
    }
    if args.only.iter().any(|o| o == "explore") {
        all &= section("explore", || explore(g, shard));
    }
    if all {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// Runs one section; a failure (an error or a panic) prints `RESULT\tbench_<name>\tFAIL`.
fn section(name: &str, f: impl FnOnce() -> Res) -> bool {
    let t = Instant::now();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    eprintln!("bench {name}: {:.2?}", t.elapsed());
    let why = match result {
        Ok(Ok(())) => return true,
        Ok(Err(e)) => e,
        Err(panic) => panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panicked".into()),
    };
    println!(
        "RESULT\tbench_{name}\tFAIL\t{}",
        why.replace(['\t', '\n'], " ")
    );
    false
}
