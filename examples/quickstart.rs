//! Quick start: stream procedurally drawn images through pinring to the device.
//!
//! Each sample is an image id; decoding draws a 32×32 RGB image from it and writes it
//! as normalized f32 CHW straight into the pinned host slot. Runs on CUDA device 0 when
//! there is one (saying why not when there is none), on the device `--cuda N` names, or
//! on the cpu backend with `--cpu`; prints a Stats summary.
//!
//! ```text
//! cargo run --release --example quickstart -- [--batches N] [--cpu | --cuda N]
//! cargo run --release --example quickstart -- --help
//! ```

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use pinring::{decode_fn, Backend, Config, ConfigBuilder, DecodeError, Fence, Pipeline};
use pinring_examples::args::at_least_one;
use pinring_examples::trace::{TraceFile, TRACE_SPANS};
use pinring_examples::{exit, say};

const SIDE: usize = 32;
const CHANNELS: usize = 3;
const SAMPLE_BYTES: usize = SIDE * SIDE * CHANNELS * 4;
const BATCH: usize = 64;

/// Streams batches of procedurally drawn 32×32 RGB images (f32, CHW) through pinring to
/// the device and prints the rate and the pipeline's Stats.
#[derive(Debug, Parser)]
#[command(name = "quickstart", version)]
struct Args {
    /// Batches to stream, of 64 images each (at least 1).
    #[arg(long, value_name = "N", default_value_t = 2_000, value_parser = at_least_one)]
    batches: u64,
    /// Use the cpu backend (device slots in ordinary memory), even where CUDA works.
    #[arg(long, conflicts_with = "cuda")]
    cpu: bool,
    /// Use CUDA device N, and fail if it cannot be used. Without --cpu or --cuda: device
    /// 0 when the CUDA driver loads and has a device, else the cpu backend, saying why.
    #[arg(long, value_name = "N")]
    cuda: Option<usize>,
    /// Record a timeline of the loader (per-batch spans of every stage) and write it to
    /// FILE as Chrome trace JSON, for https://ui.perfetto.dev or chrome://tracing.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
}

