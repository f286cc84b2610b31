//! Section `overlap`: a consumer kernel as long as one batch's copy, through pinring and
//! through the same schedule without it.

use std::sync::Arc;
use std::time::Instant;

use pinring::cudarc::driver::{result, sys, CudaStream, DevicePtr};
use pinring::{CuStream, Cuda, Fence, Pipeline};

use crate::harness::{s, Gpu, Res};
use crate::nothing::{idle_pipeline, nothing, nothing_config};
use crate::raw::raw_copies;
use crate::report::{row, stats_line};
use crate::timeline::Timeline;
use crate::trace::write_trace;

/// Seconds one `hold` kernel of `ns` takes on `stream`, back to back.
pub fn time_hold(gpu: &Gpu, stream: &Arc<CudaStream>, ns: u64, n: usize) -> Res<f64> {
    gpu.hold(stream, ns)?;
    stream.synchronize().map_err(s)?;
    let t = Instant::now();
    for _ in 0..n {
        gpu.hold(stream, ns)?;
    }
    stream.synchronize().map_err(s)?;
    Ok(t.elapsed().as_secs_f64() / n as f64)
}

/// One pass of the overlap schedule through pinring: `n` measured batches (after
/// `warm`), each read by a `hold` kernel of `ns` on `stream`. Seconds per step, and
/// the pipeline (its registered ring serves the raw schedule next).
pub fn overlap_pass(
    gpu: &Gpu,
    stream: &Arc<CudaStream>,
    size: usize,
    ns: u64,
    (n, warm): (usize, usize),
    report: bool,
) -> Res<(f64, Pipeline<Cuda>)> {
    let cs = CuStream::from(stream);
    let mut p = Pipeline::new(
        nothing_config(size, 4)?,
        nothing(),
        std::iter::repeat_n((), n + warm),
    )
    .map_err(s)?;
    let mut t0 = None;
    let mut timeline = Timeline::new(stream);
    while let Some(mut batch) = p.pop().map_err(s)? {
        batch.wait_on(&cs).map_err(s)?;
        Timeline::hold(&mut timeline, gpu, stream, ns)?;
        let k = batch.seq() as usize;
        batch.release(Fence::Stream(&cs)).map_err(|e| s(e.error))?;
        if k + 1 == warm {
            stream.synchronize().map_err(s)?;
            t0 = Some((Instant::now(), p.stats()));
        }
    }
    stream.synchronize().map_err(s)?;
    let (t0, before) = t0.ok_or("no warm-up")?;
    let wall = t0.elapsed();
    if let Some(t) = timeline {
        t.report("pinring", warm)?;
    }
    if report {
        stats_line("overlap", &before, &p.stats(), wall);
        write_trace(&p, "overlap")?;
    }
    Ok((wall.as_secs_f64() / n as f64, p))
}

