//! Section `small`: 256 KiB token batches (16 x 4097 i32), against the copy engine's
//! ceilings measured beside them and the PyTorch peers; every figure the median of
//! [`PASSES`] passes.

use std::collections::HashMap;
use std::time::Instant;

use pinring::cudarc::driver::{result, sys, DevicePtr};
use pinring_benches::{cores_but, median};

use crate::harness::{s, Gpu, Res};
use crate::nothing::{idle_pipeline, nothing_config};
use crate::report::{row, GB};
use crate::tokens::{drive_tokens_as, token_pipeline_for, Consumer, Knobs};
use crate::torch::torch_ref;

/// Passes behind every figure of the section (the median is reported).
pub const PASSES: usize = 3;

/// The copy engine's ceilings for small batches' bytes from registered memory, in
/// batches/s, each the median of [`PASSES`]: one `cuMemcpyHtoDAsync` per batch; one per
/// run of `RUN` contiguous batches (how the pipeline coalesces them); and, where the
/// driver has it, one `cuMemcpyBatchAsync` of `RUN` batches as separate pieces (how the
/// pipeline copies a run from a huge-page ring).
pub struct Ceilings {
    pub one: f64,
    pub contiguous: f64,
    pub batched_api: Option<f64>,
}

/// Whether the driver has `cuMemcpyBatchAsync` (CUDA 12.8 and later): cudarc's binding
/// panics on a driver without it, so the version is asked first.
pub fn driver_batches_copies() -> bool {
    let mut version = 0;
    // SAFETY: writes one int.
    let ok = unsafe { sys::cuDriverGetVersion(&mut version) } == sys::CUresult::CUDA_SUCCESS;
    ok && version >= 12080
}

/// Same bytes and strides as the pipeline's.
pub fn copy_ceilings(gpu: &Gpu, batch: usize) -> Res<Ceilings> {
    const RUN: usize = 8;
    const SLOTS: usize = 16;
    const N: usize = 20_000;
    gpu.bind()?;
    let stride = batch.next_multiple_of(4096);
    let p = idle_pipeline(nothing_config(batch, SLOTS)?)?;
    let (base, len) = p.backend().host_ring();
    let stream = gpu.stream()?;
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
    let batched = |first: usize, batches: usize| -> Res {
        assert!((first + batches) * stride <= len && batches <= RUN);
        let mut srcs = [0 as sys::CUdeviceptr; RUN];
        let mut dsts = [0 as sys::CUdeviceptr; RUN];
        let mut sizes = [batch; RUN];
        for i in 0..batches {
            srcs[i] = base as sys::CUdeviceptr + ((first + i) * stride) as u64;
            dsts[i] = dst_ptr + ((first + i) * stride) as u64;
        }
        let location = sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_INVALID,
            id: 0,
        };
        let mut attributes = sys::CUmemcpyAttributes {
            srcAccessOrder: sys::CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
            srcLocHint: location,
            dstLocHint: location,
            flags: 0,
        };
        let (mut first_attribute, mut failed_at) = ([0usize], usize::MAX);
        // SAFETY: the driver has the entry point (`driver_batches_copies`); `batches`
        // pieces of the idle registered ring into `dst` (asserted), one attribute entry
        // from piece 0.
        unsafe {
            sys::cuMemcpyBatchAsync(
                dsts.as_mut_ptr(),
                srcs.as_mut_ptr(),
                sizes.as_mut_ptr(),
                batches,
                &mut attributes,
                first_attribute.as_mut_ptr(),
                1,
                &mut failed_at,
                raw,
            )
        }
        .result()
        .map_err(s)
    };
    let rate = |batches: usize, api: bool| -> Res<f64> {
        let go = |i: usize| {
            let first = (i * batches) % SLOTS;
            if api {
                batched(first, batches)
            } else {
                copy(first, batches)
            }
        };
        for i in 0..16 {
            go(i)?;
        }
        stream.synchronize().map_err(s)?;
        let t = Instant::now();
        for i in 0..N / batches {
            go(i)?;
        }
        stream.synchronize().map_err(s)?;
        Ok((N / batches * batches) as f64 / t.elapsed().as_secs_f64())
    };
    let med = |batches: usize, api: bool| -> Res<f64> {
        let mut v = (0..PASSES)
            .map(|_| rate(batches, api))
            .collect::<Res<Vec<f64>>>()?;
        Ok(median(&mut v))
    };
    let one = med(1, false)?;
    let contiguous = med(RUN, false)?;
    let batched_api = if driver_batches_copies() {
        Some(med(RUN, true)?)
    } else {
        None
    };
    drop(dst);
    Ok(Ceilings {
        one,
        contiguous,
        batched_api,
    })
}

