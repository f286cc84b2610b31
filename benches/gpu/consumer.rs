//! Section `consumer`: the consumer's host cost of pop + release, with the batch already
//! there.

use std::time::{Duration, Instant};

use pinring::{Config, CuStream, CudaOptions, DeviceState, Fence, Pipeline, TryPop};
use pinring_benches::percentile;

use crate::harness::{s, Gpu, Res};
use crate::nothing::nothing;
use crate::report::row;

pub fn consumer(gpu: &Gpu) -> Res {
    const SLOTS: usize = 64;
    const ROUNDS: usize = 60;
    gpu.bind()?;
    let config = Config::builder()
        .batch_size(1)
        .bytes_per_sample(4096)
        .host_slots(8)
        .device_slots(SLOTS)
        .decode_threads(2)
        .pop_timeout(Duration::from_secs(20))
        .cuda(CudaOptions::ordinal(0))
        .build()
        .map_err(s)?;
    let mut p = Pipeline::new(config, nothing(), std::iter::repeat(())).map_err(s)?;
    let stream = gpu.ctx.new_stream().map_err(s)?;
    let cs = CuStream::from(&stream);
    let (mut fenced, mut synced, mut waited) = (Vec::new(), Vec::new(), 0usize);
    for round in 0..ROUNDS {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !p
            .stats()
            .device_slots
            .iter()
            .all(|&(_, state)| state == DeviceState::Leased)
        {
            if Instant::now() > deadline {
                return Err("device slots never all filled".into());
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        for _ in 0..SLOTS {
            let t = Instant::now();
            let batch = match p.try_pop().map_err(s)? {
                TryPop::Batch(batch) => batch,
                _ => {
                    waited += 1;
                    p.pop().map_err(s)?.ok_or("endless source ended")?
                }
            };
            let result = if round % 2 == 0 {
                batch.release(Fence::Stream(&cs))
            } else {
                batch.release(Fence::Sync)
            };
            let ns = t.elapsed().as_nanos() as f64;
            result.map_err(|e| s(e.error))?;
            if round % 2 == 0 {
                fenced.push(ns);
            } else {
                synced.push(ns);
            }
        }
    }
    stream.synchronize().map_err(s)?;
    fenced.sort_by(f64::total_cmp);
    synced.sort_by(f64::total_cmp);
    let (p50, p99) = (percentile(&fenced, 0.5), percentile(&fenced, 0.99));
    row(
        "pop+release(Stream) p50/p99",
        &format!("{p50:.0} / {p99:.0} ns"),
        &format!(
            "Fence::Sync {:.0} / {:.0} ns; {} samples{}",
            percentile(&synced, 0.5),
            percentile(&synced, 0.99),
            fenced.len() + synced.len(),
            if waited > 0 {
                format!(", {waited} waited")
            } else {
                String::new()
            }
        ),
        "p50 <= 1 us",
        Some(p50 <= 1000.0),
    );
    Ok(())
}
