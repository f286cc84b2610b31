//! Streams packed documents from token shards through the pipeline, a step of one rank
//! per batch, as modded-nanogpt's training loop takes them, and reports steps/s, tokens/s
//! and the pipeline's stats.
//!
//! ```text
//! cargo run --release --example make_shard -- /tmp/train_000.bin 100000000
//! cargo run --release --example train_documents -- /tmp/train_000.bin
//! cargo run --release --example train_documents -- --tokens-per-batch 16384 --max-seq-len 896 \
//!     --schedule 500:32768:2048,1000:49152:2048 --rank 0 --world-size 8 --steps 2000 \
//!     '/data/fineweb_train_*.bin'
//! # A mixture: web documents 70% of the time, code 30%, packed into the same steps.
//! cargo run --release --example train_documents -- --tokens-per-batch 16384 \
//!     --source '/data/web/*.bin' --weight 0.7 --source '/data/code/*.bin' --weight 0.3
//! cargo run --release --example train_documents -- --help
//! ```
//!
//! Each PATH is a shard file or a pattern (`*`, `?` in the file name), in llm.c's format
//! of `u16` tokens (GPT-2) or `u32` tokens (LLaMA-3). A document starts at each `--bos`
//! token; each step of each rank packs `--tokens-per-batch` + 1 tokens of documents cut at
//! `--max-seq-len` ([`Documents`]), with `inputs`, `targets`, `cu_seqlens` (and with
//! `--positions`, `positions`) as fields of one batch. With `--source` (instead of PATHs),
//! each `--source` is one source of a mixture ([`Mixture::documents`]): the documents of
//! the sources are mixed by `--weight` (one per source, in order; equal by default), one
//! document at a time, and packed into steps the same way. A bad argument or a malformed
//! file ends the run with a message and a non-zero exit status (2 for arguments, 1 for the
//! rest), never a panic.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser, ValueEnum};
use pinring::source::{DocOrder, Documents, Mixture, Stop};
use pinring::{Backend, Batch, ConfigBuilder, Decode, Pipeline};
use pinring_examples::args::{at_least_one, at_least_one_usize, schedule, Dtype, Schedule};
use pinring_examples::backend::{self, Built};
use pinring_examples::drive::pop_each;
use pinring_examples::trace::TraceFile;
use pinring_examples::{exit, say, shards};

