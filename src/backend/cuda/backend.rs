//! The cuda backend itself: its resources and the operations the pipeline drives.

use std::fmt;
use std::ptr;
use std::time::Duration;

use cudarc::driver::sys::{self, CUcontext, CUdeviceptr, CUevent_wait_flags, CUresult};
use cudarc::driver::{result, CudaContext};

use super::completion::Completion;
use super::context::{self, Bound};
use super::driver::{self, Call};
use super::handles::{CuEvent, CuStream};
use super::options::CudaOptions;
use super::resources::{Event, Maker, Memory, Owned, Registration, Stream, Teardown};
use crate::backend::private::{CopyFailed, CopyRole, CopyRun, CopyWaker, Layout, Ops};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::host_ring::HostRing;
use crate::slot::DeviceIdx;
use crate::sync::native::{current_thread, sleep, Arc, Instant, ThreadId};
use crate::Fence;

/// The cuda backend's device side of one pipeline. See the [module docs](super).
///
/// Every resource frees itself in its own context when the backend drops, after the
/// backend's teardown has waited (up to the shutdown timeout) for the copy stream, which by
/// then also waits for every release fence still pending.
pub struct Cuda {
    /// READY(d): recorded on the copy stream after each copy into device slot d.
    ready: Box<[Owned<Event>]>,
    /// COPIED(h): recorded on the copy stream after each copy run that starts at host slot
    /// h (one record per run, after its last batch); the completion thread follows them.
    copied: Box<[Owned<Event>]>,
    /// FENCE(d): what a release of slot d captured.
    fence: Box<[Owned<Event>]>,
    /// Per-slot streams a `Fence::Event` release waits on before recording FENCE(d).
    fence_streams: Box<[Owned<Stream>]>,
    /// The one copy stream, driven by the pipeline's copy thread.
    copy_stream: Owned<Stream>,
    /// Every device slot, `device_slots × device_stride` bytes.
    memory: Owned<Memory>,
    /// The host ring, pinned.
    registration: Registration,
    /// The completion thread: learns when copies complete and wakes the copy thread.
    completion: Completion,
    teardown: Arc<Teardown>,
    ctx: Arc<CudaContext>,
    layout: Layout,
}

impl fmt::Debug for Cuda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cuda")
            .field("ordinal", &self.ctx.ordinal())
            .field("layout", &self.layout)
            .finish()
    }
}

/// A release fence as the cuda backend captured it: whether FENCE(d) was recorded.
#[derive(Debug)]
pub struct CudaFence {
    recorded: bool,
}

/// What a batch bound with `wait_on` remembers.
#[derive(Debug)]
pub struct CudaBinding {
    stream: CuStream,
    /// For the per-thread default stream: the thread whose stream it is.
    thread: Option<ThreadId>,
}

