//! Streams next-token training batches from token shards through the pipeline and
//! reports batches/s and the pipeline's stats.
//!
//! ```text
//! cargo run --release --example make_shard -- /tmp/train_000.bin 100000000
//! cargo run --release --example train_tokens -- /tmp/train_000.bin
//! cargo run --release --example train_tokens -- --seq-len 4096 --batch-size 16 --dtype int32 \
//!     --order shuffled --seed 1 --batches 2000 '/data/fineweb_train_*.bin'
//! cargo run --release --example train_tokens -- --help
//! ```
//!
//! Each PATH is a shard file or a pattern (`*`, `?` in the file name), in llm.c's format
//! of `u16` tokens (GPT-2) or `u32` tokens (LLaMA-3). Batches are `B` windows of `T + 1`
//! tokens, split into inputs and targets and widened to the dtype on the decode pool
//! ([`NextToken`]). A bad argument or a malformed file ends the run with a message and a
//! non-zero exit status (2 for arguments, 1 for the rest), never a panic.

use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use pinring::source::{NextToken, Order, TokenType};
use pinring::{Backend, Batch, Config, Pipeline};
use pinring_examples::args::{at_least_one, at_least_one_usize, Dtype};
use pinring_examples::backend::{self, Built};
use pinring_examples::drive::pop_each;
use pinring_examples::trace::TraceFile;
use pinring_examples::{exit, say, shards};

/// Streams next-token training batches (B windows of T + 1 tokens, split into inputs and
/// targets) from llm.c token shards through pinring, and prints batches/s and the
/// pipeline's Stats.
#[derive(Debug, Parser)]
#[command(name = "train_tokens", version)]
struct Args {
    /// Shard files, or patterns with `*` and `?` in the file name (quote them), of u16
    /// (GPT-2) or u32 (LLaMA-3) tokens.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<String>,
    /// Sequence length T: each sample is a window of T + 1 tokens.
    #[arg(long, value_name = "T", default_value_t = 1024, value_parser = at_least_one)]
    seq_len: u64,
    /// Samples (windows) per batch.
    #[arg(long, value_name = "B", default_value_t = 16, value_parser = at_least_one_usize)]
    batch_size: usize,
    /// The integer type tokens are written as (uint16 only for u16 shards).
    #[arg(long, value_enum, default_value_t = Dtype::I32)]
    dtype: Dtype,
    /// The order of each epoch: the window grid in file order, shuffled per epoch, or
    /// random offsets.
    #[arg(long, value_enum, default_value_t = OrderArg::Shuffled)]
    order: OrderArg,
    /// The seed of the shuffle or the random offsets.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// Batches to stream (exactly: an epoch's short last batch counts as one).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = at_least_one)]
    batches: u64,
    /// Decode threads [default: one per core].
    #[arg(long, value_name = "N", value_parser = at_least_one_usize)]
    threads: Option<usize>,
    /// This process's rank: it reads its share of each epoch.
    #[arg(long, value_name = "R", default_value_t = 0)]
    rank: u64,
    /// Ranks the epoch is shared among.
    #[arg(long, value_name = "W", default_value_t = 1, value_parser = at_least_one)]
    world_size: u64,
    /// Deliver to CUDA device ORDINAL [default: the cpu backend].
    #[arg(long, value_name = "ORDINAL")]
    cuda: Option<usize>,
    /// Record a timeline of the loader (per-batch spans of every stage) and write it to
    /// FILE as Chrome trace JSON, for https://ui.perfetto.dev or chrome://tracing.
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum OrderArg {
    /// The window grid in file order, the same every epoch.
    Sequential,
    /// The window grid, shuffled afresh each epoch.
    Shuffled,
    /// Windows at random offsets.
    Random,
}

/// What the arguments ask for, every product checked.
struct Plan {
    window: u64,
    samples: usize,
    sample_bytes: usize,
    ty: TokenType,
}

fn plan(args: &Args) -> Result<Plan, String> {
    let window = args.seq_len.checked_add(1).ok_or_else(|| {
        format!(
            "--seq-len {} is too large: a sample is a window of T + 1 tokens",
            args.seq_len
        )
    })?;
    let samples = args
        .batches
        .checked_mul(args.batch_size as u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            format!(
                "--batches {} × --batch-size {} overflows: that many samples cannot be counted \
                 (the most is {})",
                args.batches,
                args.batch_size,
                usize::MAX
            )
        })?;
    let ty = TokenType::from(args.dtype);
    // Inputs and targets: 2 × T tokens of the dtype.
    let sample_bytes = args
        .seq_len
        .checked_mul(2 * ty.bytes() as u64)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| {
            format!(
                "--seq-len {} is too large: a sample of 2 × {} tokens as {ty} does not fit in memory",
                args.seq_len, args.seq_len
            )
        })?;
    Ok(Plan {
        window,
        samples,
        sample_bytes,
        ty,
    })
}

