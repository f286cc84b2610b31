//! Token batches from the shard (the small, large, scaling and explore sections): the
//! pipeline, its knobs, and a consumer that drives it as a trainer would.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pinring::cudarc::driver::CudaStream;
use pinring::source::{Order, Sampler, TokenShards, TokenType, Tokens};
use pinring::{Config, CuStream, Cuda, CudaOptions, Fence, Pipeline};

use pinring_benches::{cores, cores_but};

use crate::harness::{s, Gpu, Res};
use crate::report::{context_switches, stats_line};
use crate::trace::{write_trace, TRACE_DIR};

/// Settings the explore section varies (`None`: the default).
#[derive(Debug, Clone, Copy, Default)]
pub struct Knobs {
    pub threads: Option<usize>,
    pub host_slots: Option<usize>,
    pub device_slots: Option<usize>,
    pub spin: Option<Duration>,
    /// Copy thread on core 0, decode workers on the other cores.
    pub pin: bool,
    /// Batches the source holds (endless when `None`).
    pub batches: Option<usize>,
    /// The trace on with this many spans (for the slot timeline).
    pub trace: Option<usize>,
}

impl Knobs {
    /// `host` host slots and `device` device slots, with decode threads leaving four
    /// cores to the copy, completion, feeder and consumer threads (the sizing guide's
    /// C - 4); the rest as by default.
    pub fn tuned(host: usize, device: usize) -> Knobs {
        Knobs {
            threads: Some(cores_but(4)),
            host_slots: Some(host),
            device_slots: Some(device),
            ..Knobs::default()
        }
    }

    /// These knobs with `threads` decode threads.
    pub fn with_threads(self, threads: usize) -> Knobs {
        Knobs {
            threads: Some(threads),
            ..self
        }
    }
}

/// `shard`'s windows of `t1` tokens at random offsets of this `seed`.
pub fn random_windows(shard: &str, t1: u64, seed: u64) -> Res<Sampler<TokenShards>> {
    TokenShards::open([shard])
        .map_err(s)?
        .windows(t1)
        .order(Order::Random { seed })
        .build()
        .map_err(s)
}

/// How a token consumer names its stream.
#[derive(Clone)]
pub enum Consumer {
    /// A stream of its own: `wait_on` it and `release(Fence::Stream)` on it per batch.
    PerBatch,
    /// The pipeline's declared consumer stream (`ConfigBuilder::consumer_stream`): `pop`
    /// binds each batch to it, `release(Fence::Bound)`.
    Declared(Arc<CudaStream>),
}

/// A pipeline of `b` windows of `t1` tokens at random offsets, widened to i32.
pub fn token_pipeline(
    shard: &str,
    b: usize,
    t1: u64,
    threads: Option<usize>,
) -> Res<Pipeline<Cuda>> {
    let knobs = Knobs {
        threads,
        ..Knobs::default()
    };
    token_pipeline_with(shard, b, t1, knobs)
}

pub fn token_pipeline_with(shard: &str, b: usize, t1: u64, knobs: Knobs) -> Res<Pipeline<Cuda>> {
    token_pipeline_for(shard, b, t1, knobs, &Consumer::PerBatch)
}

/// As [`token_pipeline_with`], for `consumer` (a declared stream is set in the config).
pub fn token_pipeline_for(
    shard: &str,
    b: usize,
    t1: u64,
    knobs: Knobs,
    consumer: &Consumer,
) -> Res<Pipeline<Cuda>> {
    let decoder = Tokens::new(TokenType::I32);
    let sampler = random_windows(shard, t1, 1)?;
    let mut builder = Config::builder()
        .batch_size(b)
        .bytes_per_sample(decoder.sample_bytes(t1))
        .pop_timeout(Duration::from_secs(20))
        .batch_scheduling(crate::sched::batch_scheduling());
    if let Some(n) = knobs.threads {
        builder = builder.decode_threads(n);
    }
    if let Some(n) = knobs.host_slots {
        builder = builder.host_slots(n);
    }
    if let Some(n) = knobs.device_slots {
        builder = builder.device_slots(n);
    }
    if let Some(n) = knobs.spin {
        builder = builder.spin(n);
    }
    if knobs.pin {
        builder = builder.copy_core(0).decode_cores(1..cores().max(2));
    }
    if let Some(spans) = knobs.trace {
        builder = builder.trace(spans);
    } else if std::env::var_os(TRACE_DIR).is_some() {
        builder = builder.trace(1 << 16);
    }
    let mut builder = builder.cuda(CudaOptions::ordinal(0));
    if let Consumer::Declared(stream) = consumer {
        builder = builder.consumer_stream(CuStream::from(stream));
    }
    let config = builder.build().map_err(s)?;
    let windows = sampler
        .iter()
        .take(knobs.batches.map_or(usize::MAX, |n| n * b));
    Pipeline::new(config, decoder, windows).map_err(s)
}

