//! Drops, devices, contexts, and a CUDA fault reaching the consumer.

use std::time::{Duration, Instant};

use pinring::{decode_fn, Config, CuStream, Cuda, CudaOptions, Error, Fence, Pipeline};

use crate::fences::{checked, Release};
use crate::harness::{clean, pipeline, s, Gpu, Res, Tally};
use crate::{info, passes_in_own_process, report};

/// Drops the pipeline with every device slot leased and kernels still reading them; the
/// batches stay valid, are read again after the drop, and then dropped.
fn drop_with_leased() -> Res<String> {
    const D: usize = 3;
    let gpu = Gpu::bound()?;
    let stream = gpu.stream()?;
    let cs = CuStream::from(&stream);
    let tally = Tally::new(&stream, D)?;
    let mut p = pipeline(CudaOptions::ordinal(0), D, 1000)?;
    let mut held = Vec::new();
    for _ in 0..D {
        let mut batch = p.pop().map_err(s)?.ok_or("the source ended early")?;
        batch.wait_on(&cs).map_err(s)?;
        gpu.spin(&stream, 2000)?;
        gpu.check_batch(&stream, &batch, &tally)?;
        held.push(batch);
    }
    let t = Instant::now();
    drop(p);
    let dropped_in = t.elapsed();
    for batch in &held {
        gpu.check_batch(&stream, batch, &tally)?;
    }
    let t = Instant::now();
    drop(held); // bound: fenced on the stream; the last drop tears the backend down
    let last_drop = t.elapsed();
    let (wrong, checked) = tally.read(2)?;
    if dropped_in > Duration::from_secs(5) {
        return Err(format!("dropping the pipeline took {dropped_in:?}"));
    }
    clean(wrong, checked, D)?;
    Ok(format!(
        "pipeline dropped with {D} batches leased in {dropped_in:.1?}; batches read after it, \
         0 words wrong; last batch drop (backend teardown) {last_drop:.1?}"
    ))
}

gpu_test!(drop_with_batches_leased => drop_with_leased());

#[test]
#[ignore = "needs a CUDA GPU (scripts/gpu-check.sh)"]
fn invalid_device_ordinal() {
    let result = match pipeline(CudaOptions::ordinal(99), 2, 10) {
        Ok(_) => Err("a pipeline opened on device 99".into()),
        Err(e) if e.contains("cuDeviceGet") && e.contains("CUDA_ERROR_INVALID_DEVICE") => Ok(e),
        Err(e) => Err(format!("unexpected error: {e}")),
    };
    report("invalid_device_ordinal", result);
}

/// Runs the checked runs `a` and `b` (each of `n` batches, as [`checked`] returns them) at
/// once, each on a consumer thread of its own: Ok when both are clean.
fn both_clean_at_once<A, B>(n: usize, a: A, b: B) -> Res
where
    A: FnOnce() -> Res<(u64, usize)> + Send,
    B: FnOnce() -> Res<(u64, usize)> + Send,
{
    let results = std::thread::scope(|scope| {
        let a = scope.spawn(a);
        let b = scope.spawn(b);
        (a.join(), b.join())
    });
    let (a, b) = match results {
        (Ok(a), Ok(b)) => (a?, b?),
        _ => return Err("a consumer thread panicked".into()),
    };
    clean(a.0 + b.0, a.1 + b.1, 2 * n).map(drop)
}

/// Two pipelines in one process at once: one by ordinal, one adopting the context current
/// on its thread, each with its own consumer thread.
fn two_pipelines() -> Res<String> {
    let n = 2000;
    let gpu = Gpu::new()?;
    let gpu = &gpu;
    both_clean_at_once(
        n,
        || checked(gpu, CudaOptions::ordinal(0), n, Release::StreamRaw),
        || {
            gpu.bind()?; // the context current on this thread, as PyTorch leaves it
            let adopted = pipeline(CudaOptions::current(), 2, 1)?;
            if adopted.backend().ordinal() != 0 {
                return Err("adopted the wrong device".into());
            }
            drop(adopted);
            checked(gpu, CudaOptions::current(), n, Release::EventRaw)
        },
    )?;
    Ok(format!(
        "ordinal(0) and current() pipelines ran at once: 2 x {n} batches, 0 words wrong"
    ))
}

gpu_test!(two_pipelines_one_process => two_pipelines());