pub(crate) fn main() -> ExitCode {
    let args = Args::parse();
    match plan(&args) {
        Ok(plan) => exit::status(run(&args, &plan)),
        Err(why) => exit::bad_argument(why),
    }
}

fn run(args: &Args, plan: &Plan) -> Result<(), Box<dyn std::error::Error>> {
    let shards = shards::open(&args.paths)?;
    // A u16 dtype cannot hold a u32 shard's tokens: say so before starting.
    shards.check_token_type(plan.ty)?;
    let (files, tokens, format) = (shards.shards().len(), shards.tokens(), shards.format());
    let order = match args.order {
        OrderArg::Sequential => Order::Sequential,
        OrderArg::Shuffled => Order::Shuffled { seed: args.seed },
        OrderArg::Random => Order::Random { seed: args.seed },
    };
    let sampler = shards
        .windows(plan.window)
        .order(order)
        .shard(args.rank, args.world_size)
        .build()?;
    let decoder = NextToken::new(plan.ty);
    let mut builder = Config::builder()
        .batch_size(args.batch_size)
        .bytes_per_sample(plan.sample_bytes);
    if let Some(n) = args.threads {
        builder = builder.decode_threads(n);
    }
    let (builder, trace) = TraceFile::before_run(builder, args.trace.as_deref())?;
    let sample_bytes = plan.sample_bytes;
    let batches = args.batches;
    // Enough samples for `batches` batches (more batches when epochs end in short ones:
    // `drive` stops at `batches`).
    let samples = sampler.iter().take(plan.samples);
    let epoch_len = sampler.epoch_len();
    let built = backend::build(builder, args.cuda)?;
    let device = built.device();
    // What the run streams, and the config.
    let header = |config_bytes: usize, config: &dyn std::fmt::Display| {
        say!(
            "{files} shard(s) of {format} tokens, {tokens} tokens; batches of {} × (T = {}) as {}, \
             {:?}, rank {}/{}: {epoch_len} windows per epoch for this rank, {config_bytes} bytes \
             a batch, on {device}",
            args.batch_size, args.seq_len, plan.ty, order, args.rank, args.world_size,
        );
        say!("{config}");
    };
    match built {
        #[cfg(feature = "cuda")]
        Built::Cuda(config, _) => {
            header(config.batch_bytes(), &config);
            // Stand-in for the training step: wait (host-side) until the batch is on the
            // device. A trainer would `wait_on` its stream and release fenced on it instead.
            let pipeline = Pipeline::new(config, decoder, samples)?;
            drive(pipeline, batches, trace, |batch| batch.synchronize())
        }
        Built::Cpu(config) => {
            header(config.batch_bytes(), &config);
            let mut checksum = 0u64;
            drive(
                Pipeline::new(config, decoder, samples)?,
                batches,
                trace,
                |batch| {
                    // Stand-in for the training step: touch one value of every sample.
                    for sample in batch.bytes().chunks_exact(sample_bytes) {
                        checksum = checksum.wrapping_add(u64::from(sample[0]));
                    }
                    Ok(())
                },
            )?;
            say!("checksum {checksum}");
            Ok(())
        }
    }
}

/// Pops `limit` batches (fewer if the source ends first), hands each to `step`, releases
/// it; prints the rate and the stats and writes the trace into its file.
fn drive<B: Backend>(
    mut pipeline: Pipeline<B>,
    limit: u64,
    trace: Option<TraceFile>,
    step: impl FnMut(&Batch<B>) -> pinring::Result<()>,
) -> Result<(), Box<dyn std::error::Error>> {
    let popped = pop_each(&mut pipeline, limit, step)?;
    let (batches, elapsed) = (popped.batches, popped.elapsed);
    let stats = pipeline.stats();
    say!(
        "{batches} batches in {:.3} s: {:.0} batches/s, {:.2} GiB/s",
        elapsed.as_secs_f64(),
        batches as f64 / elapsed.as_secs_f64(),
        stats.throughput(elapsed) / (1u64 << 30) as f64,
    );
    say!("{stats}");
    if let Some(trace) = trace {
        trace.write(&pipeline)?;
    }
    Ok(())
}
