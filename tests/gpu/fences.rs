//! Every release form keeps a slot until a kernel has read it, checked on the device.

use std::sync::{mpsc, Arc};

use pinring::cudarc::driver::result;
use pinring::cudarc::driver::sys::CUevent_wait_flags;
use pinring::{Batch, CuEvent, CuStream, Cuda, CudaOptions, Fence};

use crate::harness::{clean, pipeline, s, Gpu, Res, Tally, HOLD_US};
use crate::report;

/// How a checked run releases each batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
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
pub fn checked(gpu: &Gpu, options: CudaOptions, n: usize, release: Release) -> Res<(u64, usize)> {
    gpu.bind()?;
    let stream = gpu.stream()?;
    let cs = CuStream::from(&stream);
    // SAFETY: `stream` outlives every use of the raw handle below.
    let raw = unsafe { CuStream::from_raw(stream.cu_stream()) };
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
        if release == Release::DropUnbound {
            // SAFETY: the test's live stream and the batch's live READY event.
            unsafe {
                result::stream::wait_event(
                    stream.cu_stream(),
                    batch.ready_event(),
                    CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            }
            .map_err(s)?;
        } else {
            batch.wait_on(&cs).map_err(s)?;
        }
        gpu.spin(&stream, HOLD_US)?;
        gpu.check_batch(&stream, &batch, &tally)?;
        match release {
            Release::StreamRaw => batch.release(Fence::Stream(&raw)).map_err(|e| s(e.error))?,
            Release::StreamCudarc => batch.release_on(&stream).map_err(|e| s(e.error))?,
            Release::EventRaw => {
                let e = event.cu_event();
                // SAFETY: live event and stream of the test's context.
                unsafe { result::event::record(e, stream.cu_stream()) }.map_err(s)?;
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
        .map_err(|_| "the releasing thread panicked".to_string())??;
    if release == Release::OtherThread && released != n {
        return Err(format!(
            "the other thread released {released} of {n} batches"
        ));
    }
    drop(p);
    tally.read(1)
}

fn fenced(n: usize, release: Release) -> Res<String> {
    let gpu = Gpu::new()?;
    let (wrong, checked) = checked(&gpu, CudaOptions::ordinal(0), n, release)?;
    clean(wrong, checked, n)
}

// Every release form keeps each slot until the check read it: a clean run of that many
// batches.
gpu_test!(stream_fence_10k_batches => fenced(10_000, Release::StreamRaw));
gpu_test!(fence_stream_cudarc => fenced(2000, Release::StreamCudarc));
gpu_test!(fence_event_raw_reused => fenced(2000, Release::EventRaw));
gpu_test!(fence_event_cudarc => fenced(2000, Release::EventCudarc));
gpu_test!(fence_sync_after_sync => fenced(500, Release::SyncAfterSync));
gpu_test!(drop_bound_fences_on_stream => fenced(2000, Release::DropBound));
gpu_test!(drop_unbound_ctx_sync => fenced(500, Release::DropUnbound));
gpu_test!(release_from_other_thread => fenced(2000, Release::OtherThread));

#[test]
#[ignore = "needs a CUDA GPU (scripts/gpu-check.sh)"]
fn unfenced_release_corrupts() {
    let result = (|| {
        let gpu = Gpu::new()?;
        let n = 2000;
        let (wrong, checked) = checked(&gpu, CudaOptions::ordinal(0), n, Release::Unfenced)?;
        if wrong > 0 {
            Ok(format!(
                "unfenced Fence::Sync: {wrong} words wrong over {checked} batches checked: the \
                 check catches overwrites"
            ))
        } else {
            Err(format!(
                "no corruption seen in {n} unfenced batches: the check is blind"
            ))
        }
    })();
    report("unfenced_release_corrupts", result);
}