/// Two pipelines on two devices in one process, each checked on its own device by kernels
/// loaded there. Informational on a machine with one device.
#[test]
#[ignore = "needs a CUDA GPU (scripts/gpu-check.sh)"]
fn two_devices_one_process() {
    let devices = Cuda::device_count().expect("a CUDA driver");
    if devices < 2 {
        info(
            "two_devices_one_process",
            &format!("not run: this machine has {devices} CUDA device(s)"),
        );
        return;
    }
    let result = (|| {
        let (gpu0, gpu1) = (Gpu::on(0)?, Gpu::on(1)?);
        let n = 2000;
        both_clean_at_once(
            n,
            || checked(&gpu0, CudaOptions::ordinal(0), n, Release::StreamRaw),
            || {
                let p = pipeline(CudaOptions::ordinal(1), 2, 1)?;
                if p.backend().ordinal() != 1 {
                    return Err("ordinal(1) bound another device".into());
                }
                drop(p);
                checked(&gpu1, CudaOptions::ordinal(1), n, Release::EventRaw)
            },
        )?;
        Ok(format!(
            "ordinal(0) and ordinal(1) pipelines ran at once: 2 x {n} batches, each checked on \
             its own device, 0 words wrong"
        ))
    })();
    report("two_devices_one_process", result);
}

/// A CUDA error on the copy thread reaches the consumer (in a process of its own: the
/// error is sticky and kills the context).
#[test]
#[ignore = "needs a CUDA GPU (scripts/gpu-check.sh)"]
fn copy_error_reaches_consumer() {
    passes_in_own_process("lifecycle::fault_child", "");
}

#[test]
#[ignore = "run by copy_error_reaches_consumer in a process of its own"]
fn fault_child() {
    let result = (|| {
        let gpu = Gpu::bound()?;
        let stream = gpu.stream()?;
        let cs = CuStream::from(&stream);
        let mut p = pipeline(CudaOptions::ordinal(0), 2, 1000)?;
        let t = Instant::now();
        let mut popped = 0;
        let error = loop {
            match p.pop() {
                Ok(Some(mut batch)) => {
                    popped += 1;
                    if batch.wait_on(&cs).is_ok() && popped == 2 {
                        gpu.fault(&stream)?;
                        // Wait for the fault to land (its error is expected), so that the
                        // context is dead before the next pop, however fast the copies
                        // are: the run could otherwise end before a trap surfaces.
                        let _ = stream.synchronize();
                    }
                    let _ = batch.release(Fence::Sync);
                }
                Ok(None) => return Err("the source ended without an error".into()),
                Err(e) => break e,
            }
            if popped > 1000 {
                return Err("no error after 1000 batches".into());
            }
        };
        let took = t.elapsed();
        let next = p.pop();
        let t = Instant::now();
        drop(p);
        let dropped_in = t.elapsed();
        // The context is dead now: leak the module rather than unload it.
        std::mem::forget(gpu);
        match error.driver_error() {
            Some(driver) => {
                if !matches!(next, Err(Error::Stopped)) {
                    return Err(format!("after the error, pop gave {next:?}"));
                }
                Ok(format!(
                    "pop returned \"{error}\" (CUresult {}) after {popped} batches ({took:.1?}); \
                     next pop: Stopped; drop took {dropped_in:.1?}",
                    driver.0 as i32
                ))
            }
            None => Err(format!("expected a CUDA driver error, got: {error}")),
        }
    })();
    report("copy_error_reaches_consumer", result);
}

/// What pinning a 256 MiB ring does under a 64 KiB locked-memory limit (informational:
/// the outcome depends on the driver and the process's privileges).
#[test]
#[ignore = "needs a CUDA GPU (scripts/gpu-check.sh)"]
fn memlock_limit() {
    passes_in_own_process("lifecycle::memlock_child", "ulimit -l 64;");
}

#[test]
#[ignore = "run by memlock_limit in a process of its own"]
fn memlock_child() {
    let config = Config::builder()
        .batch_size(1)
        .bytes_per_sample(64 << 20)
        .host_slots(4)
        .decode_threads(1)
        .cuda(CudaOptions::ordinal(0))
        .build()
        .expect("a valid config");
    let decoder = decode_fn(|_: (), _: &mut [u8]| Ok(()));
    let limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|l| {
            l.lines().find(|l| l.starts_with("Max locked")).map(|l| {
                l.split_whitespace()
                    .skip(3)
                    .take(2)
                    .collect::<Vec<_>>()
                    .join("/")
            })
        })
        .unwrap_or_default();
    let detail = match Pipeline::new(config, decoder, std::iter::empty()) {
        Ok(_) => format!(
            "RLIMIT_MEMLOCK {limit} bytes (soft/hard): a 256 MiB ring was registered anyway (no \
             locked-memory accounting for this registration here)"
        ),
        Err(e) => format!("RLIMIT_MEMLOCK {limit} bytes (soft/hard): {e}"),
    };
    info("memlock_limit", &detail);
}
