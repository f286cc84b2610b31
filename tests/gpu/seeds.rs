//! The two release patterns of damacy's async-prefetch doc, checked on the device.

use std::sync::{mpsc, Arc};

use pinring::cudarc::driver::CudaEvent;
use pinring::{Batch, CuStream, Cuda, CudaOptions, Fence};

use crate::harness::{
    clean, pipeline, s, Gpu, Res, Tally, BATCH_WORDS, HOLD_US, SAMPLES, SAMPLE_BYTES,
};

/// Deferred release: a prefetch thread pops, the main thread reads the batch on its
/// "current" stream (the legacy default stream, as PyTorch's default is) and releases
/// fenced on it.
fn deferred() -> Res<String> {
    let n = 2000;
    let gpu = Gpu::bound()?;
    let current = CuStream::legacy();
    let main = gpu.ctx.default_stream();
    let aux = gpu.stream()?;
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
        batch.wait_on(&current).map_err(s)?;
        gpu.spin(&main, HOLD_US)?;
        gpu.check_batch(&main, &batch, &tally)?;
        batch
            .release(Fence::Stream(&current))
            .map_err(|e| s(e.error))?;
    }
    prefetch
        .join()
        .map_err(|_| "the prefetch thread panicked".to_string())??;
    let (wrong, checked) = tally.read(1)?;
    clean(wrong, checked, n)
}

/// Dedicated copy stream: a prefetch thread copies each batch into its own buffer with a
/// D2D on a side stream (through `Batch::view_on`, a cudarc slice on that stream),
/// releases the batch fenced on that stream, synchronizes it and hands the buffer to the
/// main thread, whose stream holds and checks it. The buffers are allocated on the
/// default stream, not the copy stream (the seed's advice).
fn dedicated_copy_stream() -> Res<String> {
    let n = 2000;
    const BUFFERS: usize = 3;
    let gpu = Gpu::bound()?;
    let main = gpu.ctx.default_stream();
    let checks = gpu.stream()?;
    let tally = Tally::new(&checks, n)?;
    let mut buffers = (0..BUFFERS)
        .map(|_| main.alloc_zeros::<u8>(SAMPLES * SAMPLE_BYTES))
        .collect::<Result<Vec<_>, _>>()
        .map_err(s)?;
    main.synchronize().map_err(s)?;
    let ptrs: Vec<u64> = buffers
        .iter()
        .map(|b| pinring::cudarc::driver::DevicePtr::device_ptr(b, &main).0)
        .collect();
    let (full_tx, full_rx) = mpsc::sync_channel::<(u64, usize)>(BUFFERS);
    let (free_tx, free_rx) = mpsc::channel::<(usize, Option<Arc<CudaEvent>>)>();
    for j in 0..BUFFERS {
        free_tx.send((j, None)).map_err(s)?;
    }
    let ctx = gpu.ctx.clone();
    let gpu_ref = &gpu;
    std::thread::scope(|scope| -> Res<String> {
        let prefetch = scope.spawn(move || -> Res {
            ctx.bind_to_thread().map_err(s)?;
            let copy_stream = ctx.new_stream().map_err(s)?;
            let mut p = pipeline(CudaOptions::ordinal(0), 2, n)?;
            while let Some(mut batch) = p.pop().map_err(s)? {
                let (j, consumed) = free_rx.recv().map_err(s)?;
                if let Some(event) = consumed {
                    copy_stream.wait(&event).map_err(s)?;
                }
                let k = batch.seq();
                {
                    let view = batch.view_on(&copy_stream).map_err(s)?;
                    // A slow D2D: widens the window in which a missing fence would let the
                    // next copy into this slot overwrite the batch before it is copied.
                    gpu_ref.spin(&copy_stream, HOLD_US)?;
                    copy_stream
                        .memcpy_dtod(&*view, &mut buffers[j])
                        .map_err(s)?;
                }
                batch.release_on(&copy_stream).map_err(|e| s(e.error))?;
                copy_stream.synchronize().map_err(s)?;
                full_tx.send((k, j)).map_err(s)?;
            }
            Ok(())
        });
        for (k, j) in full_rx {
            gpu.spin(&checks, HOLD_US)?;
            gpu.check(
                &checks,
                ptrs[j],
                k * SAMPLES as u64,
                BATCH_WORDS,
                tally.at(k),
            )?;
            let consumed = checks.record_event(None).map_err(s)?;
            free_tx.send((j, Some(Arc::new(consumed)))).map_err(s)?;
        }
        prefetch
            .join()
            .map_err(|_| "the prefetch thread panicked".to_string())??;
        let (wrong, checked) = tally.read(1)?;
        clean(wrong, checked, n)
    })
}

gpu_test!(seed_deferred_release => deferred());

gpu_test!(seed_dedicated_copy_stream => dedicated_copy_stream());