/// Draws image `id`: a few coloured discs on a gradient, as f32 in [0, 1], CHW.
fn draw(id: u64, out: &mut [u8]) -> Result<(), DecodeError> {
    if out.len() != SAMPLE_BYTES {
        return Err(DecodeError::new(format!(
            "slot of {} bytes, want {SAMPLE_BYTES}",
            out.len()
        )));
    }
    let mut rng = id.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng >> 11) as f32 / (1u64 << 53) as f32
    };
    let discs: [[f32; 6]; 3] =
        std::array::from_fn(|_| [next(), next(), 0.1 + 0.2 * next(), next(), next(), next()]);
    for c in 0..CHANNELS {
        for y in 0..SIDE {
            for x in 0..SIDE {
                let (fx, fy) = (x as f32 / SIDE as f32, y as f32 / SIDE as f32);
                let mut v = 0.25 * (fx + fy) * (c as f32 + 1.0) / 3.0;
                for d in &discs {
                    if (fx - d[0]).powi(2) + (fy - d[1]).powi(2) < d[2] * d[2] {
                        v = d[3 + c];
                    }
                }
                let at = ((c * SIDE + y) * SIDE + x) * 4;
                out[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
        }
    }
    Ok(())
}

fn builder(args: &Args) -> ConfigBuilder {
    let builder = Config::builder()
        .batch_size(BATCH)
        .bytes_per_sample(SAMPLE_BYTES);
    match args.trace {
        Some(_) => builder.trace(TRACE_SPANS),
        None => builder,
    }
}

pub(crate) fn main() -> ExitCode {
    let args = Args::parse();
    // The source is the ids 0..batches × 64; checked, so a huge --batches is refused
    // like any bad argument rather than wrapped into a short run.
    match args.batches.checked_mul(BATCH as u64) {
        Some(samples) => exit::status(run(&args, samples)),
        None => exit::bad_argument(format!(
            "--batches {0} is too many: {0} × {BATCH} images overflow a u64",
            args.batches
        )),
    }
}

/// The backend to run on.
enum Choice {
    Cpu,
    Cuda(usize),
}

/// Streams `samples` images on the backend the arguments choose; prints the report.
fn run(args: &Args, samples: u64) -> Result<(), String> {
    let choice = match (args.cpu, args.cuda) {
        (true, _) => Choice::Cpu,
        (false, Some(ordinal)) => Choice::Cuda(ordinal),
        (false, None) => match cuda_devices() {
            Ok(n) if n > 0 => Choice::Cuda(0),
            Ok(_) => fall_back("the CUDA driver reports no device"),
            Err(why) => fall_back(&format!("CUDA cannot be used here: {why}")),
        },
    };
    match choice {
        Choice::Cpu => stream(
            builder(args).build().map_err(|e| e.to_string())?,
            samples,
            args.trace.as_deref(),
            "cpu",
        ),
        Choice::Cuda(ordinal) => stream_cuda(args, ordinal, samples),
    }
}

/// Says on stderr (stdout is the report) why the run uses the cpu backend though no
/// backend was named, and how to name one.
fn fall_back(why: &str) -> Choice {
    eprintln!("note: running on the cpu backend, because {why}");
    eprintln!(
        "note: to choose the backend, pass --cpu (the cpu backend, without this note) or \
         --cuda N (CUDA device N, or an error saying why it cannot be used)"
    );
    Choice::Cpu
}

/// Pops every batch, waits until it is on the device, releases it; prints the config,
/// the rate and the Stats, and writes the trace.
fn stream<B: Backend>(
    config: Config<B>,
    samples: u64,
    trace: Option<&Path>,
    backend: &str,
) -> Result<(), String> {
    let summary = config.to_string();
    let mut pipeline =
        Pipeline::new(config, decode_fn(draw), 0..samples).map_err(|e| e.to_string())?;
    say!(
        "pinring quickstart on the {backend} backend: {} batches of {BATCH} images \
         ({} KiB an image, {} KiB a batch)",
        samples / BATCH as u64,
        SAMPLE_BYTES / 1024,
        BATCH * SAMPLE_BYTES / 1024,
    );
    say!("{summary}");
    let start = Instant::now();
    let streamed = (|| -> pinring::Result<()> {
        while let Some(batch) = pipeline.pop()? {
            // A trainer would enqueue its kernels here (`batch.wait_on(&stream)`) and
            // release with `Fence::Stream(&stream)`; this example has none, so it waits
            // on the host.
            batch.synchronize()?;
            batch.release(Fence::Sync)?;
        }
        Ok(())
    })();
    let secs = start.elapsed().as_secs_f64();
    streamed.map_err(|e| e.to_string())?;
    let stats = pipeline.stats();
    say!(
        "streamed in {secs:.2} s from the first pop: {:.0} batches/s, {:.2} GiB/s",
        stats.batches as f64 / secs,
        stats.bytes as f64 / secs / (1u64 << 30) as f64
    );
    say!("{stats}");
    if let Some(path) = trace {
        TraceFile::create(path)?.write(&pipeline)?;
    }
    Ok(())
}

/// Devices the CUDA driver reports, or why it cannot be used.
#[cfg(feature = "cuda")]
fn cuda_devices() -> Result<usize, String> {
    pinring::Cuda::device_count().map_err(|e| e.to_string())
}

#[cfg(not(feature = "cuda"))]
fn cuda_devices() -> Result<usize, String> {
    Err("this build has no `cuda` feature".into())
}

#[cfg(feature = "cuda")]
fn stream_cuda(args: &Args, ordinal: usize, samples: u64) -> Result<(), String> {
    let config = builder(args)
        .cuda(pinring::CudaOptions::ordinal(ordinal))
        .build()
        .map_err(|e| e.to_string())?;
    let backend = format!("cuda (device {ordinal})");
    stream(config, samples, args.trace.as_deref(), &backend)
}

#[cfg(not(feature = "cuda"))]
fn stream_cuda(_args: &Args, _ordinal: usize, _samples: u64) -> Result<(), String> {
    Err("--cuda: this build has no `cuda` feature (build with the default features)".into())
}
