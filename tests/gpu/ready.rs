//! Issue 23's Rust items on the device: `Batch::synchronize` parks on the copy count (READY
//! events are plain), a run's pieces go per piece or as one `cuMemcpyBatchAsync` (and the
//! per-piece fallback works on any driver), and the consumer stream declared once fences
//! every batch through `Fence::Bound`.

use std::time::{Duration, Instant};

use pinring::{Config, CopyCalls, CuStream, Cuda, CudaOptions, Error, Fence, Pipeline};

use crate::harness::{clean, decoder, s, Gpu, Res, Tally, HOLD_US, SAMPLES, SAMPLE_BYTES};
use crate::{info, report};

/// The calling thread's CPU time (user + system), from `/proc/thread-self/stat`, in clock
/// ticks of 10 ms.
fn thread_cpu() -> Res<Duration> {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").map_err(s)?;
    let rest = &stat[stat.rfind(')').ok_or("no ')' in stat")? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let tick =
        |i: usize| -> Res<u64> { fields.get(i).ok_or("short stat")?.parse::<u64>().map_err(s) };
    Ok(Duration::from_millis(10 * (tick(11)? + tick(12)?)))
}

/// A config of the suite's 64 KiB batches with these copies, slots and huge pages.
fn config(
    copies: CopyCalls,
    host_slots: usize,
    device_slots: usize,
    huge_pages: bool,
) -> Res<pinring::ConfigBuilder<Cuda>> {
    Ok(Config::builder()
        .batch_size(SAMPLES)
        .bytes_per_sample(SAMPLE_BYTES)
        .host_slots(host_slots)
        .device_slots(device_slots)
        .decode_threads(8)
        .huge_pages(huge_pages)
        .pop_timeout(Duration::from_secs(20))
        .cuda(CudaOptions::ordinal(0).copies(copies)))
}

/// Batch 1's copy into the pipeline's one device slot waits behind batch 0's release
/// fence, held by a 500 ms kernel; `synchronize` on batch 1 must wait that long, parked
/// (its thread's CPU time a small part of the wait), and then a kernel on a stream that
/// never waited on the batch reads it whole.
fn parks() -> Res<String> {
    const HOLD: Duration = Duration::from_millis(500);
    let gpu = Gpu::bound()?;
    let held = gpu.stream()?;
    let other = gpu.stream()?;
    let held_cs = CuStream::from(&held);
    let tally = Tally::new(&other, 2)?;
    let config = config(CopyCalls::Auto, 2, 1, false)?.build().map_err(s)?;
    let mut p = Pipeline::new(config, decoder(), 0..(2 * SAMPLES) as u64).map_err(s)?;
    let mut first = p.pop().map_err(s)?.ok_or("no batch 0")?;
    first.wait_on(&held_cs).map_err(s)?;
    gpu.hold(&held, HOLD.as_nanos() as u64)?;
    first
        .release(Fence::Stream(&held_cs))
        .map_err(|e| s(e.error))?;
    let second = p.pop().map_err(s)?.ok_or("no batch 1")?;
    let (t0, cpu0) = (Instant::now(), thread_cpu()?);
    second.synchronize().map_err(s)?;
    let (waited, cpu) = (t0.elapsed(), thread_cpu()?.saturating_sub(cpu0));
    // No stream-side wait: the host's synchronize is the only order.
    let words = second.len() as u64 / 4;
    gpu.check(
        &other,
        second.device_ptr(),
        SAMPLES as u64,
        words,
        tally.at(1),
    )?;
    other.synchronize().map_err(s)?;
    second
        .release(Fence::Stream(&CuStream::from(&other)))
        .map_err(|e| s(e.error))?;
    let (wrong, _) = tally.read(1)?;
    if wrong > 0 {
        return Err(format!(
            "synchronize returned after {waited:?} with {wrong} words of batch 1 not there"
        ));
    }
    if waited < HOLD / 2 {
        return Err(format!(
            "synchronize returned after {waited:?}, before the {HOLD:?} kernel its copy waits for"
        ));
    }
    if cpu.as_secs_f64() > 0.1 * waited.as_secs_f64() {
        return Err(format!(
            "synchronize used {cpu:?} of CPU in a {waited:?} wait: it spun"
        ));
    }
    Ok(format!(
        "waited {:.0} ms for a copy held by a {} ms kernel, {} ms of CPU (10 ms ticks); the \
         batch read whole on a stream that never waited on it",
        waited.as_secs_f64() * 1e3,
        HOLD.as_millis(),
        cpu.as_millis()
    ))
}

gpu_test!(synchronize_parks_until_the_copy_lands => parks());

/// `n` batches, each synchronized on the host and then checked by a kernel on a stream
/// that never waits on it (the host's synchronize is the only order), released on it.
/// Runs copies `copies`, with huge pages (one piece per batch in a run) when `huge`.
fn synchronized_batches(n: usize, copies: CopyCalls, huge: bool) -> Res<(String, CopyCalls)> {
    let gpu = Gpu::bound()?;
    let stream = gpu.stream()?;
    let cs = CuStream::from(&stream);
    let tally = Tally::new(&stream, n)?;
    let config = config(copies, 16, 4, huge)?.build().map_err(s)?;
    let samples = 0..(n * SAMPLES) as u64;
    let mut p = Pipeline::new(config, decoder(), samples).map_err(s)?;
    while let Some(batch) = p.pop().map_err(s)? {
        batch.synchronize().map_err(s)?;
        gpu.check_batch(&stream, &batch, &tally)?;
        batch.release(Fence::Stream(&cs)).map_err(|e| s(e.error))?;
    }
    let used = p.backend().copy_calls();
    let (wrong, checked) = tally.read(1)?;
    Ok((clean(wrong, checked, n)?, used))
}

gpu_test!(
    synchronize_orders_a_kernel_on_an_unrelated_stream =>
        synchronized_batches(2000, CopyCalls::Auto, false).map(|(text, _)| text)
);

/// The fallback, forced on any driver: runs of several pieces (a huge-page ring) go one
/// `cuMemcpyHtoDAsync` per piece, every batch intact.
#[test]
#[ignore = "needs a CUDA GPU (scripts/gpu-check.sh)"]
fn per_piece_copies_forced() {
    let result = synchronized_batches(2000, CopyCalls::PerPiece, true).and_then(|(text, used)| {
        if used == CopyCalls::PerPiece {
            Ok(format!("{text}; copies per piece (huge-page ring)"))
        } else {
            Err(format!(
                "asked for per-piece copies, the backend used {used:?}"
            ))
        }
    });
    report("per_piece_copies_forced", result);
}

/// Batched copies where the driver has `cuMemcpyBatchAsync` (CUDA 12.8 and later): every
/// run goes as one call, every batch intact, and the driver never refused one (the backend
/// still says `Batched` at the end). On an older driver the run is the fallback's, and an
/// INFO line says so.
#[test]
#[ignore = "needs a CUDA GPU (scripts/gpu-check.sh)"]
fn batched_copies_where_the_driver_has_them() {
    let name = "batched_copies_where_the_driver_has_them";
    let result = synchronized_batches(2000, CopyCalls::Batched, true);
    match result {
        Ok((text, CopyCalls::Batched)) => report(
            name,
            Ok(format!(
                "{text}; every run one cuMemcpyBatchAsync (huge-page ring)"
            )),
        ),
        Ok((text, used)) => {
            info(
                name,
                &format!(
                    "{text}; but copies went {used:?}: this driver has no cuMemcpyBatchAsync \
                     (CUDA < 12.8) or refused one"
                ),
            );
        }
        Err(e) => report(name, Err(e)),
    }
}

/// A consumer stream declared once: every batch is popped (no `wait_on`), held and checked
/// by a kernel on that stream, and released with `Fence::Bound`; with two device slots the
/// next copy into a slot must wait for the check. A stream of another context is refused
/// when the pipeline starts.
fn declared(n: usize) -> Res<String> {
    let gpu = Gpu::bound()?;
    let stream = gpu.stream()?;
    let tally = Tally::new(&stream, n)?;
    let declared = config(CopyCalls::Auto, 4, 2, false)?
        .consumer_stream(CuStream::from(&stream))
        .build()
        .map_err(s)?;
    let samples = 0..(n * SAMPLES) as u64;
    let mut p = Pipeline::new(declared, decoder(), samples).map_err(s)?;
    while let Some(batch) = p.pop().map_err(s)? {
        gpu.spin(&stream, HOLD_US)?;
        gpu.check_batch(&stream, &batch, &tally)?;
        batch.release(Fence::Bound).map_err(|e| s(e.error))?;
    }
    drop(p);
    let (wrong, checked) = tally.read(1)?;
    let text = clean(wrong, checked, n)?;
    let other = pinring::cudarc::driver::CudaContext::new_non_primary(0, 0).map_err(s)?;
    let other_stream = other.new_stream().map_err(s)?;
    gpu.bind()?;
    let refused = config(CopyCalls::Auto, 4, 2, false)?
        .consumer_stream(CuStream::from(&other_stream))
        .build()
        .map_err(s)?;
    match Pipeline::new(refused, decoder(), 0..SAMPLES as u64) {
        Err(Error::Fence(_)) => {}
        Err(e) => {
            return Err(format!(
                "another context's stream: expected Error::Fence, got {e}"
            ))
        }
        Ok(_) => return Err("a consumer stream of another context was accepted".into()),
    }
    Ok(format!(
        "{text}; popped onto the declared stream, released with Fence::Bound; another \
         context's stream refused at start"
    ))
}

gpu_test!(declared_consumer_stream_fences_every_batch => declared(2000));