impl Cuda {
    /// How many CUDA devices this process sees, or why it sees none (no driver library, no
    /// device, a driver error). Never panics; use it to choose between this backend and
    /// the cpu one.
    pub fn device_count() -> Result<usize> {
        driver::load()?;
        result::init().call("cuInit")?;
        let count = result::device::get_count().call("cuDeviceGetCount")?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// The ordinal of the device the pipeline is bound to.
    pub fn ordinal(&self) -> usize {
        self.ctx.ordinal()
    }

    /// The pipeline's context as cudarc sees it (to load modules, make streams, ...). It
    /// behaves as cudarc documents: pinring changes none of its settings.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The raw context handle.
    pub fn raw_context(&self) -> CUcontext {
        self.ctx.cu_ctx()
    }

    /// The registered host ring: its base address and length in bytes. For measurements
    /// against the pipeline's own pinned memory; the ring's bytes belong to the pipeline
    /// (decode workers write them), so only read from it while the pipeline is idle.
    pub fn host_ring(&self) -> (*const u8, usize) {
        let ring = self.registration.ring();
        (ring.base().cast_const(), ring.len())
    }

    /// READY(d)'s handle (for consumers that wait on it themselves).
    pub(super) fn ready_event(&self, d: DeviceIdx) -> sys::CUevent {
        self.ready[d.0].raw()
    }

    fn slot(&self, d: DeviceIdx) -> CUdeviceptr {
        assert!(d.0 < self.ready.len(), "device slot {} out of range", d.0);
        self.memory.raw() + (d.0 * self.layout.device_stride) as CUdeviceptr
    }

    /// Binds the context on the copy thread (it stays bound: the thread is the pipeline's).
    #[inline]
    fn bind_copy_thread(&self) -> Result<()> {
        if context::current()? != self.ctx.cu_ctx() {
            // SAFETY: the backend's live context, bound on the pipeline's own thread.
            unsafe { result::ctx::set_current(self.ctx.cu_ctx()) }.call("cuCtxSetCurrent")?;
        }
        Ok(())
    }

    /// Refuses a stream that is not the pipeline context's: the release fence is recorded
    /// on the stream, which CUDA allows only for a stream of the event's own context. The
    /// null, legacy and per-thread handles name the stream of the context current on the
    /// calling thread, so they are judged by that (before the pipeline's is bound).
    fn check_stream(&self, stream: &CuStream) -> Result<()> {
        let owner = if stream.is_relative() {
            let current = context::current()?;
            if current.is_null() {
                self.ctx.cu_ctx() // the pipeline's context will be bound for the call
            } else {
                current
            }
        } else {
            let mut ctx: CUcontext = ptr::null_mut();
            // SAFETY: writes one handle; `stream` is the caller's live stream (CuStream's
            // contract).
            unsafe { sys::cuStreamGetCtx(stream.raw(), &mut ctx) }
                .result()
                .call("cuStreamGetCtx")?;
            ctx
        };
        if owner == self.ctx.cu_ctx() {
            Ok(())
        } else {
            Err(Error::Fence(format!(
                "the stream belongs to another CUDA context than the pipeline's (device {}): \
                 the release fence cannot be recorded on it. Make the stream wait with \
                 cuStreamWaitEvent on the batch's ready_event(), record an event on it after \
                 your kernels, and release with Fence::Event",
                self.ctx.ordinal()
            )))
        }
    }

    /// Waits (polling, bounded) until the copy stream has drained: every copy, and every
    /// release fence handed to it, is done. False at the deadline.
    fn quiesce(&self) -> bool {
        let deadline = Instant::now().checked_add(self.layout.shutdown_timeout);
        let mut pause = Duration::from_micros(10);
        loop {
            // SAFETY: a live stream of this backend (a query needs no current context).
            match unsafe { sys::cuStreamQuery(self.copy_stream.raw()) } {
                CUresult::CUDA_ERROR_NOT_READY => {}
                // Done, or the context is dead: nothing runs on it any more.
                _ => return true,
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(1));
        }
    }
}

impl Drop for Cuda {
    fn drop(&mut self) {
        let drained = self.quiesce();
        // Drained: the completion thread is not blocked in the driver, and ends at once.
        self.completion.stop(drained);
        if !drained {
            // Device work past the shutdown timeout may still read the ring or write the
            // slots: free nothing (documented leak), and keep the ring mapped for good.
            self.teardown.leak();
            std::mem::forget(self.registration.ring().clone());
        }
    }
}

impl Backend for Cuda {
    type Options = CudaOptions;
    type Stream = CuStream;
    type Event = CuEvent;
    type DevicePtr = CUdeviceptr;
}

impl Ops for Cuda {
    type Captured = CudaFence;
    type Binding = CudaBinding;

