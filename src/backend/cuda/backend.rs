//! The cuda backend itself: its resources and the operations the pipeline drives.

use std::fmt;
use std::ptr;
use std::time::Duration;

use cudarc::driver::sys::{self, CUcontext, CUdeviceptr, CUevent_wait_flags, CUresult};
use cudarc::driver::{result, CudaContext};

use super::completion::{Completion, Parking};
use super::context::{self, Bound};
use super::copies::{Copies, Pieces};
use super::driver::{self, Call};
use super::fence::{self, CheckedStream, CudaBinding, CudaFence, FenceOrder};
use super::handles::{CuEvent, CuStream};
use super::options::{CopyCalls, CudaOptions};
use super::resources::{Event, Maker, Memory, Owned, Registration, Stream, Teardown};
use crate::backend::bound::BoundStreams;
use crate::backend::contract::{
    Backend, CopyFailed, CopyRole, CopyRun, CopyWaker, Layout, Ops, POISON_BYTE,
};
use crate::error::{Error, Result};
use crate::host_ring::HostRing;
use crate::slot::index::DeviceIdx;
use crate::sync::native::{current_thread_id, sleep, Arc, Instant};

/// The cuda backend's device side of one pipeline: a pinned host ring, side-stream H2D
/// copies and event-fenced device slots, through the CUDA driver API (cudarc, loaded at
/// run time).
///
/// # What it holds
///
/// - The host ring (one anonymous mapping) registered with `cuMemHostRegister`
///   (portable, not write-combined, its exact size) for the backend's lifetime.
/// - The device slots: one `cuMemAlloc` of `device_slots` slots, each starting on a page
///   boundary, so that a run of consecutive batches lies in the device slots as in the
///   host ring and copies in one `cuMemcpyHtoDAsync` (each batch keeps its READY event).
/// - One non-blocking copy stream, driven by the pipeline's copy thread alone.
/// - Events, created once with timing disabled and reused (none per batch): READY(d) per
///   device slot (recorded after each copy into it; plain, for stream-side waits), COPIED(h)
///   per host slot (after each run of copies out of host slots from h; plain too: the
///   backend's completion thread follows them in order, spinning briefly and then waiting
///   in the driver on PARKED, its one blocking-sync event, on a stream of its own; its copy
///   count wakes the copy thread and any [`Batch::synchronize`](crate::Batch::synchronize)),
///   FENCE(d) per device slot (what a release captured) and LINK(d) per device slot (joins
///   several streams into it).
/// - One non-blocking fence stream per device slot, for [`Fence::Event`], releases of a
///   batch bound to several streams, and the poison mode.
///
/// # Release fences
///
/// A release captures what the device must finish, at release time, in FENCE(d):
/// - [`Fence::Stream(s)`](crate::Fence::Stream): `cuEventRecord(FENCE(d), s)`. `s` must belong
///   to the pipeline's context (otherwise [`Error::Fence`]).
/// - [`Fence::Event(e)`](crate::Fence::Event): `cuStreamWaitEvent(fence_stream(d), e)` then
///   `cuEventRecord(FENCE(d), fence_stream(d))`: FENCE(d) stands for `e`'s record at release
///   time (a later record of `e` changes nothing), a late `e` stalls only slot `d`, and `e`
///   may belong to another context or device.
/// - [`Fence::Sync`] captures nothing (it covers every stream, by the caller's promise).
/// - [`Fence::Bound`] captures what a drop of the bound batch would: the streams it is bound
///   to (by `wait_on`, and the declared consumer stream every `pop` binds).
///
/// A release on a stream the batch is bound to, or on the one the last checked release named
/// (its `cuStreamGetId` kept), skips the context check (`cuStreamGetCtx`).
///
/// A batch bound with [`Batch::wait_on`](crate::Batch::wait_on) to streams the fence does
/// not name is fenced on each of them too: for every such stream `b`,
/// `cuEventRecord(LINK(d), b)` and `cuStreamWaitEvent(fence_stream(d), LINK(d))` (each wait
/// takes LINK's record as it stands: one event serves every stream), then FENCE(d) on the
/// fence stream after the fence's own wait. Bound to one stream and released on it: one record.
///
/// Before the next copy into slot `d` the copy thread enqueues `cuStreamWaitEvent(copy_stream,
/// FENCE(d))` unless FENCE(d) is covered or completed (`wait_fence`). Nothing here blocks.
///
/// [`Batch::wait_on`](crate::Batch::wait_on) refuses a stream of another context (its
/// release could not be fenced on it). A bound batch dropped unreleased is fenced on its
/// streams; if one of them is the per-thread default stream of another thread, or the
/// legacy stream while another context is current on the dropping thread, or the batch was
/// bound to more streams than it keeps (4), it is fenced conservatively instead. A batch
/// dropped unreleased and unbound is fenced conservatively: the dropping thread calls
/// `cuCtxSynchronize` on the pipeline's context, which blocks it until every stream of the
/// context has drained and stalls the copies too (release explicitly or bind with `wait_on`
/// to avoid it). Work in *another* context is not covered: release such batches fenced.
///
/// # Poison mode
///
/// With [`ConfigBuilder::poison_released`](crate::ConfigBuilder::poison_released), each
/// release then enqueues on the slot's fence stream `cuStreamWaitEvent(FENCE(d))` (when a
/// fence was captured), `cuMemsetD8Async(slot d, 0xFF, device_stride)` and
/// `cuEventRecord(FENCE(d))`: the slot is filled once the consumer's work is done, without
/// waiting for its next use, and its next copy waits for the fill. It costs three driver
/// calls per release on the releasing thread and one memset of the slot per batch on the
/// device; the GPU suite's `poison_mode_cost` (tests/gpu) measures it.
///
/// # Contexts
///
/// A pipeline binds one device: its primary context, chosen by ordinal
/// ([`CudaOptions::ordinal`](crate::CudaOptions::ordinal)), or the context current on the
/// thread that creates it ([`CudaOptions::current`](crate::CudaOptions::current), what
/// PyTorch users have). Calls made for the consumer make that context current only for the
/// call when the calling thread has another one current (and bind it when it has none);
/// the copy thread binds it once. pinring changes none of the context's settings:
/// [`Cuda::context`] behaves as cudarc documents. Pipelines on several devices can coexist.
///
/// # Teardown
///
/// The backend goes when the pipeline and its last batch are gone. It first waits for the
/// copy stream, which by then also waits for every release fence still pending, up to the
/// pipeline's [`shutdown_timeout`](crate::ConfigBuilder::shutdown_timeout); past it (a
/// kernel that never finishes), it frees nothing — device memory, the pinned ring, streams
/// and events are leaked, never freed under work that may still touch them.
///
/// # No driver
///
/// `libcuda` is opened at run time by pinring itself, whichever way cudarc links it. When
/// it is missing or lacks an entry point, creating a pipeline returns [`Error::Backend`];
/// nothing panics. [`Cuda::device_count`] tells whether this backend can be used at all.
///
/// [`Error::Backend`]: crate::Error::Backend
/// [`Error::Fence`]: crate::Error::Fence
/// [`Fence::Stream`]: crate::Fence::Stream
/// [`Fence::Event`]: crate::Fence::Event
/// [`Fence::Sync`]: crate::Fence::Sync
/// [`Fence::Bound`]: crate::Fence::Bound
pub struct Cuda {
    /// READY(d): recorded on the copy stream after each copy into device slot d; plain.
    ready: Box<[Owned<Event>]>,
    /// COPIED(h): recorded on the copy stream after each copy run that starts at host slot
    /// h (one per run, after its last batch); plain; the completion thread follows them.
    copied: Box<[Owned<Event>]>,
    /// PARKED (one, blocking-sync) and its stream: the completion thread's, for its wait in
    /// the driver (completion.rs); held here to be freed (or leaked) with the rest.
    _parked: Box<[Owned<Event>]>,
    _parking_stream: Owned<Stream>,
    /// FENCE(d): what a release of slot d captured.
    fence: Box<[Owned<Event>]>,
    /// The places of FENCE records made straight on streams; which the copy stream is behind.
    order: FenceOrder,
    /// The stream the last checked direct release named, by id (its context checked).
    checked: CheckedStream,
    /// LINK(d): recorded on each stream a release of slot d fences on, waited on at once.
    link: Box<[Owned<Event>]>,
    /// Per-slot streams a release joins waits on before recording FENCE(d); poison fills.
    fence_streams: Box<[Owned<Stream>]>,
    /// The one copy stream, driven by the pipeline's copy thread.
    copy_stream: Owned<Stream>,
    /// Every device slot, `device_slots × device_stride` bytes.
    memory: Owned<Memory>,
    /// The host ring, pinned.
    registration: Registration,
    /// The completion thread: learns when copies complete and wakes the copy thread.
    completion: Completion,
    /// How the copy thread enqueues a run's pieces (per piece, or batched).
    copies: Copies,
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

impl Cuda {
    /// How many CUDA devices this process sees, or why it sees none (no driver library, no
    /// device, a driver error). Never panics: choose between this backend and the cpu one.
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

