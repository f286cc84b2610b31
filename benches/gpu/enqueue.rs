//! Section `enqueue` (only when named): what one `cuMemcpyHtoDAsync` call costs by size and
//! kind of pinned memory, what stream-side waits on completed events cost the copy
//! stream, and what a `cuEventRecord` costs (`EXPLORE` lines).

use std::time::Instant;

use pinring::cudarc::driver::{result, sys, DevicePtr};
use pinring::CudaOptions;

use crate::harness::{s, Gpu, Res};
use crate::nothing::{idle_pipeline, nothing_builder};

/// How long one `cuMemcpyHtoDAsync` call takes to return (not the copy), by size and by
/// the kind of pinned memory it reads: the pipeline's registered ring with normal
/// pages, the same with huge pages (where the machine has them), and memory from
/// `cuMemHostAlloc` (`EXPLORE` lines).
pub fn enqueue_cost(gpu: &Gpu) -> Res {
    const N: usize = 200;
    const SIZES: [usize; 4] = [256 << 10, 1 << 20, 2 << 20, 4 << 20];
    gpu.bind()?;
    let stream = gpu.stream()?;
    let dst = stream.alloc_zeros::<u8>(4 << 20).map_err(s)?;
    let to = dst.device_ptr(&stream).0;
    let measure = |what: &str, base: *const u8| -> Res {
        for size in SIZES {
            // SAFETY: `base` points at 4 MiB or more of pinned memory, idle.
            let src = unsafe { std::slice::from_raw_parts(base, size) };
            stream.synchronize().map_err(s)?;
            let mut calls = Vec::with_capacity(N);
            for _ in 0..N {
                let t = Instant::now();
                // SAFETY: `dst` lives until the stream is synchronized below.
                unsafe { result::memcpy_htod_async(to, src, stream.cu_stream()) }.map_err(s)?;
                calls.push(t.elapsed().as_secs_f64() * 1e6);
                stream.synchronize().map_err(s)?;
            }
            calls.sort_by(f64::total_cmp);
            println!(
                "EXPLORE\tenqueue\tcuMemcpyHtoDAsync {:>4} KiB from {what}\t{:.1} us p50\t{:.1} us p90",
                size >> 10,
                calls[N / 2],
                calls[N * 9 / 10]
            );
        }
        Ok(())
    };
    // Two 4 MiB host slots, normal pages and then huge ones.
    let ring = |huge| {
        let config = nothing_builder(4 << 20, 2, 2)
            .huge_pages(huge)
            .cuda(CudaOptions::ordinal(0))
            .build()
            .map_err(s)?;
        idle_pipeline(config)
    };
    let idle = ring(false)?;
    for p in [&idle, &ring(true)?] {
        let what = format!("the registered ring ({:?})", p.huge_pages());
        measure(&what, p.backend().host_ring().0)?;
    }
    // The copy stream's own cost of a stream-side wait on an event that has already
    // completed (as a release fence often has by the time its slot is reused): runs of
    // 10 copies of 256 KiB (one 2.5 MiB copy), with and without 10 such waits before
    // each, back to back; batches/s.
    let done = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).map_err(s)?;
    let other = gpu.stream()?;
    // SAFETY: a live event and stream of the bound context.
    unsafe { result::event::record(done, other.cu_stream()) }.map_err(s)?;
    other.synchronize().map_err(s)?;
    // SAFETY: 10 × 256 KiB inside the idle registered ring (8 MiB).
    let src = unsafe { std::slice::from_raw_parts(idle.backend().host_ring().0, 10 << 18) };
    for waits in [0usize, 10] {
        let run = |n: usize| -> Res {
            for _ in 0..n {
                for _ in 0..waits {
                    let flags = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
                    // SAFETY: live event and stream.
                    unsafe { result::stream::wait_event(stream.cu_stream(), done, flags) }
                        .map_err(s)?;
                }
                // SAFETY: `dst` (4 MiB) lives until the stream is synchronized.
                unsafe { result::memcpy_htod_async(to, src, stream.cu_stream()) }.map_err(s)?;
            }
            stream.synchronize().map_err(s)
        };
        run(20)?;
        let t = Instant::now();
        run(2000)?;
        println!(
            "EXPLORE\tenqueue\truns of 10 x 256 KiB, {waits} completed-event waits before each\t{:.0} batches/s",
            20_000.0 / t.elapsed().as_secs_f64()
        );
    }
    drop(idle);
    // SAFETY: idle (its stream synchronized) and not used again.
    unsafe { result::event::destroy(done) }.map_err(s)?;
    // What one cuEventRecord costs the calling thread, by event kind, on an idle stream
    // and on one with a long kernel queued (as the copy stream has copies queued).
    for (kind, flags) in [
        (
            "timing-disabled",
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32,
        ),
        (
            "timing-disabled blocking-sync",
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
                | sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32,
        ),
    ] {
        let mut e: sys::CUevent = std::ptr::null_mut();
        // SAFETY: writes one handle; the context is bound.
        unsafe { sys::cuEventCreate(&mut e, flags) }
            .result()
            .map_err(s)?;
        for busy in [false, true] {
            if busy {
                gpu.hold(&stream, 50_000_000)?;
            }
            let t = Instant::now();
            for _ in 0..2000 {
                // SAFETY: a live event and stream.
                unsafe { result::event::record(e, stream.cu_stream()) }.map_err(s)?;
            }
            let ns = t.elapsed().as_secs_f64() * 1e9 / 2000.0;
            stream.synchronize().map_err(s)?;
            println!(
                "EXPLORE\tenqueue\tcuEventRecord, {kind} event, {} stream\t{ns:.0} ns",
                if busy { "busy" } else { "idle" }
            );
        }
        // SAFETY: idle and not used again.
        unsafe { result::event::destroy(e) }.map_err(s)?;
    }
    // SAFETY: plain pinned allocation of 4 MiB; freed below.
    let host = unsafe { result::malloc_host(4 << 20, 0) }.map_err(s)?;
    let measured = measure("cuMemHostAlloc memory", host.cast::<u8>().cast_const());
    // SAFETY: allocated above; the stream is synchronized (no copy reads it).
    unsafe { result::free_host(host) }.map_err(s)?;
    measured?;
    drop(dst);
    Ok(())
}