    fn open(
        options: &CudaOptions,
        ring: Arc<HostRing>,
        layout: Layout,
        waker: CopyWaker,
    ) -> Result<Self> {
        driver::load()?;
        let ctx = context::open(options)?;
        let bytes = layout
            .device_stride
            .checked_mul(layout.device_slots)
            .ok_or(Error::Internal("device slots overflow usize"))?;
        let teardown = Arc::new(Teardown::default());
        let make = Maker {
            ctx: &ctx,
            teardown: &teardown,
        };
        let copied = make.events(layout.host_slots, true)?;
        let completion =
            Completion::start(ctx.cu_ctx(), copied.iter().map(Owned::raw).collect(), waker)?;
        Ok(Cuda {
            ready: make.events(layout.device_slots, true)?,
            copied,
            completion,
            fence: make.events(layout.device_slots, false)?,
            fence_streams: make.streams(layout.device_slots)?,
            copy_stream: make.stream()?,
            memory: make.memory(bytes)?,
            registration: make.registration(&ring)?,
            teardown,
            ctx,
            layout,
        })
    }

    fn notifies_copy_done(&self, _: &CopyRole) -> bool {
        true
    }

    fn wait_fence(&self, _: &CopyRole, d: DeviceIdx, fence: CudaFence) -> Result<()> {
        if fence.recorded {
            self.bind_copy_thread()?;
            // SAFETY: live handles of this backend; FENCE(d) was recorded by the release
            // that published `fence` (happens-before this call: the backend contract).
            unsafe {
                result::stream::wait_event(
                    self.copy_stream.raw(),
                    self.fence[d.0].raw(),
                    CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            }
            .call("cuStreamWaitEvent")?;
        }
        Ok(())
    }

    fn copy(&self, _: &CopyRole, run: &CopyRun) -> Result<(), CopyFailed> {
        self.bind_copy_thread().map_err(CopyFailed::at_start)?;
        let stream = self.copy_stream.raw();
        let layout = &self.layout;
        assert!(
            run.last_bytes <= layout.batch_bytes,
            "copy larger than a slot"
        );
        let ring = self.registration.ring();
        // One copy of the whole run where the slots lie alike on both sides (the strides
        // match: no huge pages), one per batch otherwise. Each piece is (host slot, device
        // slot, bytes).
        let whole = (run.batches - 1) * layout.host_stride + run.last_bytes;
        let pieces: &mut dyn Iterator<Item = (usize, DeviceIdx, usize)> =
            if layout.host_stride == layout.device_stride {
                &mut std::iter::once((run.host.0, run.device, whole))
            } else {
                &mut run.each().map(|(seq, h, d)| {
                    let bytes = if seq + 1 == run.end() {
                        run.last_bytes
                    } else {
                        layout.batch_bytes
                    };
                    (h.0, d, bytes)
                })
            };
        for (h, d, bytes) in pieces {
            let src = ring.slot_ptr(h).cast_const();
            // SAFETY: `src..src + bytes` lies in the run's host slots of the registered ring
            // (they are consecutive, and the run does not wrap), which the slot protocol
            // keeps unwritten while they are IN_FLIGHT (until the completion count passes
            // them), so a shared slice over it is sound for the enqueue.
            let src = unsafe { std::slice::from_raw_parts(src, bytes) };
            // SAFETY: the destination lies in the run's device slots, which nothing reads
            // until their READY points (consumers wait on them) and whose previous readers'
            // fences the copy stream already waits on; the source stays registered and
            // mapped until the copy stream drains (the teardown).
            unsafe { result::memcpy_htod_async(self.slot(d), src, stream) }
                .call("cuMemcpyHtoDAsync")
                .map_err(CopyFailed::at_start)?;
        }
        // Each batch's own READY point, then one COPIED point for the whole run.
        let mut ready = Ok(());
        let mut enqueued = 0;
        for (_, _, d) in run.each() {
            // SAFETY: live handles of this backend, recorded by the copy thread only.
            ready = unsafe { result::event::record(self.ready[d.0].raw(), stream) }
                .call("cuEventRecord");
            if ready.is_err() {
                break;
            }
            enqueued += 1;
        }
        if enqueued > 0 {
            // SAFETY: as above. COPIED(h) of the run's first host slot is not recorded again
            // before the completion thread has seen this record complete (the slot is freed
            // only then). Should this record fail, the copies still complete but the
            // completion thread would not learn of it: the run fails.
            unsafe { result::event::record(self.copied[run.host.0].raw(), stream) }
                .call("cuEventRecord")
                .map_err(|error| CopyFailed { enqueued: 0, error })?;
            self.completion
                .recorded(run.host, run.first + enqueued as u64);
        }
        ready.map_err(|error| CopyFailed { enqueued, error })
    }

    fn completed(&self, _: &CopyRole) -> Result<u64> {
        self.completion.completed()
    }

    fn ready_on(&self, d: DeviceIdx, stream: &CuStream) -> Result<CudaBinding> {
        self.check_stream(stream)?;
        let _bound = Bound::new(self.ctx.cu_ctx())?;
        // SAFETY: READY(d) is live; `stream` is live by CuStream's contract.
        unsafe {
            result::stream::wait_event(
                stream.raw(),
                self.ready[d.0].raw(),
                CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .call("cuStreamWaitEvent")?;
        Ok(CudaBinding {
            stream: stream.clone(),
            thread: stream.is_per_thread().then(|| current_thread().id()),
        })
    }

    fn ready_sync(&self, d: DeviceIdx) -> Result<()> {
        let _bound = Bound::new(self.ctx.cu_ctx())?;
        // SAFETY: a live event of this backend.
        unsafe { result::event::synchronize(self.ready[d.0].raw()) }.call("cuEventSynchronize")
    }

    fn capture(&self, d: DeviceIdx, fence: Fence<'_, Self>) -> Result<CudaFence> {
        let recorded = match fence {
            Fence::Sync => false,
            Fence::Stream(stream) => {
                self.check_stream(stream)?;
                let _bound = Bound::new(self.ctx.cu_ctx())?;
                // SAFETY: FENCE(d) is live and recorded only by slot d's holder (the
                // caller, now); `stream` is live by CuStream's contract and belongs to the
                // pipeline's context (checked).
                unsafe { result::event::record(self.fence[d.0].raw(), stream.raw()) }
                    .call("cuEventRecord")?;
                true
            }
            Fence::Event(event) => {
                let _bound = Bound::new(self.ctx.cu_ctx())?;
                let fence_stream = self.fence_streams[d.0].raw();
                // SAFETY: slot d's fence stream, used only by slot d's holder; `event` is
                // live by CuEvent's contract (it may belong to any context).
                unsafe {
                    result::stream::wait_event(
                        fence_stream,
                        event.raw(),
                        CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                    )
                }
                .call("cuStreamWaitEvent")?;
                // SAFETY: as above; FENCE(d) is recorded only by slot d's holder.
                unsafe { result::event::record(self.fence[d.0].raw(), fence_stream) }
                    .call("cuEventRecord")?;
                true
            }
        };
        Ok(CudaFence { recorded })
    }

    /// Fences on the bound stream; when that is not possible from this thread (a
    /// per-thread default stream bound on another thread, or a legacy stream while another
    /// context is current here) or the record fails, fences conservatively.
    fn capture_binding(&self, d: DeviceIdx, binding: CudaBinding) -> CudaFence {
        let here = current_thread().id();
        if binding.thread.is_none_or(|t| t == here) {
            if let Ok(fence) = self.capture(d, Fence::Stream(&binding.stream)) {
                return fence;
            }
        }
        self.capture_conservative(d)
    }

    /// `cuCtxSynchronize` on the pipeline's context: blocks the calling thread until every
    /// stream of the context has drained (see the module docs for the cost).
    fn capture_conservative(&self, _d: DeviceIdx) -> CudaFence {
        if let Ok(_bound) = Bound::new(self.ctx.cu_ctx()) {
            // A failure means the context is dead: nothing runs on it, so no fence is
            // needed either.
            let _ = result::ctx::synchronize();
        }
        CudaFence { recorded: false }
    }

    fn device_ptr(&self, d: DeviceIdx) -> CUdeviceptr {
        self.slot(d)
    }
}
