//! Section `transport`: a decoder that writes nothing, against raw copies from the same
//! memory.

use std::time::Instant;

use pinring::{Fence, Pipeline};
use pinring_benches::median;

use crate::harness::{s, Gpu, Res};
use crate::nothing::{nothing, nothing_config_slots};
use crate::raw::raw_copies;
use crate::report::{row, stats_line, GB};

/// (pipeline GB/s, raw GB/s) for `size`-byte batches.
pub fn transport_once(gpu: &Gpu, size: usize, n: usize, (h, d): (usize, usize)) -> Res<(f64, f64)> {
    const WARM: usize = 10;
    gpu.bind()?;
    let mut p = Pipeline::new(
        nothing_config_slots(size, h, d)?,
        nothing(),
        std::iter::repeat_n((), n + WARM),
    )
    .map_err(s)?;
    let (mut t0, mut t1, mut before) = (None, None, None);
    while let Some(batch) = p.pop().map_err(s)? {
        let k = batch.seq() as usize;
        if k + 1 == WARM {
            batch.synchronize().map_err(s)?;
            t0 = Some(Instant::now());
            before = Some(p.stats());
        }
        if k + 1 == n + WARM {
            batch.synchronize().map_err(s)?;
            t1 = Some(Instant::now());
        }
        // Nothing on the device reads the batch: no fence needed.
        batch.release(Fence::Sync).map_err(|e| s(e.error))?;
    }
    let (t0, t1) = (t0.ok_or("no warm-up")?, t1.ok_or("no last batch")?);
    let pipe = (n * size) as f64 / (t1 - t0).as_secs_f64() / GB;
    let before = before.ok_or("no warm-up")?;
    stats_line(
        &format!("transport_{}MiB", size >> 20),
        &before,
        &p.stats(),
        t1 - t0,
    );
    let raw = size as f64 / raw_copies(gpu, &p, size, n)? / GB;
    Ok((pipe, raw))
}

pub fn transport(gpu: &Gpu) -> Res {
    for (mib, n) in [(1usize, 3000usize), (8, 400), (64, 60)] {
        let size = mib << 20;
        let (mut pipe, mut raw) = (Vec::new(), Vec::new());
        // Slots by the sizing guide's rule: enough of them to cover the per-batch
        // hand-off (pop, release, the copy thread's wake-up), which at 1 MiB (about
        // 20 us a copy) is no longer small beside a copy: 32 MiB of host ring and
        // 8 MiB of device slots, and at least the defaults (H4 D2).
        let slots = ((32 << 20) / size).max(4);
        let slots = (slots, ((8 << 20) / size).max(2));
        for _ in 0..3 {
            let (p, r) = transport_once(gpu, size, n, slots)?;
            pipe.push(p);
            raw.push(r);
        }
        let (p, r) = (median(&mut pipe), median(&mut raw));
        row(
            &format!(
                "transport {mib} MiB (writes nothing), H{} D{}",
                slots.0, slots.1
            ),
            &format!("{p:.1} GB/s"),
            &format!("raw H2D {r:.1} GB/s: {:.1}%", 100.0 * p / r),
            ">= 95% of raw",
            Some(p / r >= 0.95),
        );
    }
    Ok(())
}
