//! Streams next-token training batches from token shards through the pipeline and
//! reports batches/s and the pipeline's stats.
//!
//! ```text
//! cargo run --release --example make_shard -- /tmp/train_000.bin 100000000
//! cargo run --release --example train_tokens -- /tmp/train_*.bin
//! cargo run --release --example train_tokens -- --seq 4096 --batch 16 --dtype i32 \
//!     --order shuffle --seed 1 --batches 2000 '/data/fineweb_train_*.bin'
//! ```
//!
//! Each PATH is a shard file or a pattern (`*`, `?` in the file name). Batches are
//! `B` windows of `T + 1` tokens, split into inputs and targets and widened to the
//! dtype on the decode pool ([`NextToken`]). A malformed file ends the run with the
//! error's message and a non-zero exit status.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use pinring::source::{NextToken, Order, TokenShard, TokenShards, TokenType};
use pinring::{Backend, Batch, Config, Fence, Pipeline};

const USAGE: &str = "usage: train_tokens [--seq T] [--batch B] [--dtype u16|i32|i64] \
    [--order seq|shuffle|random] [--seed S] [--batches N] [--threads N] \
    [--rank R --world W] [--cuda ORDINAL] PATH...";

struct Args {
    seq: u64,
    batch: usize,
    dtype: TokenType,
    order: String,
    seed: u64,
    batches: u64,
    threads: Option<usize>,
    rank: u64,
    world: u64,
    cuda: Option<usize>,
    paths: Vec<String>,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        seq: 1024,
        batch: 16,
        dtype: TokenType::I32,
        order: "shuffle".into(),
        seed: 0,
        batches: 1000,
        threads: None,
        rank: 0,
        world: 1,
        cuda: None,
        paths: Vec::new(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        let num = |name: &str, v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{name}: `{v}` is not a number"))
        };
        match arg.as_str() {
            "--seq" => a.seq = num("--seq", value("--seq")?)?,
            "--batch" => a.batch = num("--batch", value("--batch")?)? as usize,
            "--seed" => a.seed = num("--seed", value("--seed")?)?,
            "--batches" => a.batches = num("--batches", value("--batches")?)?,
            "--threads" => a.threads = Some(num("--threads", value("--threads")?)? as usize),
            "--rank" => a.rank = num("--rank", value("--rank")?)?,
            "--world" => a.world = num("--world", value("--world")?)?,
            "--order" => a.order = value("--order")?,
            "--cuda" => a.cuda = Some(num("--cuda", value("--cuda")?)? as usize),
            "--dtype" => {
                a.dtype = match value("--dtype")?.as_str() {
                    "u16" => TokenType::U16,
                    "i32" => TokenType::I32,
                    "i64" => TokenType::I64,
                    other => return Err(format!("--dtype: unknown `{other}`")),
                }
            }
            "-h" | "--help" => return Err(String::new()),
            flag if flag.starts_with("--") => return Err(format!("unknown option {flag}")),
            _ => a.paths.push(arg),
        }
    }
    if a.paths.is_empty() {
        return Err("no shard files given".into());
    }
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse() {
        Ok(args) => args,
        Err(why) => {
            if !why.is_empty() {
                eprintln!("error: {why}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn open(paths: &[String]) -> pinring::Result<TokenShards> {
    let mut shards: Vec<Arc<TokenShard>> = Vec::new();
    for p in paths {
        if p.contains(['*', '?']) {
            shards.extend(TokenShards::glob(p)?.shards().iter().cloned());
        } else {
            shards.push(Arc::new(TokenShard::open(p)?));
        }
    }
    TokenShards::from_shards(shards)
}

fn run(args: &Args) -> pinring::Result<()> {
    let shards = open(&args.paths)?;
    let (files, tokens) = (shards.shards().len(), shards.tokens());
    let order = match args.order.as_str() {
        "seq" => Order::Sequential,
        "shuffle" => Order::Shuffled { seed: args.seed },
        "random" => Order::Random { seed: args.seed },
        other => {
            eprintln!("error: --order: unknown `{other}`\n{USAGE}");
            std::process::exit(2);
        }
    };
    let sampler = shards
        .windows(args.seq + 1)
        .order(order)
        .shard(args.rank, args.world)
        .build()?;
    let decoder = NextToken::new(args.dtype);
    let mut builder = Config::builder()
        .samples_per_batch(args.batch)
        .bytes_per_sample(decoder.sample_bytes(args.seq + 1));
    if let Some(n) = args.threads {
        builder = builder.decode_threads(n);
    }
    let sample_bytes = decoder.sample_bytes(args.seq + 1);
    let samples = sampler.iter().take(args.batches as usize * args.batch);
    let epoch_len = sampler.epoch_len();
    let header = |config_bytes: usize, device: &str| {
        println!(
            "{files} shard(s), {tokens} tokens; batches of {} × (T = {}) as {}, {:?}, rank {}/{}: \
             {epoch_len} windows per epoch for this rank, {config_bytes} bytes a batch, on {device}",
            args.batch, args.seq, args.dtype, order, args.rank, args.world,
        )
    };
    if let Some(ordinal) = args.cuda {
        #[cfg(feature = "cuda")]
        {
            let config = builder
                .cuda(pinring::CudaOptions::ordinal(ordinal))
                .build()?;
            header(config.batch_bytes(), &format!("cuda:{ordinal}"));
            // Stand-in for the training step: wait (host-side) until the batch is on the
            // device. A trainer would `wait_on` its stream and `release_on` it instead.
            return drive(Pipeline::new(config, decoder, samples)?, |batch| {
                batch.synchronize()
            });
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = ordinal;
            return Err(pinring::Error::Backend {
                call: "--cuda",
                code: 0,
                message: "this build has no cuda feature".into(),
            });
        }
    }
    let config = builder.build()?;
    header(config.batch_bytes(), "the cpu backend");
    let mut checksum = 0u64;
    drive(Pipeline::new(config, decoder, samples)?, |batch| {
        // Stand-in for the training step: touch one value of every sample.
        for sample in batch.bytes().chunks_exact(sample_bytes) {
            checksum = checksum.wrapping_add(u64::from(sample[0]));
        }
        Ok(())
    })?;
    println!("checksum {checksum}");
    Ok(())
}

/// Pops every batch, hands it to `step`, releases it; prints the rate and the stats.
fn drive<B: Backend>(
    mut pipeline: Pipeline<B>,
    mut step: impl FnMut(&Batch<B>) -> pinring::Result<()>,
) -> pinring::Result<()> {
    let start = Instant::now();
    let mut batches = 0u64;
    while let Some(batch) = pipeline.pop()? {
        step(&batch)?;
        batches += 1;
        // The step is finished with the batch (it synchronised), so no fence is needed.
        batch.release(Fence::Sync).map_err(|e| e.error)?;
    }
    let elapsed = start.elapsed();
    let stats = pipeline.stats();
    println!(
        "{batches} batches in {:.3} s: {:.0} batches/s, {:.2} GiB/s",
        elapsed.as_secs_f64(),
        batches as f64 / elapsed.as_secs_f64(),
        stats.throughput(elapsed) / (1u64 << 30) as f64,
    );
    println!("{stats}");
    Ok(())
}
