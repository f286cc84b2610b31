//! Section `small`: 256 KiB token batches (16 x 4097 i32), against the copy engine's
//! ceilings and the PyTorch peers.

use std::collections::HashMap;
use std::time::Instant;

use pinring::cudarc::driver::{result, DevicePtr};

use crate::harness::{s, Gpu, Res};
use crate::nothing::{idle_pipeline, nothing_config};
use crate::report::{row, GB};
use crate::tokens::{drive_tokens, token_pipeline_with, Knobs};
use crate::torch::torch_ref;

/// The copy engine's ceilings for small batches' bytes, from registered memory, in
/// batches/s: one `cuMemcpyHtoDAsync` per batch, and one per run of `RUN` contiguous
/// batches (how the pipeline coalesces them). Same bytes and strides as the pipeline's.
pub fn copy_ceilings(gpu: &Gpu, batch: usize) -> Res<(f64, f64)> {
    const RUN: usize = 8;
    const SLOTS: usize = 16;
    const N: usize = 20_000;
    gpu.bind()?;
    let stride = batch.next_multiple_of(4096);
    let p = idle_pipeline(nothing_config(batch, SLOTS)?)?;
    let (base, len) = p.backend().host_ring();
    let stream = gpu.ctx.new_stream().map_err(s)?;
    let dst = stream.alloc_zeros::<u8>(SLOTS * stride).map_err(s)?;
    let dst_ptr = dst.device_ptr(&stream).0;
    let raw = stream.cu_stream();
    let copy = |first: usize, batches: usize| -> Res {
        let bytes = (batches - 1) * stride + batch;
        assert!(first * stride + bytes <= len);
        // SAFETY: slot `first` starts inside the ring (asserted above).
        let start = unsafe { base.add(first * stride) };
        // SAFETY: `bytes` from `start` lie in the idle registered ring (asserted).
        let src = unsafe { std::slice::from_raw_parts(start, bytes) };
        // SAFETY: the destination lies in `dst`, alive until the synchronize below.
        unsafe { result::memcpy_htod_async(dst_ptr + (first * stride) as u64, src, raw) }.map_err(s)
    };
    let rate = |batches: usize| -> Res<f64> {
        for i in 0..16 {
            copy((i * batches) % SLOTS, batches)?;
        }
        stream.synchronize().map_err(s)?;
        let t = Instant::now();
        for i in 0..N / batches {
            copy((i * batches) % SLOTS, batches)?;
        }
        stream.synchronize().map_err(s)?;
        Ok((N / batches * batches) as f64 / t.elapsed().as_secs_f64())
    };
    let one = rate(1)?;
    let run = rate(RUN)?;
    drop(dst);
    Ok((one, run))
}

pub fn small(gpu: &Gpu, shard: &str, torch: &HashMap<String, f64>) -> Res {
    const B: usize = 16;
    const T1: u64 = 4097;
    let batch = B * T1 as usize * 4;
    let (one, batched) = copy_ceilings(gpu, batch)?;
    row(
        "copy ceiling, 256 KiB batches",
        &format!("{one:.0} batches/s"),
        &format!(
            "one cuMemcpyHtoDAsync per batch ({:.1} GB/s)",
            one * batch as f64 / GB
        ),
        "-",
        None,
    );
    row(
        "  batched (8 contiguous batches a copy)",
        &format!("{batched:.0} batches/s"),
        &format!("{:.1} GB/s", batched * batch as f64 / GB),
        "-",
        None,
    );
    // The default config, then configs with enough host slots to keep every stage
    // busy (a slot's round trip through the stages takes far longer than a batch's
    // share of the rate: Little's law), leaving cores to the copy, completion, feeder
    // and consumer threads.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let tuned = |h, d| Knobs {
        threads: Some(cores.saturating_sub(4).max(1)),
        host_slots: Some(h),
        device_slots: Some(d),
        ..Knobs::default()
    };
    let mut best = (0.0, String::new(), String::new());
    for (label, knobs) in [
        ("default (H4 D2)", Knobs::default()),
        ("H128 D32, cores-4 decode threads", tuned(128, 32)),
        (
            "H128 D32, 8 decode threads",
            Knobs {
                threads: Some(8),
                ..tuned(128, 32)
            },
        ),
        (
            "H128 D32, cores-1 decode threads pinned (copy thread on core 0)",
            Knobs {
                threads: Some(cores.saturating_sub(1).max(1)),
                pin: true,
                ..tuned(128, 32)
            },
        ),
    ] {
        let mut p = token_pipeline_with(shard, B, T1, knobs)?;
        let (n, secs, busiest) =
            drive_tokens(gpu, &format!("small {label}"), &mut p, 200_000, 3.0)?;
        let rate = n as f64 / secs;
        if rate > best.0 {
            best = (rate, label.to_string(), busiest);
        }
    }
    let (rate, config, busiest) = best;
    let dl = torch.get("dataloader_small_bps").copied();
    let seed = torch.get("prefetch_small_bps").copied();
    row(
        "small 16x4097 i32, batches/s",
        &format!("{rate:.0}"),
        &format!(
            "{config}; {:.0}% of one-per-batch, {:.0}% of batched ceiling",
            100.0 * rate / one,
            100.0 * rate / batched
        ),
        ">= 150,000 and >= 75% of batched",
        Some(rate >= 150_000.0 && rate >= 0.75 * batched),
    );
    row(
        "  same, vs DataLoader and prefetch thread",
        &format!("limit: {busiest}"),
        &format!(
            "DataLoader(4, pin) {}{}; prefetch thread {}{}",
            torch_ref(torch, "dataloader_small_bps", |v| format!("{v:.0}")),
            dl.map_or(String::new(), |v| format!(" (x{:.1})", rate / v)),
            torch_ref(torch, "prefetch_small_bps", |v| format!("{v:.0}")),
            seed.map_or(String::new(), |v| format!(" (x{:.1})", rate / v))
        ),
        "-",
        None,
    );
    Ok(())
}
