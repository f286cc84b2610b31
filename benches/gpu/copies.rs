//! Section `copies`: how a run's bytes are best enqueued, `CopyCalls::PerPiece` (one
//! `cuMemcpyHtoDAsync` per piece) against `CopyCalls::Batched` (one `cuMemcpyBatchAsync`
//! per run), on 256 KiB batches of a decoder that writes nothing (the copy path alone): with
//! a huge-page ring (its slots 2 MiB apart, so a run of 16 batches is 16 pieces) and with
//! normal pages (a run is one piece). Passes alternate; medians of [`PASSES`].

use std::time::{Duration, Instant};

use pinring::{CopyCalls, Cuda, CudaOptions, Fence, Pipeline};
use pinring_benches::median;

use crate::harness::{s, Gpu, Res};
use crate::nothing::{nothing, nothing_builder};
use crate::report::{row, stats_line};
use crate::small::PASSES;

/// 256 KiB, the small section's batch.
const BATCH: usize = 16 * 4097 * 4;

/// One pass: batches/s of a pipeline copying with `calls`, its consumer popping and
/// releasing at once (`Fence::Sync`: nothing reads the slots); and the copy calls the
/// backend ended with.
fn pass(gpu: &Gpu, calls: CopyCalls, huge: bool, label: &str) -> Res<(f64, CopyCalls)> {
    const N: usize = 100_000;
    const WARM: usize = 200;
    gpu.bind()?;
    let config = nothing_builder(BATCH, 128, 32)
        .huge_pages(huge)
        .cuda(CudaOptions::ordinal(0).copies(calls))
        .build()
        .map_err(s)?;
    let mut p: Pipeline<Cuda> =
        Pipeline::new(config, nothing(), std::iter::repeat(())).map_err(s)?;
    let mut start = None;
    let mut n = 0;
    while n < N {
        let batch = p.pop().map_err(s)?.ok_or("endless source ended")?;
        batch.release(Fence::Sync).map_err(|e| s(e.error))?;
        match &start {
            None if n + 1 == WARM => {
                start = Some((Instant::now(), p.stats()));
                n = 0;
            }
            None => n += 1,
            Some((t, _)) if t.elapsed() > Duration::from_secs(2) => break,
            Some(_) => n += 1,
        }
    }
    let (t, before) = start.ok_or("no warm-up")?;
    let wall = t.elapsed();
    stats_line(label, &before, &p.stats(), wall);
    Ok((n as f64 / wall.as_secs_f64(), p.backend().copy_calls()))
}

pub fn copies(gpu: &Gpu) -> Res {
    for (huge, layout) in [
        (true, "huge-page ring: a piece per batch"),
        (false, "normal pages: a piece per run"),
    ] {
        let (mut per_piece, mut batched) = (Vec::new(), Vec::new());
        let mut used = CopyCalls::PerPiece;
        for i in 0..PASSES {
            let tag = if huge { "huge" } else { "normal" };
            per_piece.push(
                pass(
                    gpu,
                    CopyCalls::PerPiece,
                    huge,
                    &format!("copies {tag} per-piece {i}"),
                )?
                .0,
            );
            let (rate, calls) = pass(
                gpu,
                CopyCalls::Batched,
                huge,
                &format!("copies {tag} batched {i}"),
            )?;
            batched.push(rate);
            used = calls;
        }
        let (a, b) = (median(&mut per_piece), median(&mut batched));
        let note = if used == CopyCalls::Batched {
            format!("batched {:.0}% of per-piece", 100.0 * b / a)
        } else {
            "the driver has no cuMemcpyBatchAsync (or refused it): both ran per piece".into()
        };
        row(
            &format!("copies, 256 KiB, {layout}"),
            &format!("batched {b:.0} / per piece {a:.0} batches/s"),
            &format!("{note}; H128 D32, release(Sync), median of {PASSES}"),
            "-",
            None,
        );
    }
    Ok(())
}
