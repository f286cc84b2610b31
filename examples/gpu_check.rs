//! The cuda backend's GPU suite. Needs an NVIDIA GPU; run it
//! through `scripts/gpu-check.sh`, which builds it, compiles `kernels/gpu_check.cu` to PTX
//! and prints the pass/fail table.
//!
//! ```text
//! gpu_check all     --ptx PATH   correctness suite
//! gpu_check fault   --ptx PATH   a CUDA error on the copy thread reaches the consumer
//! gpu_check memlock              what pinning the ring does under the current `ulimit -l`
//! ```
//!
//! Each check prints `RESULT\t<name>\t<PASS|FAIL|INFO>\t<detail>`. H2D bandwidth (pipeline
//! vs raw `cuMemcpyHtoDAsync`) is measured by `examples/gpu_bench.rs`, which the script
//! runs in the same call.

#[cfg(feature = "cuda")]
mod suite {
    use std::ffi::{c_void, CString};
    use std::fmt::Display;
    use std::ptr;
    use std::sync::{mpsc, Arc};
    use std::time::{Duration, Instant};

    use pinring::cudarc::driver::sys::{self, CUdeviceptr, CUfunction, CUmodule, CUstream};
    use pinring::cudarc::driver::{CudaContext, CudaSlice, CudaStream, DevicePtr};
    use pinring::{
        decode_fn, Batch, Config, CuEvent, CuStream, Cuda, CudaOptions, Error, Fence, Pipeline,
    };

    type Res<T = ()> = Result<T, String>;

    /// Samples per batch and bytes per sample of the correctness runs (64 KiB batches).
    const SAMPLES: usize = 16;
    const SAMPLE_BYTES: usize = 4096;
    const WORDS_PER_SAMPLE: u32 = (SAMPLE_BYTES / 4) as u32;
    const BATCH_WORDS: u64 = (SAMPLES * SAMPLE_BYTES / 4) as u64;
    /// Grid of the check kernel: each block adds one visit.
    const GRID: u32 = 64;
    const BLOCK: u32 = 256;
    /// How long the consumer holds each batch on the device (much longer than the ~2 µs
    /// H2D of a 64 KiB batch).
    const HOLD_US: u64 = 30;

    fn s<E: Display>(e: E) -> String {
        e.to_string()
    }

