//! Quick start: stream procedurally drawn images through pinring to the device.
//!
//! Each sample is an image id; decoding draws a 32×32 RGB image from it and writes it
//! as normalized f32 CHW straight into the pinned host slot. Runs on the first CUDA
//! device when there is one, else on the cpu backend; prints a Stats summary.
//!
//! ```text
//! cargo run --release --example quickstart [BATCHES]
//! ```

use std::time::Instant;

use pinring::{decode_fn, Backend, Config, ConfigBuilder, DecodeError, Fence, Pipeline, Stats};

const SIDE: usize = 32;
const CHANNELS: usize = 3;
const SAMPLE_BYTES: usize = SIDE * SIDE * CHANNELS * 4;
const BATCH: usize = 64;

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

fn builder() -> ConfigBuilder {
    Config::builder()
        .samples_per_batch(BATCH)
        .bytes_per_sample(SAMPLE_BYTES)
}

/// Pops every batch, waits until it is on the device, releases it.
fn stream<B: Backend>(config: Config<B>, batches: u64) -> pinring::Result<(Stats, f64)> {
    let mut pipeline = Pipeline::new(config, decode_fn(draw), 0..batches * BATCH as u64)?;
    let start = Instant::now();
    while let Some(batch) = pipeline.pop()? {
        // A trainer would enqueue its kernels here (`batch.wait_on(&stream)`) and release
        // with `Fence::Stream(&stream)`; this example has none, so it waits on the host.
        batch.synchronize()?;
        batch.release(Fence::Sync).map_err(|e| e.error)?;
    }
    Ok((pipeline.stats(), start.elapsed().as_secs_f64()))
}

fn main() -> pinring::Result<()> {
    let batches: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000);
    let (backend, (stats, secs)) = match cuda_config() {
        Some(config) => ("cuda (device 0)", stream(config?, batches)?),
        None => ("cpu", stream(builder().build()?, batches)?),
    };
    println!("pinring quickstart on the {backend} backend");
    println!(
        "{} batches of {BATCH} images ({} KiB each) in {secs:.2} s: {:.0} batches/s, {:.2} GB/s",
        stats.batches,
        BATCH * SAMPLE_BYTES / 1024,
        stats.batches as f64 / secs,
        stats.bytes as f64 / secs / 1e9
    );
    println!("{stats}");
    Ok(())
}

#[cfg(feature = "cuda")]
fn cuda_config() -> Option<pinring::Result<Config<pinring::Cuda>>> {
    match pinring::Cuda::device_count() {
        Ok(n) if n > 0 => Some(
            builder()
                .cuda(pinring::CudaOptions::ordinal(0))
                .build()
                .map_err(Into::into),
        ),
        _ => None,
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda_config() -> Option<pinring::Result<Config<pinring::Cpu>>> {
    None
}