/// Runs a token pipeline as a trainer would consume it (`wait_on` its stream, release
/// fenced on it) for `n` batches after a warm-up or `secs` seconds, whichever ends
/// first; returns (batches, seconds, the busiest stage).
pub fn drive_tokens(
    gpu: &Gpu,
    name: &str,
    p: &mut Pipeline<Cuda>,
    n: usize,
    secs: f64,
) -> Res<(usize, f64, String)> {
    drive_tokens_as(gpu, name, p, n, secs, &Consumer::PerBatch)
}

/// As [`drive_tokens`], the consumer naming its stream as `consumer` says (a pipeline
/// made for it by [`token_pipeline_for`]).
pub fn drive_tokens_as(
    gpu: &Gpu,
    name: &str,
    p: &mut Pipeline<Cuda>,
    n: usize,
    secs: f64,
    consumer: &Consumer,
) -> Res<(usize, f64, String)> {
    const WARM: usize = 20;
    gpu.bind()?;
    let (stream, declared) = match consumer {
        Consumer::PerBatch => (gpu.stream()?, false),
        Consumer::Declared(stream) => (stream.clone(), true),
    };
    let cs = CuStream::from(&stream);
    let mut start = None;
    let mut count = 0usize;
    // Diagnostic (PINRING_BENCH_CONSUMER_SPLIT): the consumer's time in pop, wait_on
    // and release, ns summed after the warm-up.
    let split = std::env::var_os("PINRING_BENCH_CONSUMER_SPLIT").is_some();
    let mut spent = [0u128; 3];
    loop {
        let t0 = Instant::now();
        let Some(mut batch) = p.pop().map_err(s)? else {
            break;
        };
        let t1 = Instant::now();
        if !declared {
            batch.wait_on(&cs).map_err(s)?;
        }
        let t2 = Instant::now();
        let fence = if declared {
            Fence::Bound
        } else {
            Fence::Stream(&cs)
        };
        batch.release(fence).map_err(|e| s(e.error))?;
        if split && start.is_some() {
            let t3 = Instant::now();
            spent[0] += (t1 - t0).as_nanos();
            spent[1] += (t2 - t1).as_nanos();
            spent[2] += (t3 - t2).as_nanos();
        }
        if count + 1 == WARM {
            stream.synchronize().map_err(s)?;
            start = Some((Instant::now(), p.stats()));
        }
        count += 1;
        if let Some((t0, _)) = &start {
            if count >= WARM.saturating_add(n) || t0.elapsed().as_secs_f64() >= secs {
                break;
            }
        }
    }
    stream.synchronize().map_err(s)?;
    let (t0, before) = start.ok_or("source ended during the warm-up")?;
    let wall = t0.elapsed();
    if split {
        let n = (count - WARM).max(1) as f64;
        println!(
            "SPLIT\t{name}\tper batch: pop {:.2} us, wait_on {:.2} us, release {:.2} us",
            spent[0] as f64 / n / 1e3,
            spent[1] as f64 / n / 1e3,
            spent[2] as f64 / n / 1e3
        );
    }
    let busiest = stats_line(name, &before, &p.stats(), wall);
    context_switches(name);
    write_trace(p, name)?;
    Ok((count - WARM, wall.as_secs_f64(), busiest))
}