/// Streams packed documents (each step of each rank: --tokens-per-batch + 1 tokens of whole
/// documents starting at --bos, cut at --max-seq-len, with cu_seqlens) from llm.c token
/// shards through pinring, as modded-nanogpt's generator makes them, and prints steps/s,
/// tokens/s and the pipeline's Stats.
#[derive(Debug, Parser)]
#[command(name = "train_documents", version)]
struct Args {
    /// Shard files, or patterns with `*` and `?` in the file name (quote them), of u16
    /// (GPT-2) or u32 (LLaMA-3) tokens.
    #[arg(
        value_name = "PATH",
        required_unless_present = "source",
        conflicts_with = "source"
    )]
    paths: Vec<String>,
    /// One source of a mixture of documents: a shard file or a pattern (repeat it for
    /// each source, in order; use it instead of PATHs).
    #[arg(long, value_name = "PATTERN")]
    source: Vec<String>,
    /// The weight of each --source, in the same order (repeat it) [default: equal].
    #[arg(long, value_name = "W")]
    weight: Vec<f64>,
    /// The mixture's seed: it reshuffles every shuffled --source.
    #[arg(long, value_name = "S", default_value_t = 0)]
    mix_seed: u64,
    /// When a mixture ends: never (each source cycles its epochs), or once the first
    /// source, or all sources, used up their first epoch.
    #[arg(long, value_enum, default_value_t = StopArg::Never)]
    stop: StopArg,
    /// The token that starts a document [default: 50256 for u16 shards, 128000 for u32].
    #[arg(long, value_name = "ID")]
    bos: Option<u32>,
    /// Tokens of inputs per rank per step (N): a step packs N + 1 tokens.
    #[arg(long, value_name = "N", default_value_t = 49152, value_parser = at_least_one)]
    tokens_per_batch: u64,
    /// Documents longer than this are cut to it.
    #[arg(long, value_name = "L", default_value_t = 2048, value_parser = at_least_one)]
    max_seq_len: u64,
    /// Length of cu_seqlens [default: modded-nanogpt's rule for each step's N].
    #[arg(long, value_name = "D", value_parser = at_least_one)]
    max_docs: Option<u64>,
    /// Step sizes that change during the run: FROM:N:L entries, comma separated, strictly
    /// increasing in FROM (step FROM on packs N + 1 tokens cut at L).
    #[arg(long, value_name = "FROM:N:L,...", value_parser = schedule)]
    schedule: Option<Schedule>,
    /// The order of the documents: modded-nanogpt's walk, or shuffled per epoch.
    #[arg(long, value_enum, default_value_t = OrderArg::Sequential)]
    order: OrderArg,
    /// The seed of the shuffled order.
    #[arg(long, value_name = "S", default_value_t = 0)]
    seed: u64,
    /// The integer type tokens are written as (u16 only for u16 shards).
    #[arg(long, value_enum, default_value_t = Dtype::I32)]
    dtype: Dtype,
    /// Also give each input token's position in its document.
    #[arg(long)]
    positions: bool,
    /// Begin at this step, exactly where an uninterrupted run is then (a mixture only).
    #[arg(long, value_name = "K", default_value_t = 0)]
    start_step: u64,
    /// Steps to stream.
    #[arg(long, value_name = "K", default_value_t = 1000, value_parser = at_least_one)]
    steps: u64,
    /// Decode threads [default: one per core].
    #[arg(long, value_name = "N", value_parser = at_least_one_usize)]
    threads: Option<usize>,
    /// This process's rank: ranks take the documents of each step in rank order.
    #[arg(long, value_name = "R", default_value_t = 0)]
    rank: u64,
    /// Ranks each step is shared among.
    #[arg(long, value_name = "W", default_value_t = 1, value_parser = at_least_one)]
    world_size: u64,
    /// Use the cpu backend (device slots in ordinary memory) [the default].
    #[arg(long, conflicts_with = "cuda")]
    cpu: bool,
    /// Deliver to CUDA device N.
    #[arg(long, value_name = "N")]
    cuda: Option<usize>,
    /// Record a timeline of the loader (per-step spans of every stage) and write it to
    /// FILE as Chrome trace JSON, for https://ui.perfetto.dev or chrome://tracing.
    #[arg(long, value_name = "FILE")]
    trace: Option<std::path::PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum OrderArg {
    /// modded-nanogpt's walk: shard by shard, document by document.
    Sequential,
    /// Every document of every shard, permuted afresh each epoch.
    Shuffled,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum StopArg {
    Never,
    First,
    All,
}

impl From<StopArg> for Stop {
    fn from(s: StopArg) -> Self {
        match s {
            StopArg::Never => Stop::Never,
            StopArg::First => Stop::First,
            StopArg::All => Stop::All,
        }
    }
}

pub(crate) fn main() -> ExitCode {
    let args = Args::parse();
    // (clap's `requires` gives way to PATHs' conflict with --source, so this is checked here.)
    if args.source.is_empty() {
        let mixture_only = [
            (!args.weight.is_empty(), "--weight"),
            (args.mix_seed != 0, "--mix-seed"),
            (!matches!(args.stop, StopArg::Never), "--stop"),
            (args.start_step != 0, "--start-step"),
        ];
        if let Some((_, flag)) = mixture_only.iter().find(|(set, _)| *set) {
            Args::command()
                .error(
                    ErrorKind::MissingRequiredArgument,
                    format!(
                        "{flag} is a mixture's setting: give the mixture's sources with --source"
                    ),
                )
                .exit();
        }
    }
    exit::status(run(&args))
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    if args.source.is_empty() {
        run_one(args)
    } else {
        run_mixture(args)
    }
}

/// The order of every source.
fn order(args: &Args) -> DocOrder {
    match args.order {
        OrderArg::Sequential => DocOrder::Sequential,
        OrderArg::Shuffled => DocOrder::Shuffled { seed: args.seed },
    }
}

/// The packing the arguments ask for (sizes, schedule, max_docs, token type, positions)
/// and the rank, on the builder of one source of documents or of a mixture of them (each
/// has these settings by these names).
macro_rules! packed_as_asked {
    ($builder:expr, $args:expr) => {{
        let args: &Args = $args;
        let mut builder = $builder
            .tokens_per_batch(args.tokens_per_batch)
            .max_seq_len(args.max_seq_len)
            .shard(args.rank, args.world_size)
            .token_type(args.dtype.into())
            .positions(args.positions);
        if let Some(d) = args.max_docs {
            builder = builder.max_docs(d);
        }
        if let Some(Schedule(entries)) = &args.schedule {
            builder = builder.schedule(entries.clone());
        }
        builder
    }};
}

/// The steps of one source of documents.
fn run_one(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let shards = shards::open(&args.paths)?;
    let (files, tokens, format) = (shards.shards().len(), shards.tokens(), shards.format());
    let order = order(args);
    let mut builder = packed_as_asked!(Documents::builder(shards).order(order), args);
    if let Some(bos) = args.bos {
        builder = builder.bos(bos);
    }
    let built = Instant::now();
    let docs = builder.build()?;
    let built = built.elapsed();
    let largest = docs.schedule().largest();
    let header = |device: &str| {
        say!(
            "{files} shard(s) of {format} tokens, {tokens} tokens; documents from bos {}, \
             {:?}, rank {}/{}; steps of up to {} + 1 tokens as {}, cut at {}, cu_seqlens of \
             up to {}; on {device}",
            docs.bos(),
            order,
            args.rank,
            args.world_size,
            largest.tokens,
            docs.token_type(),
            largest.max_seq_len,
            largest.max_docs,
        );
        say!(
            "built in {:.1} ms ({} shard(s) indexed up front)",
            built.as_secs_f64() * 1e3,
            docs.index_stats().at_start
        );
    };
    let steps = docs
        .iter()
        .take(usize::try_from(args.steps).unwrap_or(usize::MAX));
    stream(args, docs.config(), docs.decoder(), steps, &header)?;
    report(&docs, args.steps)
}

/// The steps of a mixture of sources of documents.
fn run_mixture(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let order = order(args);
    let mut sources = Vec::with_capacity(args.source.len());
    let mut about = Vec::with_capacity(args.source.len());
    for pattern in &args.source {
        let shards = shards::open(std::slice::from_ref(pattern))?;
        about.push(format!(
            "{pattern}: {} shard(s) of {} tokens, {} tokens",
            shards.shards().len(),
            shards.format(),
            shards.tokens()
        ));
        let mut source = Documents::builder(shards).order(order);
        if let Some(bos) = args.bos {
            source = source.bos(bos);
        }
        sources.push(source);
    }
    let mixture = Mixture::documents(sources)
        .seed(args.mix_seed)
        .stop(args.stop.into())
        .start_step(args.start_step);
    let mut builder = packed_as_asked!(mixture, args);
    if !args.weight.is_empty() {
        builder = builder.weights(args.weight.clone());
    }
    let built = Instant::now();
    let mix = builder.build()?;
    let built = built.elapsed();
    let largest = mix.schedule().largest();
    let header = |device: &str| {
        for (s, line) in about.iter().enumerate() {
            say!("source {s} (weight {:.3}): {line}", mix.shares()[s]);
        }
        say!(
            "a mixture of {} sources of documents from bos {}, {order:?}, mixture seed {}, \
             stop {}, rank {}/{}; steps of up to {} + 1 tokens as {}, cut at {}, cu_seqlens \
             of up to {}; on {device}",
            mix.len(),
            mix.bos(),
            mix.seed(),
            mix.stop().name(),
            args.rank,
            args.world_size,
            largest.tokens,
            mix.token_type(),
            largest.max_seq_len,
            largest.max_docs,
        );
        let up_front: u64 = mix.index_stats().iter().map(|s| s.at_start).sum();
        say!(
            "built in {:.1} ms ({up_front} shard(s) indexed up front)",
            built.as_secs_f64() * 1e3,
        );
    };
    let steps = mix
        .iter()
        .take(usize::try_from(args.steps).unwrap_or(usize::MAX));
    let config = mix.config().locator(Arc::new(mix.clone()));
    stream(args, config, mix.decoder(), steps, &header)?;
    report_mixture(&mix, args.steps)
}

/// Runs `steps` through a pipeline of `config` (with the backend, threads and trace the
/// arguments ask for), printing `header` first.
fn stream<D, I>(
    args: &Args,
    mut config: ConfigBuilder,
    decoder: D,
    steps: I,
    header: &dyn Fn(&str),
) -> Result<(), Box<dyn std::error::Error>>
where
    D: Decode,
    I: Iterator<Item = D::Sample> + Send + 'static,
{
    if let Some(n) = args.threads {
        config = config.decode_threads(n);
    }
    let (config, trace) = TraceFile::before_run(config, args.trace.as_deref())?;
    let built = backend::build(config, args.cuda)?;
    header(&built.device());
    match built {
        #[cfg(feature = "cuda")]
        Built::Cuda(config, _) => {
            say!("{config}");
            // Stand-in for the training step: wait (host-side) until the step is on the
            // device. A trainer would `wait_on` its stream and release fenced on it.
            let pipeline = Pipeline::new(config, decoder, steps)?;
            drive(pipeline, args.steps, trace, |batch| batch.synchronize())
        }
        Built::Cpu(config) => {
            say!("{config}");
            let mut checksum = 0u64;
            drive(
                Pipeline::new(config, decoder, steps)?,
                args.steps,
                trace,
                |batch| {
                    // Stand-in for the training step: read the step's document boundaries.
                    let cu = batch.field_bytes("cu_seqlens").unwrap_or_default();
                    for entry in cu.chunks_exact(4) {
                        checksum = checksum.wrapping_add(u64::from(entry[0]));
                    }
                    Ok(())
                },
            )?;
            say!("checksum {checksum}");
            Ok(())
        }
    }
}

/// Prints where the walk stands after `steps` steps (what a checkpoint then holds) and
/// how the shards were indexed.
fn report(docs: &Documents, steps: u64) -> Result<(), Box<dyn std::error::Error>> {
    let state = docs.checkpoint_after(None, steps)?;
    let index = docs.index_stats();
    say!(
        "after step {}: epoch {}, shard {}, document {}; shards indexed: {} of {} ({} up \
         front, {} ahead of the walk, {} by a waiting step)",
        state.step,
        state.epoch,
        state.shard,
        state.doc,
        index.indexed,
        index.shards,
        index.at_start,
        index.ahead,
        index.on_walk,
    );
    Ok(())
}

/// Prints where a mixture stands after `steps` steps: the documents consumed and each
/// source's place.
fn report_mixture(mix: &Mixture<Documents>, steps: u64) -> Result<(), Box<dyn std::error::Error>> {
    let state = mix.checkpoint_after(None, steps)?;
    say!(
        "after step {}: {} documents of the mixture consumed",
        state.step,
        state.consumed
    );
    for (s, (c, index)) in state.sources.iter().zip(mix.index_stats()).enumerate() {
        say!(
            "  source {s}: epoch {}, shard {}, document {}; shards indexed: {} of {}",
            c.epoch,
            c.shard,
            c.doc,
            index.indexed,
            index.shards
        );
    }
    Ok(())
}

/// Pops `limit` steps (fewer if the source ends first), hands each to `step`, releases
/// it; prints the rates and the stats and writes the trace into its file.
fn drive<B: Backend>(
    mut pipeline: Pipeline<B>,
    limit: u64,
    trace: Option<TraceFile>,
    mut step: impl FnMut(&Batch<B>) -> pinring::Result<()>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut tokens = 0u64;
    let popped = pop_each(&mut pipeline, limit, |batch| {
        step(batch)?;
        // dims[2] is the step's N: its inputs.
        tokens += batch.dims()[2];
        Ok(())
    })?;
    let (steps, elapsed) = (popped.batches, popped.elapsed.as_secs_f64());
    let stats = pipeline.stats();
    say!(
        "{steps} steps in {elapsed:.3} s: {:.0} steps/s, {:.1} M tokens/s",
        steps as f64 / elapsed,
        tokens as f64 / elapsed / 1e6,
    );
    say!("{stats}");
    if let Some(trace) = trace {
        trace.write(&pipeline)?;
    }
    Ok(())
}