pub fn small(gpu: &Gpu, shard: &str, torch: &HashMap<String, f64>) -> Res {
    const B: usize = 16;
    const T1: u64 = 4097;
    let batch = B * T1 as usize * 4;
    let ceilings = copy_ceilings(gpu, batch)?;
    let (one, batched) = (ceilings.one, ceilings.contiguous);
    row(
        "copy ceiling, 256 KiB batches",
        &format!("{one:.0} batches/s"),
        &format!(
            "one cuMemcpyHtoDAsync per batch ({:.1} GB/s); median of {PASSES}",
            one * batch as f64 / GB
        ),
        "-",
        None,
    );
    row(
        "  batched (8 contiguous batches a copy)",
        &format!("{batched:.0} batches/s"),
        &format!(
            "{:.1} GB/s; median of {PASSES}",
            batched * batch as f64 / GB
        ),
        "-",
        None,
    );
    row(
        "  cuMemcpyBatchAsync (8 pieces a call)",
        &ceilings
            .batched_api
            .map_or("-".into(), |r| format!("{r:.0} batches/s")),
        &ceilings.batched_api.map_or(
            "the driver has no cuMemcpyBatchAsync (CUDA < 12.8)".into(),
            |r| format!("{:.1} GB/s; median of {PASSES}", r * batch as f64 / GB),
        ),
        "-",
        None,
    );
    // The default config, then configs with enough host slots to keep every stage
    // busy (a slot's round trip through the stages takes far longer than a batch's
    // share of the rate: Little's law), leaving cores to the copy, completion, feeder
    // and consumer threads. One pass of each picks the best; it gets two more.
    let configs = [
        ("default (H4 D2)", Knobs::default()),
        ("H128 D32, cores-4 decode threads", Knobs::tuned(128, 32)),
        (
            "H128 D32, 8 decode threads",
            Knobs::tuned(128, 32).with_threads(8),
        ),
        (
            "H256 D64, cores-3 decode threads",
            Knobs::tuned(256, 64).with_threads(cores_but(3)),
        ),
        (
            "H128 D32, cores-1 decode threads pinned (copy thread on core 0)",
            Knobs {
                pin: true,
                ..Knobs::tuned(128, 32).with_threads(cores_but(1))
            },
        ),
    ];
    let pass = |label: &str, knobs: Knobs, consumer: &Consumer| -> Res<(f64, String)> {
        let mut p = token_pipeline_for(shard, B, T1, knobs, consumer)?;
        let (n, secs, busiest) = drive_tokens_as(
            gpu,
            &format!("small {label}"),
            &mut p,
            200_000,
            3.0,
            consumer,
        )?;
        Ok((n as f64 / secs, busiest))
    };
    let mut first = Vec::new();
    for (label, knobs) in configs {
        first.push(pass(label, knobs, &Consumer::PerBatch)?);
    }
    let best = (0..configs.len())
        .max_by(|&a, &b| first[a].0.total_cmp(&first[b].0))
        .expect("the configs are not empty");
    let (label, knobs) = configs[best];
    let passes = |consumer: &Consumer, first: Option<(f64, String)>| -> Res<(f64, Vec<String>)> {
        let mut runs = first.into_iter().collect::<Vec<_>>();
        while runs.len() < PASSES {
            runs.push(pass(label, knobs, consumer)?);
        }
        let cells = runs
            .iter()
            .map(|(rate, busiest)| format!("{rate:.0} ({busiest})"))
            .collect();
        let mut rates: Vec<f64> = runs.iter().map(|r| r.0).collect();
        Ok((median(&mut rates), cells))
    };
    let (rate, cells) = passes(&Consumer::PerBatch, Some(first[best].clone()))?;
    let dl = torch.get("dataloader_small_bps").copied();
    let seed = torch.get("prefetch_small_bps").copied();
    row(
        "small 16x4097 i32, batches/s",
        &format!("{rate:.0}"),
        &format!(
            "{label}; {:.0}% of one-per-batch, {:.0}% of batched ceiling; passes {}",
            100.0 * rate / one,
            100.0 * rate / batched,
            cells.join(", ")
        ),
        ">= 90% of batched (median of 3)",
        Some(rate >= 0.90 * batched),
    );
    row(
        "  same, vs DataLoader and prefetch thread",
        "-",
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
    // The slot cycle of the row above (issue 34): one more pass with the trace on, its
    // timeline printed (each hand-off's p50 / p90 / max) and its rate beside the row's
    // (what the trace costs).
    {
        let traced = Knobs {
            trace: Some(1 << 22),
            ..knobs
        };
        let mut p = token_pipeline_for(shard, B, T1, traced, &Consumer::PerBatch)?;
        let (n, secs, busiest) = drive_tokens_as(
            gpu,
            "small traced",
            &mut p,
            300_000,
            3.0,
            &Consumer::PerBatch,
        )?;
        let traced_rate = n as f64 / secs;
        let timeline = p.slot_timeline().ok_or("the traced pass has no trace")?;
        println!(
            "small row's slot cycle ({label}; traced pass {traced_rate:.0} batches/s, {busiest}):"
        );
        print!("{timeline}");
        let handoffs = timeline.handoffs();
        let cycle = handoffs
            .iter()
            .find(|h| h.name.starts_with("device slot cycle"));
        let waits = handoffs
            .iter()
            .filter(|h| h.count > 0 && !h.name.contains("cycle"))
            .max_by_key(|h| h.p50_ns * h.count as u64);
        row(
            "  slot cycle (traced pass)",
            &cycle.map_or("-".into(), |c| {
                format!("{:.1} us p50", c.p50_ns as f64 / 1e3)
            }),
            &format!(
                "{traced_rate:.0} batches/s traced; most time: {}",
                waits.map_or("-".into(), |h| format!(
                    "{} ({} batches, p50 {:.1} us)",
                    h.name,
                    h.count,
                    h.p50_ns as f64 / 1e3
                ))
            ),
            "-",
            None,
        );
    }
    // The loop issue 23 asks for: the stream declared once, `pop` binds, `Fence::Bound`.
    gpu.bind()?;
    let declared = Consumer::Declared(gpu.stream()?);
    let (declared_rate, cells) = passes(&declared, None)?;
    row(
        "  same, declared consumer stream",
        &format!("{declared_rate:.0}"),
        &format!(
            "pop binds, release(Fence::Bound); {:.0}% of the row above, {:.0}% of batched; \
             passes {}",
            100.0 * declared_rate / rate,
            100.0 * declared_rate / batched,
            cells.join(", ")
        ),
        "-",
        None,
    );
    Ok(())
}