    /// The registered host ring: its base address and length in bytes, for measurements.
    /// Its bytes are the pipeline's (decode writes them): read only while it is idle.
    pub fn host_ring(&self) -> (*const u8, usize) {
        let ring = self.registration.ring();
        (ring.base().cast_const(), ring.len())
    }

    /// How this pipeline's copy thread enqueues copies: what
    /// [`CudaOptions::copies`](crate::CudaOptions::copies) asked for, or
    /// [`CopyCalls::PerPiece`] where the driver has no `cuMemcpyBatchAsync` (before CUDA
    /// 12.8) or refused one (then every later copy goes per piece).
    pub fn copy_calls(&self) -> CopyCalls {
        self.copies.in_use()
    }

    /// READY(d)'s handle (for consumers that wait on it themselves).
    pub(crate) fn ready_event(&self, d: DeviceIdx) -> sys::CUevent {
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
    fn stream_of_context(&self, stream: &CuStream) -> Result<()> {
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

    /// `cuEventRecord(FENCE(d), stream)`.
    fn record_fence(&self, d: DeviceIdx, stream: sys::CUstream) -> Result<()> {
        // SAFETY: FENCE(d) is live and recorded only by slot d's holder (the caller, now);
        // `stream` is live (by CuStream's contract, or ours) and of the pipeline's context.
        unsafe { result::event::record(self.fence[d.0].raw(), stream) }.call("cuEventRecord")
    }

    /// Makes slot d's fence stream wait (stream-side) for `event`'s latest record.
    fn fence_stream_waits(&self, d: DeviceIdx, event: sys::CUevent) -> Result<()> {
        // SAFETY: slot d's fence stream, used only by slot d's holder; `event` is live (the
        // caller's by CuEvent's contract, of any context, or one of ours).
        unsafe {
            result::stream::wait_event(
                self.fence_streams[d.0].raw(),
                event,
                CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
            )
        }
        .call("cuStreamWaitEvent")
    }

    /// Makes slot d's fence stream wait for everything enqueued on `stream` so far:
    /// `cuEventRecord(LINK(d), stream)`, then the fence stream waits on that record (a
    /// wait takes the record as it stands, so LINK(d) serves every stream in turn).
    fn link(&self, d: DeviceIdx, stream: sys::CUstream) -> Result<()> {
        // SAFETY: LINK(d) is live and recorded only by slot d's holder; `stream` is live
        // and of the pipeline's context (checked when it was bound or given).
        unsafe { result::event::record(self.link[d.0].raw(), stream) }.call("cuEventRecord")?;
        self.fence_stream_waits(d, self.link[d.0].raw())
    }

    /// Makes slot d's fence stream wait for every bound stream but those `skip` says are
    /// covered already; when one cannot be recorded on from this thread (another thread's
    /// per-thread default stream) or the batch was bound to more streams than it kept,
    /// synchronizes the context instead, which covers them all (a host block). Returns
    /// whether the fence stream now waits on something. The context must be bound.
    fn link_bound(
        &self,
        d: DeviceIdx,
        bound: &BoundStreams<CudaBinding>,
        skip: impl Fn(&CudaBinding) -> bool,
    ) -> Result<bool> {
        if bound.is_empty() {
            return Ok(false);
        }
        let here = current_thread_id();
        if bound.overflowed() || bound.iter().any(|b| !b.recordable_by(here)) {
            result::ctx::synchronize().call("cuCtxSynchronize")?;
            return Ok(false);
        }
        let mut linked = false;
        for binding in bound.iter().filter(|b| !skip(b)) {
            self.link(d, binding.stream.raw())?;
            linked = true;
        }
        Ok(linked)
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
        // Drained: a wait of the completion thread's in the driver returns, and it ends.
        self.completion.stop(drained);
        if !drained {
            // Device work past the shutdown timeout (and the completion thread, not joined)
            // may still use the ring, the slots and the context: free nothing (documented
            // leak), keep the ring mapped and the (primary) context retained for good.
            self.teardown.leak();
            std::mem::forget(self.registration.ring().clone());
            std::mem::forget(self.ctx.clone());
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
        // Only PARKED blocks (the completion thread parks in the driver on it, §7): a
        // blocking-sync record behind a queued copy costs about 2–5 µs, a plain one 0.3 µs,
        // and the copy thread records COPIED per run, READY (stream-side waits) per batch.
        let copied = make.events(layout.host_slots, false)?;
        let parked = make.events(1, true)?;
        let parking_stream = make.stream()?;
        let ready = make.events(layout.device_slots, false)?;
        let fence = make.events(layout.device_slots, false)?;
        let link = make.events(layout.device_slots, false)?;
        let fence_streams = make.streams(layout.device_slots)?;
        let copy_stream = make.stream()?;
        let memory = make.memory(bytes)?;
        let registration = make.registration(&ring)?;
        // The completion thread starts last, once nothing else can fail: a failed open
        // leaves no thread behind (`Completion`'s drop would stop and join it).
        let completion = Completion::start(
            ctx.cu_ctx(),
            copied.iter().map(Owned::raw).collect(),
            Parking {
                stream: parking_stream.raw(),
                parked: parked[0].raw(),
            },
            waker,
            layout.batch_scheduling,
        )?;
        Ok(Cuda {
            ready,
            copied,
            _parked: parked,
            _parking_stream: parking_stream,
            completion,
            copies: Copies::new(options.copies),
            fence,
            order: FenceOrder::default(),
            checked: CheckedStream::default(),
            link,
            fence_streams,
            copy_stream,
            memory,
            registration,
            teardown,
            ctx,
            layout,
        })
    }

    fn notifies_copy_done(&self, _: &CopyRole) -> bool {
        true
    }

    /// No stream-side wait for a fence already complete (FENCE(d)'s latest record is the
    /// release's) or one the copy stream is behind (a later record of that thread on that
    /// stream completed or was waited on; the copy thread hands a run's fences newest
    /// first): ARCHITECTURE.md §7, "Why the copy thread queries a fence first".
    fn wait_fence(&self, _: &CopyRole, d: DeviceIdx, fence: CudaFence) -> Result<()> {
        if !fence.recorded || fence.on.is_some_and(|on| self.order.covers(on)) {
            return Ok(());
        }
        self.bind_copy_thread()?;
        // SAFETY: a live event of this backend (a query needs no current context).
        match unsafe { result::event::query(self.fence[d.0].raw()) } {
            Ok(()) => {}
            // SAFETY: live handles of this backend; FENCE(d) was recorded by the release
            // that published `fence` (happens-before this call: the backend contract).
            Err(e) if e.0 == CUresult::CUDA_ERROR_NOT_READY => unsafe {
                result::stream::wait_event(
                    self.copy_stream.raw(),
                    self.fence[d.0].raw(),
                    CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT,
                )
            }
            .call("cuStreamWaitEvent")?,
            Err(e) => return Err(e).call("cuEventQuery"),
        }
        if let Some(on) = fence.on {
            self.order.cover(on);
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
        // One piece for the whole run where the slots lie alike on both sides (the strides
        // match: no huge pages), one per batch otherwise; batched where the driver can.
        let enqueue = |pieces: &mut Pieces| {
            // SAFETY: each piece's source lies in the run's host slots of the registered
            // ring (consecutive: the run does not wrap), which the slot protocol keeps
            // unwritten while they are IN_FLIGHT (until the completion count passes them)
            // and which stays registered until the copy stream drains (the teardown); each
            // destination lies in the run's device slots, which nothing reads until their
            // READY points (consumers wait on them) and whose previous readers' fences the
            // copy stream already waits on; the copy stream is live and its context is
            // bound on this thread (above).
            unsafe { self.copies.enqueue(pieces, stream) }.map_err(CopyFailed::at_start)
        };
        let mut pieces = Pieces::new();
        if layout.host_stride == layout.device_stride {
            let whole = (run.batches - 1) * layout.host_stride + run.last_bytes;
            pieces.push(ring.slot_ptr(run.host.0), self.slot(run.device), whole);
        } else {
            for (seq, h, d) in run.each() {
                if pieces.is_full() {
                    enqueue(&mut pieces)?;
                    pieces.clear();
                }
                let bytes = run.bytes_of(seq, layout.batch_bytes);
                pieces.push(ring.slot_ptr(h.0), self.slot(d), bytes);
            }
        }
        enqueue(&mut pieces)?;
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

    fn check_stream(&self, stream: &CuStream) -> Result<()> {
        self.stream_of_context(stream)
    }

    /// A declared stream's context was checked when the pipeline started and a stream's
    /// context never changes; a relative handle (null, legacy, per-thread) names the stream
    /// of whichever context is current on the calling thread, so it is checked every time
    /// (one `cuCtxGetCurrent`).
    ///
    /// A batch whose copy the completion thread has already seen complete (the copy count
    /// past `seq`, what a pipeline ahead of its consumer pops) needs no stream-side wait:
    /// the host observed the COPIED record that follows the copy on the copy stream, so
    /// work enqueued after this point, on any stream, runs after the copy; the
    /// `cuStreamWaitEvent` is skipped.
    fn ready_on(
        &self,
        d: DeviceIdx,
        seq: u64,
        stream: &CuStream,
        declared: bool,
    ) -> Result<CudaBinding> {
        if !declared || stream.is_relative() {
            self.stream_of_context(stream)?;
        }
        if !self.completion.passed(seq) {
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
        }
        Ok(CudaBinding {
            stream: stream.clone(),
            thread: stream.is_per_thread().then(current_thread_id),
        })
    }

    /// Parks on the copy count until it passes `seq` (no driver call): the completion
    /// thread publishes it once the run's COPIED record completes, which the in-order copy
    /// stream reaches only after the batch's copy and READY(d) (ARCHITECTURE.md §7).
    fn ready_sync(&self, _d: DeviceIdx, seq: u64) -> Result<()> {
        self.completion.wait_past(seq)
    }

    fn capture_sync(&self, _d: DeviceIdx) -> CudaFence {
        CudaFence::NONE
    }

    /// FENCE(d) recorded on `stream` when the batch is bound to no other stream (the
    /// common case: one record); otherwise `stream` and each other bound stream are linked
    /// into slot d's fence stream, where FENCE(d) is recorded.
    fn capture_stream(
        &self,
        d: DeviceIdx,
        stream: &CuStream,
        bound: &BoundStreams<CudaBinding>,
    ) -> Result<CudaFence> {
        let here = current_thread_id();
        let covered = |b: &CudaBinding| b.is(stream, here);
        if stream.is_relative() {
            self.stream_of_context(stream)?;
        }
        let _bound = Bound::new(self.ctx.cu_ctx())?;
        // Checked already: a relative handle (above), a bound stream, the stream of the kept id.
        let unchecked = !stream.is_relative() && !bound.iter().any(covered);
        let id = unchecked.then(|| fence::stream_id(stream.raw())).flatten();
        if unchecked && !self.checked.is(id) {
            self.stream_of_context(stream)?;
            self.checked.keep(id);
        }
        if self.link_bound(d, bound, covered)? {
            self.link(d, stream.raw())?;
            self.record_fence(d, self.fence_streams[d.0].raw())?;
            return Ok(CudaFence::LINKED);
        }
        self.record_fence(d, stream.raw())?;
        let id = id.or_else(|| fence::stream_id(stream.raw()));
        Ok(CudaFence::at(self.order.recorded(id, here)))
    }

    /// Slot d's fence stream waits on `event` (of any context) and on every bound stream,
    /// then records FENCE(d).
    fn capture_event(
        &self,
        d: DeviceIdx,
        event: &CuEvent,
        bound: &BoundStreams<CudaBinding>,
    ) -> Result<CudaFence> {
        let _bound = Bound::new(self.ctx.cu_ctx())?;
        self.link_bound(d, bound, |_| false)?;
        self.fence_stream_waits(d, event.raw())?;
        self.record_fence(d, self.fence_streams[d.0].raw())?;
        Ok(CudaFence::LINKED)
    }

    /// Fences on the bound streams (one: FENCE(d) recorded on it; several: linked through
    /// slot d's fence stream); when that is not possible from this thread (another thread's
    /// per-thread default stream, a legacy stream while another context is current here,
    /// more streams than the batch kept) or a call fails, fences conservatively.
    fn capture_bound(&self, d: DeviceIdx, bound: &BoundStreams<CudaBinding>) -> CudaFence {
        let fenced = if bound.len() == 1 && !bound.overflowed() {
            let only = bound.iter().next().expect("one binding");
            self.capture_stream(d, &only.stream, bound)
        } else {
            Bound::new(self.ctx.cu_ctx()).and_then(|_bound| {
                let recorded = self.link_bound(d, bound, |_| false)?;
                if recorded {
                    self.record_fence(d, self.fence_streams[d.0].raw())?;
                }
                Ok(CudaFence::linked_if(recorded))
            })
        };
        fenced.unwrap_or_else(|_| self.capture_conservative(d))
    }

    /// `cuCtxSynchronize` on the pipeline's context: blocks the calling thread until every
    /// stream of the context has drained (see the module docs for the cost).
    fn capture_conservative(&self, _d: DeviceIdx) -> CudaFence {
        if let Ok(_bound) = Bound::new(self.ctx.cu_ctx()) {
            // A failure means the context is dead: nothing runs on it, so no fence is
            // needed either.
            let _ = result::ctx::synchronize();
        }
        CudaFence::NONE
    }

    /// On slot d's fence stream: waits for FENCE(d) (when a fence was captured), fills the
    /// slot with the poison byte (`cuMemsetD8Async`), records FENCE(d) again. Where the
    /// fill cannot be enqueued the slot keeps its bytes, still fenced; where it was
    /// enqueued but FENCE(d) could not be recorded after it, the context is synchronized
    /// so that the fill is done before the slot's next copy.
    fn poison(&self, d: DeviceIdx, fence: CudaFence) -> CudaFence {
        let Ok(_bound) = Bound::new(self.ctx.cu_ctx()) else {
            return fence;
        };
        if fence.recorded && self.fence_stream_waits(d, self.fence[d.0].raw()).is_err() {
            return fence;
        }
        let stream = self.fence_streams[d.0].raw();
        // SAFETY: slot d lies in the backend's allocation (`device_stride` bytes from
        // `slot(d)`); the fill runs on slot d's fence stream after the release fence, so
        // after every read the consumer fenced, and the slot's next copy waits on the
        // FENCE(d) recorded after it. The bytes are plain memory of no Rust type.
        let filled = unsafe {
            result::memset_d8_async(self.slot(d), POISON_BYTE, self.layout.device_stride, stream)
        };
        if filled.is_err() {
            return fence;
        }
        if self.record_fence(d, stream).is_ok() {
            return CudaFence::LINKED;
        }
        // The context is bound (above); a failure means it is dead, and nothing runs.
        let _ = result::ctx::synchronize();
        CudaFence::NONE
    }

    fn device_ptr(&self, d: DeviceIdx) -> CUdeviceptr {
        self.slot(d)
    }
}