    fn ok(call: &str, r: sys::CUresult) -> Res {
        if r == sys::CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(format!("{call}: {r:?}"))
        }
    }

    /// Word `word` of sample `sample` (the kernel's `pattern`).
    fn pattern(sample: u64, word: u32) -> u32 {
        let x = ((sample.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32)
            ^ word.wrapping_mul(0x85EB_CA6B);
        x ^ (x >> 15)
    }

    fn decoder() -> impl pinring::Decode<Sample = u64> {
        decode_fn(|sample: u64, out: &mut [u8]| {
            for (w, word) in out.chunks_exact_mut(4).enumerate() {
                word.copy_from_slice(&pattern(sample, w as u32).to_le_bytes());
            }
            Ok(())
        })
    }

    fn config(options: CudaOptions, device_slots: usize) -> pinring::Result<Config<Cuda>> {
        Ok(Config::builder()
            .samples_per_batch(SAMPLES)
            .bytes_per_sample(SAMPLE_BYTES)
            .host_slots(4)
            .device_slots(device_slots)
            .decode_threads(8)
            .pop_timeout(Duration::from_secs(20))
            .cuda(options)
            .build()?)
    }

    fn pipeline(options: CudaOptions, device_slots: usize, batches: usize) -> Res<Pipeline<Cuda>> {
        let samples = 0..(batches * SAMPLES) as u64;
        Pipeline::new(
            config(options, device_slots).map_err(s)?,
            decoder(),
            samples,
        )
        .map_err(s)
    }

    /// The test's own view of the GPU: a context (as a cudarc user has one) and the kernels.
    struct Gpu {
        ctx: Arc<CudaContext>,
        module: CUmodule,
        spin: CUfunction,
        check: CUfunction,
        fault: CUfunction,
        clock_khz: u64,
    }

    // SAFETY: module and function handles are driver handles, usable from any thread.
    unsafe impl Send for Gpu {}
    // SAFETY: as above; launches are thread-safe in the driver.
    unsafe impl Sync for Gpu {}

    impl Gpu {
        fn new(ptx: &str) -> Res<Self> {
            Self::on(ptx, 0)
        }

        /// The kernels loaded on device `ordinal`.
        fn on(ptx: &str, ordinal: usize) -> Res<Self> {
            // Through pinring first: cudarc itself panics when there is no driver.
            let devices = Cuda::device_count().map_err(s)?;
            if devices <= ordinal {
                return Err(format!("no CUDA device {ordinal} ({devices} devices)"));
            }
            let ctx = CudaContext::new(ordinal).map_err(s)?;
            let image = CString::new(ptx).map_err(s)?;
            let mut module: CUmodule = ptr::null_mut();
            // SAFETY: `image` is a NUL-terminated PTX text; the context is current (cudarc
            // bound it on this thread).
            ok("cuModuleLoadData", unsafe {
                sys::cuModuleLoadData(&mut module, image.as_ptr().cast())
            })?;
            let function = |name: &str| -> Res<CUfunction> {
                let name = CString::new(name).map_err(s)?;
                let mut f: CUfunction = ptr::null_mut();
                // SAFETY: `module` was just loaded; `name` is NUL-terminated.
                ok("cuModuleGetFunction", unsafe {
                    sys::cuModuleGetFunction(&mut f, module, name.as_ptr())
                })?;
                Ok(f)
            };
            let clock_khz = ctx
                .attribute(sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)
                .map_err(s)? as u64;
            Ok(Gpu {
                spin: function("spin")?,
                check: function("check")?,
                fault: function("fault")?,
                ctx,
                module,
                clock_khz,
            })
        }

        fn launch(
            &self,
            f: CUfunction,
            grid: u32,
            block: u32,
            stream: CUstream,
            args: &mut [*mut c_void],
        ) -> Res {
            // SAFETY: `f` is a kernel of the loaded module and `args` holds one pointer per
            // kernel parameter, to a value of the parameter's type; the calling thread has
            // the context current (`bind`).
            ok("cuLaunchKernel", unsafe {
                sys::cuLaunchKernel(
                    f,
                    grid,
                    1,
                    1,
                    block,
                    1,
                    1,
                    0,
                    stream,
                    args.as_mut_ptr(),
                    ptr::null_mut(),
                )
            })
        }

        fn bind(&self) -> Res {
            self.ctx.bind_to_thread().map_err(s)
        }

        fn spin(&self, stream: CUstream, micros: u64) -> Res {
            let mut cycles = (micros * self.clock_khz / 1000) as i64;
            self.launch(
                self.spin,
                1,
                1,
                stream,
                &mut [(&mut cycles as *mut i64).cast()],
            )
        }

        fn check(
            &self,
            stream: CUstream,
            data: CUdeviceptr,
            first_sample: u64,
            words: u64,
            errors: CUdeviceptr,
            visits: CUdeviceptr,
        ) -> Res {
            let (mut data, mut first, mut wps, mut words, mut errors, mut visits) =
                (data, first_sample, WORDS_PER_SAMPLE, words, errors, visits);
            self.launch(
                self.check,
                GRID,
                BLOCK,
                stream,
                &mut [
                    (&mut data as *mut u64).cast(),
                    (&mut first as *mut u64).cast(),
                    (&mut wps as *mut u32).cast(),
                    (&mut words as *mut u64).cast(),
                    (&mut errors as *mut u64).cast(),
                    (&mut visits as *mut u64).cast(),
                ],
            )
        }

        fn fault(&self, stream: CUstream) -> Res {
            self.launch(self.fault, 1, 1, stream, &mut [])
        }
    }

    impl Drop for Gpu {
        fn drop(&mut self) {
            let _ = self.ctx.bind_to_thread();
            // SAFETY: loaded in `new`, unloaded once; every launch has been synchronized.
            let _ = unsafe { sys::cuModuleUnload(self.module) };
        }
    }

    /// Per-batch error and visit counters on the device.
    struct Tally {
        errors: CudaSlice<u32>,
        visits: CudaSlice<u32>,
        errors_ptr: CUdeviceptr,
        visits_ptr: CUdeviceptr,
        stream: Arc<CudaStream>,
    }

    impl Tally {
        fn new(stream: &Arc<CudaStream>, n: usize) -> Res<Self> {
            let errors = stream.alloc_zeros::<u32>(n).map_err(s)?;
            let visits = stream.alloc_zeros::<u32>(n).map_err(s)?;
            let errors_ptr = errors.device_ptr(stream).0;
            let visits_ptr = visits.device_ptr(stream).0;
            Ok(Tally {
                errors,
                visits,
                errors_ptr,
                visits_ptr,
                stream: stream.clone(),
            })
        }

        fn at(&self, k: u64) -> (CUdeviceptr, CUdeviceptr) {
            (self.errors_ptr + 4 * k, self.visits_ptr + 4 * k)
        }

        /// (words wrong, batches checked `times` times) after syncing.
        fn read(&self, times: u32) -> Res<(u64, usize)> {
            self.stream.synchronize().map_err(s)?;
            let errors = self.stream.clone_dtoh(&self.errors).map_err(s)?;
            let visits = self.stream.clone_dtoh(&self.visits).map_err(s)?;
            let wrong = errors.iter().map(|&e| u64::from(e)).sum();
            let checked = visits.iter().filter(|&&v| v == GRID * times).count();
            Ok((wrong, checked))
        }
    }

    /// How a checked run releases each batch.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Release {
        /// `Fence::Stream` with a raw `CUstream`.
        StreamRaw,
        /// `Fence::Stream` with a cudarc stream (`release_on`).
        StreamCudarc,
        /// `Fence::Event` with one raw `CUevent`, re-recorded for every batch.
        EventRaw,
        /// `Fence::Event` with a cudarc event, re-recorded for every batch.
        EventCudarc,
        /// Synchronizes the stream, then `Fence::Sync`.
        SyncAfterSync,
        /// `Fence::Sync` without synchronizing: wrong on purpose.
        Unfenced,
        /// Dropped after `wait_on`: fenced on the bound stream.
        DropBound,
        /// Waited on through `ready_event()` (no binding), then dropped: conservative fence.
        DropUnbound,
        /// Handed to another thread, which releases it with `Fence::Stream`.
        OtherThread,
    }

    /// Runs `n` batches through a consumer that holds each one (spin) and then checks it on
    /// the device, releasing as `release` says. Returns (words wrong, batches checked).
    fn checked(gpu: &Gpu, options: CudaOptions, n: usize, release: Release) -> Res<(u64, usize)> {
        gpu.bind()?;
        let stream = gpu.ctx.new_stream().map_err(s)?;
        let cs = CuStream::from(&stream);
        let raw = stream.cu_stream();
        let tally = Tally::new(&stream, n)?;
        let mut p = pipeline(options, 2, n)?;
        let event = Arc::new(gpu.ctx.new_event(None).map_err(s)?);
        let (to_releaser, releases) = mpsc::channel::<Batch<Cuda>>();
        let releaser = {
            let cs = cs.clone();
            std::thread::spawn(move || -> Res<usize> {
                let mut count = 0;
                for batch in releases {
                    batch.release(Fence::Stream(&cs)).map_err(|e| s(e.error))?;
                    count += 1;
                }
                Ok(count)
            })
        };
        while let Some(mut batch) = p.pop().map_err(s)? {
            let k = batch.seq();
            if release == Release::DropUnbound {
                // SAFETY: `raw` is the test's live stream, READY a live event of the batch.
                ok("cuStreamWaitEvent", unsafe {
                    sys::cuStreamWaitEvent(raw, batch.ready_event(), 0)
                })?;
            } else {
                batch.wait_on(&cs).map_err(s)?;
            }
            gpu.spin(raw, HOLD_US)?;
            let (errors, visits) = tally.at(k);
            let words = batch.len() as u64 / 4;
            gpu.check(
                raw,
                batch.device_ptr(),
                k * SAMPLES as u64,
                words,
                errors,
                visits,
            )?;
            match release {
                Release::StreamRaw => batch.release(Fence::Stream(&cs)).map_err(|e| s(e.error))?,
                Release::StreamCudarc => batch.release_on(&stream).map_err(|e| s(e.error))?,
                Release::EventRaw => {
                    let e = event.cu_event();
                    // SAFETY: live event and stream of the test's context.
                    ok("cuEventRecord", unsafe { sys::cuEventRecord(e, raw) })?;
                    // SAFETY: `event` outlives the release.
                    let fence = unsafe { CuEvent::from_raw(e) };
                    batch
                        .release(Fence::Event(&fence))
                        .map_err(|e| s(e.error))?;
                }
                Release::EventCudarc => {
                    event.record(&stream).map_err(s)?;
                    let fence = CuEvent::from(&event);
                    batch
                        .release(Fence::Event(&fence))
                        .map_err(|e| s(e.error))?;
                }
                Release::SyncAfterSync => {
                    stream.synchronize().map_err(s)?;
                    batch.release(Fence::Sync).map_err(|e| s(e.error))?;
                }
                Release::Unfenced => batch.release(Fence::Sync).map_err(|e| s(e.error))?,
                Release::DropBound | Release::DropUnbound => drop(batch),
                Release::OtherThread => to_releaser.send(batch).map_err(s)?,
            }
        }
        drop(to_releaser);
        let released = releaser
            .join()
            .map_err(|_| "releaser panicked".to_string())??;
        if release == Release::OtherThread && released != n {
            return Err(format!(
                "the other thread released {released} of {n} batches"
            ));
        }
        drop(p);
        tally.read(1)
    }

    fn clean(wrong: u64, checked: usize, n: usize) -> Res<String> {
        if wrong == 0 && checked == n {
            Ok(format!("{n} batches checked on the device, 0 words wrong"))
        } else {
            Err(format!(
                "{wrong} words wrong; {checked} of {n} batches checked"
            ))
        }
    }

    fn fenced(gpu: &Gpu, n: usize, release: Release) -> Res<String> {
        let (wrong, checked) = checked(gpu, CudaOptions::ordinal(0), n, release)?;
        clean(wrong, checked, n)
    }

    fn unfenced_corrupts(gpu: &Gpu) -> Res<String> {
        let n = 2000;
        let (wrong, checked) = checked(gpu, CudaOptions::ordinal(0), n, Release::Unfenced)?;
        if wrong > 0 {
            Ok(format!(
                "unfenced Fence::Sync: {wrong} words wrong over {checked} batches checked: \
                 the check catches overwrites"
            ))
        } else {
            Err(format!(
                "no corruption seen in {n} unfenced batches: the test is blind"
            ))
        }
    }

    /// damacy's deferred release: a prefetch thread pops, the main thread reads the batch
    /// on its "current" stream (the legacy default stream, as PyTorch's default is) and
    /// releases fenced on it.
    fn seed_deferred(gpu: &Gpu) -> Res<String> {
        let n = 2000;
        gpu.bind()?;
        let current = CuStream::legacy();
        let aux = gpu.ctx.new_stream().map_err(s)?;
        let tally = Tally::new(&aux, n)?;
        let (tx, rx) = mpsc::sync_channel::<Batch<Cuda>>(1);
        let prefetch = std::thread::spawn(move || -> Res {
            let mut p = pipeline(CudaOptions::ordinal(0), 2, n)?;
            while let Some(batch) = p.pop().map_err(s)? {
                tx.send(batch).map_err(s)?;
            }
            Ok(())
        });
        for mut batch in rx {
            let k = batch.seq();
            batch.wait_on(&current).map_err(s)?;
            gpu.spin(current.raw(), HOLD_US)?;
            let (errors, visits) = tally.at(k);
            gpu.check(
                current.raw(),
                batch.device_ptr(),
                k * SAMPLES as u64,
                BATCH_WORDS,
                errors,
                visits,
            )?;
            batch
                .release(Fence::Stream(&current))
                .map_err(|e| s(e.error))?;
        }
        prefetch
            .join()
            .map_err(|_| "prefetch thread panicked".to_string())??;
        // SAFETY: synchronizes the legacy stream of the bound context.
        ok("cuStreamSynchronize", unsafe {
            sys::cuStreamSynchronize(current.raw())
        })?;
        let (wrong, checked) = tally.read(1)?;
        clean(wrong, checked, n)
    }

    /// damacy's dedicated copy stream (seed 000): a prefetch thread copies each batch into
    /// its own buffer with a D2D on a side stream (through the batch's cudarc view),
    /// releases the batch fenced on that stream, synchronizes it and hands the buffer to
    /// the main thread, whose stream holds and checks it.
    fn seed_copy_stream(gpu: &Gpu) -> Res<String> {
        let n = 2000;
        const BUFFERS: usize = 3;
        gpu.bind()?;
        let main = gpu.ctx.default_stream();
        let main_raw = gpu.ctx.new_stream().map_err(s)?;
        let tally = Tally::new(&main_raw, n)?;
        // Allocated on the default stream, not the copy stream (the seed's advice).
        let mut buffers = (0..BUFFERS)
            .map(|_| main.alloc_zeros::<u8>(SAMPLES * SAMPLE_BYTES))
            .collect::<Result<Vec<_>, _>>()
            .map_err(s)?;
        main.synchronize().map_err(s)?;
        let ptrs: Vec<CUdeviceptr> = buffers.iter().map(|b| b.device_ptr(&main).0).collect();
        let (full_tx, full_rx) = mpsc::sync_channel::<(u64, usize)>(BUFFERS);
        let (free_tx, free_rx) =
            mpsc::channel::<(usize, Option<Arc<pinring::cudarc::driver::CudaEvent>>)>();
        for j in 0..BUFFERS {
            free_tx.send((j, None)).map_err(s)?;
        }
        let ctx = gpu.ctx.clone();
        let spin = |stream: CUstream| gpu.spin(stream, HOLD_US);
        std::thread::scope(|scope| -> Res<String> {
            let prefetch = scope.spawn(move || -> Res {
                ctx.bind_to_thread().map_err(s)?;
                let copy_stream = ctx.new_stream().map_err(s)?;
                let copy_cs = CuStream::from(&copy_stream);
                let mut p = pipeline(CudaOptions::ordinal(0), 2, n)?;
                while let Some(mut batch) = p.pop().map_err(s)? {
                    let (j, consumed) = free_rx.recv().map_err(s)?;
                    if let Some(event) = consumed {
                        copy_stream.wait(&event).map_err(s)?;
                    }
                    batch.wait_on(&copy_cs).map_err(s)?;
                    // A slow D2D: widens the window in which a missing fence would let the
                    // next H2D into this slot overwrite the batch before it is copied.
                    spin(copy_stream.cu_stream())?;
                    copy_stream
                        .memcpy_dtod(&batch.view(), &mut buffers[j])
                        .map_err(s)?;
                    let k = batch.seq();
                    batch
                        .release(Fence::Stream(&copy_cs))
                        .map_err(|e| s(e.error))?;
                    copy_stream.synchronize().map_err(s)?;
                    full_tx.send((k, j)).map_err(s)?;
                }
                Ok(())
            });
            for (k, j) in full_rx {
                let raw = main_raw.cu_stream();
                gpu.spin(raw, HOLD_US)?;
                let (errors, visits) = tally.at(k);
                gpu.check(
                    raw,
                    ptrs[j],
                    k * SAMPLES as u64,
                    BATCH_WORDS,
                    errors,
                    visits,
                )?;
                let consumed = main_raw.record_event(None).map_err(s)?;
                free_tx.send((j, Some(Arc::new(consumed)))).map_err(s)?;
            }
            prefetch
                .join()
                .map_err(|_| "prefetch thread panicked".to_string())??;
            let (wrong, checked) = tally.read(1)?;
            clean(wrong, checked, n)
        })
    }

    /// Drops the pipeline with every device slot leased and kernels still reading them;
    /// the batches stay valid, are read again after the drop, and then dropped.
    fn drop_with_leased(gpu: &Gpu) -> Res<String> {
        const D: usize = 3;
        gpu.bind()?;
        let stream = gpu.ctx.new_stream().map_err(s)?;
        let cs = CuStream::from(&stream);
        let raw = stream.cu_stream();
        let tally = Tally::new(&stream, D)?;
        let mut p = pipeline(CudaOptions::ordinal(0), D, 1000)?;
        let mut held = Vec::new();
        for _ in 0..D {
            let mut batch = p.pop().map_err(s)?.ok_or("source ended early")?;
            batch.wait_on(&cs).map_err(s)?;
            gpu.spin(raw, 2000)?;
            let (errors, visits) = tally.at(batch.seq());
            gpu.check(
                raw,
                batch.device_ptr(),
                batch.seq() * SAMPLES as u64,
                BATCH_WORDS,
                errors,
                visits,
            )?;
            held.push(batch);
        }
        let t = Instant::now();
        drop(p);
        let dropped_in = t.elapsed();
        for batch in &held {
            let (errors, visits) = tally.at(batch.seq());
            gpu.check(
                raw,
                batch.device_ptr(),
                batch.seq() * SAMPLES as u64,
                BATCH_WORDS,
                errors,
                visits,
            )?;
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

    fn invalid_ordinal() -> Res<String> {
        match pipeline(CudaOptions::ordinal(99), 2, 10) {
            Ok(_) => Err("a pipeline opened on device 99".into()),
            Err(e) => {
                if e.contains("cuDeviceGet") && e.contains("CUDA_ERROR_INVALID_DEVICE") {
                    Ok(e)
                } else {
                    Err(format!("unexpected error: {e}"))
                }
            }
        }
    }

    /// Two pipelines in one process at once: one by ordinal, one adopting the context
    /// current on its thread, each with its own consumer thread.
    fn two_pipelines(gpu: &Gpu) -> Res<String> {
        let n = 2000;
        let results = std::thread::scope(|scope| {
            let a = scope.spawn(|| checked(gpu, CudaOptions::ordinal(0), n, Release::StreamRaw));
            let b = scope.spawn(|| -> Res<(u64, usize)> {
                gpu.bind()?; // the context current on this thread, as PyTorch leaves it
                let adopted = pipeline(CudaOptions::current(), 2, 1)?;
                if adopted.backend().ordinal() != 0 {
                    return Err("adopted the wrong device".into());
                }
                drop(adopted);
                checked(gpu, CudaOptions::current(), n, Release::EventRaw)
            });
            (a.join(), b.join())
        });
        let (a, b) = match results {
            (Ok(a), Ok(b)) => (a?, b?),
            _ => return Err("a consumer thread panicked".into()),
        };
        clean(a.0 + b.0, a.1 + b.1, 2 * n)?;
        Ok(format!(
            "ordinal(0) and current() pipelines ran at once: 2 x {n} batches, 0 words wrong"
        ))
    }

    /// Two pipelines on two devices in one process, each checked on its own device by
    /// kernels loaded there. `None` on a machine with one device.
    fn two_devices(gpu0: &Gpu, ptx: &str) -> Option<Res<String>> {
        match Cuda::device_count() {
            Ok(n) if n >= 2 => {}
            Ok(n) => {
                println!("RESULT\ttwo_devices_one_process\tINFO\tnot run: this machine has {n} CUDA device(s)");
                return None;
            }
            Err(e) => return Some(Err(s(e))),
        }
        Some((|| {
            let gpu1 = Gpu::on(ptx, 1)?;
            let n = 2000;
            let results = std::thread::scope(|scope| {
                let a =
                    scope.spawn(|| checked(gpu0, CudaOptions::ordinal(0), n, Release::StreamRaw));
                let b = scope.spawn(|| -> Res<(u64, usize)> {
                    let p = pipeline(CudaOptions::ordinal(1), 2, 1)?;
                    if p.backend().ordinal() != 1 {
                        return Err("ordinal(1) bound another device".into());
                    }
                    drop(p);
                    checked(&gpu1, CudaOptions::ordinal(1), n, Release::EventRaw)
                });
                (a.join(), b.join())
            });
            let (a, b) = match results {
                (Ok(a), Ok(b)) => (a?, b?),
                _ => return Err("a consumer thread panicked".into()),
            };
            clean(a.0 + b.0, a.1 + b.1, 2 * n)?;
            Ok(format!(
                "ordinal(0) and ordinal(1) pipelines ran at once: 2 x {n} batches, each checked on its own device, 0 words wrong"
            ))
        })())
    }

    /// A CUDA error on the copy thread reaches the consumer (run in its own process: the
    /// error is sticky and kills the context).
    fn fault(gpu: &Gpu) -> Res<String> {
        gpu.bind()?;
        let stream = gpu.ctx.new_stream().map_err(s)?;
        let cs = CuStream::from(&stream);
        let mut p = pipeline(CudaOptions::ordinal(0), 2, 1000)?;
        let t = Instant::now();
        let mut popped = 0;
        let error = loop {
            match p.pop() {
                Ok(Some(mut batch)) => {
                    popped += 1;
                    if batch.wait_on(&cs).is_ok() && popped == 2 {
                        gpu.fault(stream.cu_stream())?;
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
        match error {
            Error::Backend { call, code, .. } if code != 0 => {
                if !matches!(next, Err(Error::Stopped)) {
                    return Err(format!("after the error, pop gave {next:?}"));
                }
                Ok(format!(
                    "pop returned {call} failed with code {code} after {popped} batches \
                     ({took:.1?}); next pop: Stopped; drop took {dropped_in:.1?}"
                ))
            }
            other => Err(format!("expected a CUDA Error::Backend, got: {other}")),
        }
    }

    /// What pinning a 256 MiB ring does under this process's locked-memory limit
    /// (informational: the outcome depends on the driver and the process's privileges).
    fn memlock() -> Res<String> {
        let config = Config::builder()
            .samples_per_batch(1)
            .bytes_per_sample(64 << 20)
            .host_slots(4)
            .decode_threads(1)
            .cuda(CudaOptions::ordinal(0))
            .build()
            .map_err(s)?;
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
        Ok(match Pipeline::new(config, decoder, std::iter::empty()) {
            Ok(_) => format!(
                "RLIMIT_MEMLOCK {limit} bytes (soft/hard): a 256 MiB ring was registered anyway \
                 (no locked-memory accounting for this registration here)"
            ),
            Err(e) => format!("RLIMIT_MEMLOCK {limit} bytes (soft/hard): {e}"),
        })
    }

    fn report(name: &str, result: std::thread::Result<Res<String>>) {
        let (status, detail) = match result {
            Ok(Ok(detail)) => ("PASS", detail),
            Ok(Err(e)) => ("FAIL", e),
            Err(panic) => (
                "FAIL",
                panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                    .unwrap_or_else(|| "panicked".into()),
            ),
        };
        println!(
            "RESULT\t{name}\t{status}\t{}",
            detail.replace(['\t', '\n'], " ")
        );
    }

    fn run(name: &str, f: impl FnOnce() -> Res<String>) {
        let t = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        eprintln!("{name}: {:.2?}", t.elapsed());
        report(name, result);
    }

    pub fn main() {
        let args: Vec<String> = std::env::args().collect();
        let mode = args.get(1).map(String::as_str).unwrap_or("all");
        let ptx_path = args
            .iter()
            .position(|a| a == "--ptx")
            .and_then(|i| args.get(i + 1));
        if mode == "memlock" {
            let detail = memlock().unwrap_or_else(|e| e);
            println!("RESULT\tmemlock_limit\tINFO\t{detail}");
            return;
        }
        let Some(ptx_path) = ptx_path else {
            eprintln!("usage: gpu_check <all|fault|memlock> --ptx PATH");
            std::process::exit(2);
        };
        let ptx = match std::fs::read_to_string(ptx_path) {
            Ok(ptx) => ptx,
            Err(e) => {
                println!("RESULT\tsetup\tFAIL\t{e}");
                std::process::exit(1);
            }
        };
        let gpu = match Gpu::new(&ptx) {
            Ok(gpu) => gpu,
            Err(e) => {
                println!("RESULT\tsetup\tFAIL\t{e}");
                std::process::exit(1);
            }
        };
        if mode == "fault" {
            run("copy_error_reaches_consumer", || fault(&gpu));
            // The context is dead now: leak the module rather than unload it.
            std::mem::forget(gpu);
            return;
        }
        let g = &gpu;
        run("stream_fence_10k_batches", || {
            fenced(g, 10_000, Release::StreamRaw)
        });
        run("unfenced_release_corrupts", || unfenced_corrupts(g));
        run("fence_stream_cudarc", || {
            fenced(g, 2000, Release::StreamCudarc)
        });
        run("fence_event_raw_reused", || {
            fenced(g, 2000, Release::EventRaw)
        });
        run("fence_event_cudarc", || {
            fenced(g, 2000, Release::EventCudarc)
        });
        run("fence_sync_after_sync", || {
            fenced(g, 500, Release::SyncAfterSync)
        });
        run("drop_bound_fences_on_stream", || {
            fenced(g, 2000, Release::DropBound)
        });
        run("drop_unbound_ctx_sync", || {
            fenced(g, 500, Release::DropUnbound)
        });
        run("release_from_other_thread", || {
            fenced(g, 2000, Release::OtherThread)
        });
        run("seed_deferred_release", || seed_deferred(g));
        run("seed_dedicated_copy_stream", || seed_copy_stream(g));
        run("drop_with_batches_leased", || drop_with_leased(g));
        run("invalid_device_ordinal", invalid_ordinal);
        run("two_pipelines_one_process", || two_pipelines(g));
        if let Some(result) = two_devices(g, &ptx) {
            report("two_devices_one_process", Ok(result));
        }
    }
}

fn main() {
    #[cfg(feature = "cuda")]
    suite::main();
    #[cfg(not(feature = "cuda"))]
    {
        eprintln!("gpu_check needs the `cuda` feature");
        std::process::exit(2);
    }
}