/// The overlap bench's schedule without pinring: copies into two device buffers on
/// one stream, a kernel holding another stream `ns` per copy, each copy waiting
/// (stream-side) for the kernel that read its buffer two steps before; all enqueued
/// from this thread. Seconds per step.
pub fn raw_overlap(gpu: &Gpu, p: &Pipeline<Cuda>, size: usize, ns: u64, n: usize) -> Res<f64> {
    let (base, len) = p.backend().host_ring();
    let slots = len / size;
    if slots == 0 {
        return Err("ring smaller than a batch".into());
    }
    let copies = gpu.stream()?;
    let compute = gpu.stream()?;
    let dst = copies.alloc_zeros::<u8>(2 * size).map_err(s)?;
    let dst_ptr = dst.device_ptr(&copies).0;
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING;
    let events: Vec<sys::CUevent> = (0..4)
        .map(|_| result::event::create(flags).map_err(s))
        .collect::<Res<_>>()?;
    let (copied, computed) = (&events[..2], &events[2..]);
    let wait = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
    let step = |i: usize, timeline: &mut Option<Timeline>| -> Res {
        let b = i % 2;
        if i >= 2 {
            // SAFETY: live events and streams of the bound context.
            unsafe { result::stream::wait_event(copies.cu_stream(), computed[b], wait) }
                .map_err(s)?;
        }
        // SAFETY: slot i % slots starts inside the ring (slots × stride ≤ its length).
        let start = unsafe { base.add((i % slots) * (len / slots)) };
        // SAFETY: `size` bytes from `start` lie in the registered ring, which nothing
        // writes (the pipeline's source has ended).
        let src = unsafe { std::slice::from_raw_parts(start, size) };
        let to = dst_ptr + (b * size) as u64;
        // SAFETY: the destination lies in `dst`, alive until both streams are
        // synchronized below; the source stays registered while the pipeline lives.
        unsafe { result::memcpy_htod_async(to, src, copies.cu_stream()) }.map_err(s)?;
        // SAFETY: as above.
        unsafe { result::event::record(copied[b], copies.cu_stream()) }.map_err(s)?;
        // SAFETY: as above.
        unsafe { result::stream::wait_event(compute.cu_stream(), copied[b], wait) }.map_err(s)?;
        Timeline::hold(timeline, gpu, &compute, ns)?;
        // SAFETY: as above.
        unsafe { result::event::record(computed[b], compute.cu_stream()) }.map_err(s)?;
        Ok(())
    };
    for i in 0..4 {
        step(i, &mut None)?;
    }
    compute.synchronize().map_err(s)?;
    copies.synchronize().map_err(s)?;
    let mut timeline = Timeline::new(&compute);
    let t = Instant::now();
    for i in 4..4 + n {
        step(i, &mut timeline)?;
    }
    compute.synchronize().map_err(s)?;
    copies.synchronize().map_err(s)?;
    let secs = t.elapsed().as_secs_f64() / n as f64;
    if let Some(t) = timeline {
        t.report("without pinring", 0)?;
    }
    for e in events {
        // SAFETY: idle (both streams synchronized) and not used again.
        unsafe { result::event::destroy(e) }.map_err(s)?;
    }
    drop(dst);
    Ok(secs)
}

pub fn overlap(gpu: &Gpu) -> Res {
    const SIZE: usize = 32 << 20;
    const N: usize = 300;
    const WARM: usize = 20;
    const PASSES: usize = 3;
    gpu.bind()?;
    // The copy time of one batch, from the same kind of registered ring.
    let copy = raw_copies(gpu, &idle_pipeline(nothing_config(SIZE, 4)?)?, SIZE, 50)?;
    // The kernel holds its stream as long as one copy takes, by the GPU's global timer
    // (a kernel counting SM cycles would follow the clock, which moves with load).
    let ns = (copy * 1e9) as u64;
    let stream = gpu.stream()?;
    let kernel = time_hold(gpu, &stream, ns, 100)?;
    // Passes through pinring and through the same schedule without it, alternating,
    // so both see the same machine; the medians are compared.
    let (mut ours, mut raws) = (Vec::new(), Vec::new());
    let mut copy_after = f64::INFINITY;
    for pass in 0..PASSES {
        let (step, p) = overlap_pass(gpu, &stream, SIZE, ns, (N, WARM), pass == 0)?;
        ours.push(step);
        raws.push(raw_overlap(gpu, &p, SIZE, ns, 100)?);
        copy_after = copy_after.min(raw_copies(gpu, &p, SIZE, 50)?);
    }
    let kernel_after = time_hold(gpu, &stream, ns, 50)?;
    // The faster of the copy and kernel measurements: the stricter bound.
    let bound = copy.min(copy_after).max(kernel.min(kernel_after));
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let pcts = |v: &[f64]| {
        v.iter()
            .map(|step| format!("{:.1}%", 100.0 * bound / step))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (ours_each, raws_each) = (pcts(&ours), pcts(&raws));
    let (step, raw_step) = (median(&mut ours), median(&mut raws));
    let eff = bound / step;
    let us = |x: f64| x * 1e6;
    row(
        "overlap 32 MiB, kernel = copy",
        &format!(
            "{:.1}% ({:.0} us/step; median of {PASSES} passes: {ours_each})",
            eff * 100.0,
            us(step)
        ),
        &format!(
            "copy {:.0} us (after {:.0}), kernel {:.0} us (after {:.0}), serial {:.0} us; \
             the same schedule without pinring {:.0} us/step ({:.1}%; passes {raws_each})",
            us(copy),
            us(copy_after),
            us(kernel),
            us(kernel_after),
            us(copy + kernel),
            us(raw_step),
            100.0 * bound / raw_step
        ),
        ">= 95%",
        Some(eff >= 0.95),
    );
    Ok(())
}
