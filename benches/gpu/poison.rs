//! Section `poison`: what the poison mode (`ConfigBuilder::poison_released`) costs, off
//! against on, on 256 KiB batches of a decoder that writes nothing: the consumer binds
//! each batch to its stream and releases it fenced there, so every release enqueues the
//! fill (a `cuMemsetD8Async` of the slot on its fence stream, three driver calls). Passes
//! alternate; medians of [`PASSES`].

use std::time::{Duration, Instant};

use pinring::{CuStream, Cuda, CudaOptions, Fence, Pipeline};
use pinring_benches::median;

use crate::harness::{s, Gpu, Res};
use crate::nothing::{nothing, nothing_builder};
use crate::report::{row, stats_line};
use crate::small::PASSES;

/// 256 KiB, the small section's batch.
const BATCH: usize = 16 * 4097 * 4;

/// Batches/s over about 2 s, poison mode `on`.
fn pass(gpu: &Gpu, on: bool, label: &str) -> Res<f64> {
    const WARM: usize = 200;
    gpu.bind()?;
    let stream = gpu.stream()?;
    let cs = CuStream::from(&stream);
    let config = nothing_builder(BATCH, 128, 32)
        .poison_released(on)
        .cuda(CudaOptions::ordinal(0))
        .build()
        .map_err(s)?;
    if config.poison_released() != on {
        return Err("PINRING_POISON_RELEASED=1 is set: the off passes would poison".into());
    }
    let mut p: Pipeline<Cuda> =
        Pipeline::new(config, nothing(), std::iter::repeat(())).map_err(s)?;
    let mut start = None;
    let mut n = 0usize;
    loop {
        let mut batch = p.pop().map_err(s)?.ok_or("endless source ended")?;
        batch.wait_on(&cs).map_err(s)?;
        batch.release(Fence::Stream(&cs)).map_err(|e| s(e.error))?;
        n += 1;
        if n == WARM {
            stream.synchronize().map_err(s)?;
            start = Some((Instant::now(), p.stats(), n));
        }
        if let Some((t, before, at)) = &start {
            if t.elapsed() >= Duration::from_secs(2) {
                stream.synchronize().map_err(s)?;
                let wall = t.elapsed();
                stats_line(label, before, &p.stats(), wall);
                return Ok((n - at) as f64 / wall.as_secs_f64());
            }
        }
    }
}

pub fn poison(gpu: &Gpu) -> Res {
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for i in 0..PASSES {
        off.push(pass(gpu, false, &format!("poison off {i}"))?);
        on.push(pass(gpu, true, &format!("poison on {i}"))?);
    }
    let (off, on) = (median(&mut off), median(&mut on));
    row(
        "poison mode, 256 KiB batches",
        &format!("on {on:.0} / off {off:.0} batches/s"),
        &format!(
            "on is {:.0}% of off; H128 D32, wait_on + release(Stream), median of {PASSES}",
            100.0 * on / off
        ),
        "-",
        None,
    );
    Ok(())
}
