//! The cuda backend: a pinned host ring, side-stream H2D copies and event-fenced device
//! slots, through the CUDA driver API (cudarc, loaded at run time).
//!
//! # What it holds
//!
//! - The host ring (one anonymous mapping) registered with `cuMemHostRegister`
//!   (portable, not write-combined, its exact size) for the backend's lifetime. It is
//!   unregistered in `Drop`, only after the copy stream has been synchronized, so no H2D
//!   can still read it.
//! - The device slots: one `cuMemAlloc` of `device_slots` slots, each starting on a
//!   256-byte boundary.
//! - One non-blocking copy stream, driven by the pipeline's copy thread alone.
//! - Events, all created once with `CU_EVENT_DISABLE_TIMING` and reused (none is created
//!   per batch): READY(d) per device slot (recorded after each H2D into it), COPIED(h)
//!   per host slot (recorded after each H2D out of it; the copy thread polls it with
//!   `cuEventQuery`, so [`Backend::NOTIFIES_COPY_DONE`] is false) and FENCE(d) per device
//!   slot (what a release captured).
//! - One non-blocking fence stream per device slot, for [`Fence::Event`].
//!
//! # Release fences
//!
//! A release captures what the device must finish, at release time, in FENCE(d):
//! - [`Fence::Stream(s)`](Fence::Stream): `cuEventRecord(FENCE(d), s)`.
//! - [`Fence::Event(e)`](Fence::Event): `cuStreamWaitEvent(fence_stream(d), e)` then
//!   `cuEventRecord(FENCE(d), fence_stream(d))`, so FENCE(d) stands for `e`'s record as it
//!   was at release time even if the caller records `e` again later, and a late `e`
//!   stalls only slot `d`. `e` may belong to another device.
//! - [`Fence::Sync`] captures nothing.
//!
//! The copy thread then enqueues `cuStreamWaitEvent(copy_stream, FENCE(d))` before the
//! next H2D into slot `d`. Nothing on this path blocks the host.
//!
//! A batch dropped unreleased and unbound (never given to
//! [`wait_on`](crate::Batch::wait_on)) is fenced conservatively: the dropping thread calls
//! `cuCtxSynchronize` on the pipeline's context. That blocks it until every stream of the
//! context (the caller's, the copy stream) has drained — as long as the longest queued
//! kernel, and it stalls the copies too. Release explicitly or bind with `wait_on` to
//! avoid it. Work in *another* context (another device, or a non-primary context on the
//! same device) is not covered: release such batches with a fence.
//!
//! # Contexts
//!
//! A pipeline binds one device: its primary context, chosen by ordinal
//! ([`CudaOptions::ordinal`]), or the context current on the thread that creates the
//! pipeline ([`CudaOptions::current`], what PyTorch users have). Calls made on behalf of
//! the consumer make that context current only for the call when the calling thread has
//! another one current (and bind it when the thread has none); the copy thread binds it
//! once. Several pipelines on several devices can live in one process.
//!
//! # No driver
//!
//! `libcuda` is opened at run time. When it is missing, or lacks an entry point pinring
//! needs, creating a pipeline returns [`Error::Backend`] saying so; nothing panics.
//! [`Cuda::device_count`] tells a program whether it can use this backend at all.

use std::ffi::{c_void, CStr};
use std::fmt;
use std::mem::ManuallyDrop;
use std::ptr;

use cudarc::driver::sys::{self, CUcontext, CUdevice, CUdeviceptr, CUevent, CUresult, CUstream};
use cudarc::driver::{CudaContext, CudaEvent, CudaSlice, CudaStream, CudaView};

use crate::backend::{Backend, CopyWaker, Layout, Sealed};
use crate::batch::Batch;
use crate::config::ConfigBuilder;
use crate::error::{Error, Result};
use crate::host_ring::HostRing;
use crate::sync::native::Arc;
use crate::Fence;

/// Device slots start on this boundary, so kernels can use wide loads on any batch size.
const SLOT_ALIGN: usize = 256;

/// `CU_STREAM_LEGACY`: the legacy default stream, valid in every context.
const STREAM_LEGACY: CUstream = 0x1 as CUstream;
/// `CU_STREAM_PER_THREAD`: the calling thread's default stream, valid in every context.
const STREAM_PER_THREAD: CUstream = 0x2 as CUstream;

/// Which device a CUDA pipeline binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaDevice {
    /// The primary context of the device with this ordinal (as `CUDA_VISIBLE_DEVICES`
    /// numbers them). The primary context is the one the CUDA runtime and PyTorch use.
    Ordinal(usize),
    /// The context current on the thread that calls [`Pipeline::new`](crate::Pipeline::new).
    /// A primary context is retained for the pipeline's lifetime; a context the caller
    /// created itself (`cuCtxCreate`) is borrowed: the caller must keep it alive until the
    /// pipeline and every batch from it are dropped.
    Current,
}

impl Default for CudaDevice {
    fn default() -> Self {
        CudaDevice::Ordinal(0)
    }
}

/// How to open the cuda backend. The default binds device 0.
///
/// ```no_run
/// use pinring::{Config, CudaOptions};
/// let config = Config::builder()
///     .samples_per_batch(16)
///     .bytes_per_sample(4 * 4097)
///     .cuda(CudaOptions::ordinal(1)) // same as .backend::<pinring::Cuda>(..)
///     .build()?;
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CudaOptions {
    /// The device (context) the pipeline binds.
    pub device: CudaDevice,
}

impl CudaOptions {
    /// Binds the primary context of device `ordinal`.
    pub fn ordinal(ordinal: usize) -> Self {
        CudaOptions {
            device: CudaDevice::Ordinal(ordinal),
        }
    }

    /// Adopts the context current on the thread that creates the pipeline (for example
    /// the one PyTorch made current with `torch.cuda.set_device`).
    pub fn current() -> Self {
        CudaOptions {
            device: CudaDevice::Current,
        }
    }
}

impl<B: Backend> ConfigBuilder<B> {
    /// Switches to the cuda backend: shorthand for `.backend::<Cuda>(options)`.
    pub fn cuda(self, options: CudaOptions) -> ConfigBuilder<Cuda> {
        self.backend::<Cuda>(options)
    }
}

/// A caller's CUDA stream, for [`Batch::wait_on`] and [`Fence::Stream`].
///
/// Made from a cudarc stream (`CuStream::from(&stream)`, which keeps it alive), from a raw
/// `CUstream` ([`from_raw`](CuStream::from_raw)), or one of the default streams.
#[derive(Clone)]
pub struct CuStream {
    raw: CUstream,
    /// Keeps a cudarc stream alive while this handle (or a batch bound to it) lives.
    _owner: Option<Arc<CudaStream>>,
}

// SAFETY: a CUstream is a driver handle, usable from any thread (the driver API is
// thread-safe); the optional owner is an `Arc<CudaStream>`, itself Send + Sync.
unsafe impl Send for CuStream {}
// SAFETY: as above; the handle is only passed to the driver, never dereferenced.
unsafe impl Sync for CuStream {}

impl CuStream {
    /// Wraps a raw stream handle (PyTorch's `torch.cuda.current_stream().cuda_stream`, a
    /// handle from another library, or null for the current context's default stream).
    ///
    /// # Safety
    /// - `raw` is a live stream (or null / `CU_STREAM_LEGACY` / `CU_STREAM_PER_THREAD`)
    ///   and stays live while this value, any clone of it, or a batch bound to it with
    ///   [`wait_on`](Batch::wait_on) exists.
    pub unsafe fn from_raw(raw: CUstream) -> Self {
        CuStream { raw, _owner: None }
    }

    /// The legacy default stream (`CU_STREAM_LEGACY`) of whichever context is current.
    pub fn legacy() -> Self {
        CuStream {
            raw: STREAM_LEGACY,
            _owner: None,
        }
    }

    /// The calling thread's per-thread default stream (`CU_STREAM_PER_THREAD`).
    pub fn per_thread() -> Self {
        CuStream {
            raw: STREAM_PER_THREAD,
            _owner: None,
        }
    }

    /// The raw handle.
    pub fn raw(&self) -> CUstream {
        self.raw
    }
}

impl From<&Arc<CudaStream>> for CuStream {
    fn from(stream: &Arc<CudaStream>) -> Self {
        CuStream {
            raw: stream.cu_stream(),
            _owner: Some(stream.clone()),
        }
    }
}

impl From<Arc<CudaStream>> for CuStream {
    fn from(stream: Arc<CudaStream>) -> Self {
        CuStream {
            raw: stream.cu_stream(),
            _owner: Some(stream),
        }
    }
}

impl fmt::Debug for CuStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CuStream").field(&self.raw).finish()
    }
}

/// A caller's CUDA event, for [`Fence::Event`]: reuse waits for its latest record as of
/// the release.
///
/// Made from a cudarc event (`CuEvent::from(event)` or from an `Arc` of one, which keeps
/// it alive) or from a raw `CUevent` ([`from_raw`](CuEvent::from_raw)).
pub struct CuEvent {
    raw: CUevent,
    _owner: Option<Arc<CudaEvent>>,
}

// SAFETY: a CUevent is a driver handle, usable from any thread; the optional owner is an
// `Arc<CudaEvent>`, itself Send + Sync.
unsafe impl Send for CuEvent {}
// SAFETY: as above; the handle is only passed to the driver, never dereferenced.
unsafe impl Sync for CuEvent {}

impl CuEvent {
    /// Wraps a raw event handle (`torch.cuda.Event().cuda_event`, CuPy's `.ptr`, ...).
    ///
    /// # Safety
    /// - `raw` is a live event and stays live while this value exists.
    pub unsafe fn from_raw(raw: CUevent) -> Self {
        CuEvent { raw, _owner: None }
    }

    /// The raw handle.
    pub fn raw(&self) -> CUevent {
        self.raw
    }

    /// The cudarc event this was made from, if any.
    pub fn cudarc(&self) -> Option<&CudaEvent> {
        self._owner.as_deref()
    }
}

impl From<CudaEvent> for CuEvent {
    fn from(event: CudaEvent) -> Self {
        Arc::new(event).into()
    }
}

impl From<Arc<CudaEvent>> for CuEvent {
    fn from(event: Arc<CudaEvent>) -> Self {
        CuEvent {
            raw: event.cu_event(),
            _owner: Some(event),
        }
    }
}

impl From<&Arc<CudaEvent>> for CuEvent {
    fn from(event: &Arc<CudaEvent>) -> Self {
        event.clone().into()
    }
}

impl fmt::Debug for CuEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CuEvent").field(&self.raw).finish()
    }
}

/// A release fence as the cuda backend captured it: whether FENCE(d) was recorded.
#[doc(hidden)]
#[derive(Debug)]
pub struct CudaFence {
    recorded: bool,
}

// ---------------------------------------------------------------------------------------
// Driver calls and errors.

/// Every driver entry point this backend (and the cudarc calls it makes) uses. Checked
/// once per `open`, so that cudarc's lazy symbol loading can never panic later.
const ENTRY_POINTS: &[&str] = &[
    "cuInit",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuDevicePrimaryCtxGetState",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxPushCurrent_v2",
    "cuCtxPopCurrent_v2",
    "cuCtxGetDevice",
    "cuCtxSynchronize",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemHostRegister_v2",
    "cuMemHostUnregister",
    "cuMemcpyHtoDAsync_v2",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuStreamGetCtx",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
];

/// Opens libcuda and checks every entry point, turning what cudarc would report with a
/// panic into an error.
fn load_driver() -> Result<()> {
    // SAFETY: `is_culib_present` only tries to dlopen candidate names of libcuda and
    // closes what it opened; loading the NVIDIA driver library runs no code of ours.
    if !unsafe { sys::is_culib_present() } {
        return Err(Error::Backend {
            call: "dlopen(libcuda)",
            code: 0,
            message: format!(
                "the CUDA driver library was not found (searched {:?}): install the NVIDIA \
                 driver, or add the directory holding libcuda.so to LD_LIBRARY_PATH; on a \
                 machine without a GPU use the cpu backend",
                searched_names()
            ),
        });
    }
    // SAFETY: the library was just found under one of the same names `culib` tries, so it
    // loads instead of panicking; the returned reference is 'static (cudarc keeps the
    // library in a static).
    let lib = unsafe { sys::culib() };
    for name in ENTRY_POINTS {
        let mut symbol = Vec::with_capacity(name.len() + 1);
        symbol.extend_from_slice(name.as_bytes());
        symbol.push(0);
        // SAFETY: only the symbol's presence is checked; the pointer is never called
        // through this type.
        if let Err(e) = unsafe { lib.get::<unsafe extern "C" fn()>(symbol.as_slice()) } {
            return Err(Error::Backend {
                call: "dlsym(libcuda)",
                code: 0,
                message: format!(
                    "the CUDA driver lacks the entry point {name} ({e}): update the NVIDIA \
                     driver"
                ),
            });
        }
    }
    Ok(())
}

/// The usual names of libcuda among those cudarc tries (it tries more exotic ones too).
fn searched_names() -> Vec<String> {
    let mut names: Vec<String> = cudarc::get_lib_name_candidates("cuda")
        .into_iter()
        .filter(|n| n.starts_with("libcuda.so"))
        .collect();
    names.dedup();
    names
}

/// `CUresult` → `Result`, naming the call.
fn check(call: &'static str, result: CUresult) -> Result<()> {
    if result == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(driver_error(call, result, ""))
    }
}

/// The error for a failed driver call: its name, the code's name and description, and
/// `hint` (what to change), if any.
fn driver_error(call: &'static str, result: CUresult, hint: &str) -> Error {
    let code = result as i32;
    let name = error_text(result, sys::cuGetErrorName).unwrap_or_else(|| "CUDA_ERROR".into());
    let text = error_text(result, sys::cuGetErrorString).unwrap_or_default();
    let mut message = format!("{name} ({code})");
    if !text.is_empty() {
        message.push_str(": ");
        message.push_str(&text);
    }
    if !hint.is_empty() {
        message.push_str(". ");
        message.push_str(hint);
    }
    Error::Backend {
        call,
        code,
        message,
    }
}

fn error_text(
    result: CUresult,
    f: unsafe fn(CUresult, *mut *const std::ffi::c_char) -> CUresult,
) -> Option<String> {
    let mut text: *const std::ffi::c_char = ptr::null();
    // SAFETY: `f` is cuGetErrorName or cuGetErrorString, which write a pointer to a
    // static, NUL-terminated string (or fail and leave `text` untouched).
    let ok = unsafe { f(result, &mut text) } == CUresult::CUDA_SUCCESS;
    // SAFETY: on success `text` points at the driver's static string.
    (ok && !text.is_null()).then(|| unsafe { CStr::from_ptr(text) }.to_string_lossy().into())
}

fn current_context() -> Result<CUcontext> {
    let mut ctx: CUcontext = ptr::null_mut();
    // SAFETY: writes one handle into `ctx`.
    check("cuCtxGetCurrent", unsafe { sys::cuCtxGetCurrent(&mut ctx) })?;
    Ok(ctx)
}

/// Keeps a context current on this thread for its lifetime (pops what it pushed).
struct Bound {
    pushed: bool,
}

impl Bound {
    /// Makes `ctx` current: nothing when it already is, binds it when the thread has no
    /// context, pushes it (popped on drop) when the thread has another one.
    fn new(ctx: CUcontext) -> Result<Self> {
        let current = current_context()?;
        if current == ctx {
            Ok(Bound { pushed: false })
        } else if current.is_null() {
            // SAFETY: `ctx` is the backend's live context.
            check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(ctx) })?;
            Ok(Bound { pushed: false })
        } else {
            // SAFETY: as above; popped in `drop`.
            check("cuCtxPushCurrent", unsafe { sys::cuCtxPushCurrent_v2(ctx) })?;
            Ok(Bound { pushed: true })
        }
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        if self.pushed {
            let mut popped: CUcontext = ptr::null_mut();
            // SAFETY: pops the context this guard pushed on this thread.
            let _ = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
        }
    }
}

// ---------------------------------------------------------------------------------------
// RAII handles. Each is created and destroyed while the backend's context is current.

struct Event(CUevent);

impl Event {
    fn new() -> Result<Self> {
        let mut event: CUevent = ptr::null_mut();
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32;
        // SAFETY: writes one handle into `event`; the caller made the context current.
        check("cuEventCreate", unsafe {
            sys::cuEventCreate(&mut event, flags)
        })?;
        Ok(Event(event))
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        // SAFETY: the event was created by `new` and is destroyed once; the driver defers
        // the release if a stream still waits on it.
        let _ = unsafe { sys::cuEventDestroy_v2(self.0) };
    }
}

struct Stream(CUstream);

impl Stream {
    fn new() -> Result<Self> {
        let mut stream: CUstream = ptr::null_mut();
        let flags = sys::CUstream_flags::CU_STREAM_NON_BLOCKING as u32;
        // SAFETY: writes one handle into `stream`; the caller made the context current.
        check("cuStreamCreate", unsafe {
            sys::cuStreamCreate(&mut stream, flags)
        })?;
        Ok(Stream(stream))
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: the stream was created by `new` and is destroyed once (work still queued
        // completes first, per the driver).
        let _ = unsafe { sys::cuStreamDestroy_v2(self.0) };
    }
}

struct DeviceMemory(CUdeviceptr);

impl DeviceMemory {
    fn new(bytes: usize) -> Result<Self> {
        let mut ptr: CUdeviceptr = 0;
        // SAFETY: writes one device address into `ptr`; the caller made the context current.
        let result = unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes) };
        if result != CUresult::CUDA_SUCCESS {
            let hint = format!("the device slots need {bytes} bytes; use fewer device_slots");
            return Err(driver_error("cuMemAlloc", result, &hint));
        }
        Ok(DeviceMemory(ptr))
    }
}

impl Drop for DeviceMemory {
    fn drop(&mut self) {
        // SAFETY: allocated by `new`, freed once; the backend's `Drop` has synchronized the
        // copy stream and every release fence first.
        let _ = unsafe { sys::cuMemFree_v2(self.0) };
    }
}

/// The host ring's registration with the driver.
struct Registration(*mut c_void);

impl Registration {
    fn new(ring: &HostRing) -> Result<Self> {
        let base = ring.base().cast::<c_void>();
        let bytes = ring.len();
        // Portable: pinned for every context. No WRITECOMBINED flag exists for
        // registration, so the decoders' writes stay cached.
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE;
        // SAFETY: `base..base + bytes` is the ring's live mapping (page aligned, exactly
        // its size), which the backend keeps alive (it holds the ring's Arc) until after
        // the unregistration in `drop`.
        let result = unsafe { sys::cuMemHostRegister_v2(base, bytes, flags) };
        if result != CUresult::CUDA_SUCCESS {
            return Err(driver_error(
                "cuMemHostRegister",
                result,
                &register_hint(bytes),
            ));
        }
        Ok(Registration(base))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: registered by `new`, unregistered once, after the backend's `Drop`
        // synchronized the copy stream: no copy from the ring is running.
        let _ = unsafe { sys::cuMemHostUnregister(self.0) };
    }
}

/// What to change when the system refuses to pin the ring.
fn register_hint(bytes: usize) -> String {
    let limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|l| l.starts_with("Max locked memory"))
                .map(|l| {
                    let fields: Vec<&str> = l.split_whitespace().collect();
                    let n = fields.len();
                    if n >= 6 {
                        format!(
                            "soft {} / hard {} {}",
                            fields[n - 3],
                            fields[n - 2],
                            fields[n - 1]
                        )
                    } else {
                        l.to_owned()
                    }
                })
        })
        .unwrap_or_else(|| "unknown".into());
    format!(
        "The system would not pin the host ring of {bytes} bytes. This process's locked-memory \
         limit (RLIMIT_MEMLOCK, `ulimit -l`) is {limit}: raise it above the ring's size \
         (`ulimit -l unlimited`; `memlock` in /etc/security/limits.conf; \
         `LimitMEMLOCK=infinity` under systemd; `--ulimit memlock=-1` for docker), check that \
         the machine has that much free memory, or make the ring smaller (fewer host_slots \
         or smaller batches)"
    )
}

// ---------------------------------------------------------------------------------------
// The backend.

/// The handles that must go while the context is current, in this order.
struct Resources {
    ready: Box<[Event]>,
    copied: Box<[Event]>,
    fence: Box<[Event]>,
    fence_streams: Box<[Stream]>,
    copy_stream: Stream,
    /// The device slots; held for its `Drop` (the base address is `Cuda::base`).
    _memory: DeviceMemory,
    /// The ring's pinning; held for its `Drop`, which must follow the copy stream's sync.
    _registration: Registration,
}

/// cudarc views of the device slots (for [`Batch::view`]).
struct Interop {
    slots: Box<[ManuallyDrop<CudaSlice<u8>>]>,
    stream: Arc<CudaStream>,
}

/// The cuda backend's device side of one pipeline. See the [module docs](self).
pub struct Cuda {
    /// Dropped by hand in `Drop`, with the context current, after the syncs.
    res: ManuallyDrop<Resources>,
    /// Dropped by hand in `Drop` before the context: the views are leaked (the memory is
    /// `res.memory`'s), the stream is borrowed.
    interop: ManuallyDrop<Interop>,
    ctx: CUcontext,
    /// cudarc's wrapper of the context. For a primary context it holds a retain, released
    /// when the wrapper drops; for a `borrowed` (caller-created) context it would destroy
    /// the caller's context, so it is never dropped.
    context: ManuallyDrop<Arc<CudaContext>>,
    borrowed: bool,
    ordinal: usize,
    base: CUdeviceptr,
    slot_stride: usize,
    batch_bytes: usize,
    ring: Arc<HostRing>,
}

// SAFETY: every raw handle in `Cuda` (context, streams, events, device and host pointers)
// is a driver handle usable from any thread — the driver API is thread-safe — and which
// thread calls what is fixed by the backend threading contract (module `backend`): the
// copy stream and COPIED events by the copy thread, slot `d`'s fence stream and events by
// the holder of slot `d`.
unsafe impl Send for Cuda {}
// SAFETY: as above.
unsafe impl Sync for Cuda {}

impl Sealed for Cuda {}

impl fmt::Debug for Cuda {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cuda")
            .field("ordinal", &self.ordinal)
            .field("batch_bytes", &self.batch_bytes)
            .field("device_slots", &self.res.ready.len())
            .field("host_slots", &self.res.copied.len())
            .finish()
    }
}

impl Cuda {
    /// How many CUDA devices this process sees, or why it sees none (no driver library, no
    /// device, a driver error). Never panics; use it to choose between this backend and
    /// the cpu one.
    pub fn device_count() -> Result<usize> {
        load_driver()?;
        // SAFETY: plain driver calls with valid out-pointers.
        check("cuInit", unsafe { sys::cuInit(0) })?;
        let mut count = 0;
        // SAFETY: as above.
        check("cuDeviceGetCount", unsafe {
            sys::cuDeviceGetCount(&mut count)
        })?;
        Ok(usize::try_from(count).unwrap_or(0))
    }

    /// The ordinal of the device the pipeline is bound to.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The pipeline's context as cudarc sees it (to load modules, make streams, ...).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.context
    }

    /// The raw context handle.
    pub fn raw_context(&self) -> CUcontext {
        self.ctx
    }

    /// The registered host ring: its base address and length in bytes. For measurements
    /// against the pipeline's own pinned memory; the ring's bytes belong to the pipeline
    /// (decode workers write them), so only read from it while the pipeline is idle.
    pub fn host_ring(&self) -> (*const u8, usize) {
        (self.ring.base(), self.ring.len())
    }

    fn slot(&self, d: usize) -> CUdeviceptr {
        assert!(d < self.res.ready.len(), "device slot {d} out of range");
        self.base + (d * self.slot_stride) as CUdeviceptr
    }

    /// Binds the context on the copy thread (once; it stays bound, the thread is ours).
    #[inline]
    fn bind_copy_thread(&self) -> Result<()> {
        if current_context()? != self.ctx {
            // SAFETY: the backend's live context, bound on the pipeline's own thread.
            check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.ctx) })?;
        }
        Ok(())
    }

    /// The error for a `Fence::Stream` whose record failed: a stream of another context
    /// is named as such.
    fn stream_fence_error(&self, stream: CUstream, result: CUresult) -> Error {
        let mut ctx: CUcontext = ptr::null_mut();
        // SAFETY: writes one handle; `stream` is the caller's live stream (CuStream's
        // contract).
        let owner = unsafe { sys::cuStreamGetCtx(stream, &mut ctx) };
        if owner == CUresult::CUDA_SUCCESS && !ctx.is_null() && ctx != self.ctx {
            Error::Fence(format!(
                "Fence::Stream: the stream belongs to another context than the pipeline's \
                 (device {}); record an event on it and release with Fence::Event",
                self.ordinal
            ))
        } else {
            driver_error("cuEventRecord", result, "")
        }
    }
}

/// Opens the context the options name; returns its cudarc owner and whether it is a
/// borrowed (non-primary) context.
fn open_context(options: &CudaOptions) -> Result<(Arc<CudaContext>, bool)> {
    // SAFETY: plain driver calls with valid out-pointers; the driver is loaded.
    check("cuInit", unsafe { sys::cuInit(0) })?;
    let mut count = 0;
    // SAFETY: as above.
    check("cuDeviceGetCount", unsafe {
        sys::cuDeviceGetCount(&mut count)
    })?;
    let previous = current_context()?;
    let opened = match options.device {
        CudaDevice::Ordinal(ordinal) => {
            if ordinal >= usize::try_from(count).unwrap_or(0) {
                let visible = std::env::var("CUDA_VISIBLE_DEVICES")
                    .map(|v| format!("CUDA_VISIBLE_DEVICES={v:?}"))
                    .unwrap_or_else(|_| "CUDA_VISIBLE_DEVICES unset".into());
                return Err(Error::Backend {
                    call: "cuDeviceGet",
                    code: CUresult::CUDA_ERROR_INVALID_DEVICE as i32,
                    message: format!(
                        "CUDA_ERROR_INVALID_DEVICE: there is no CUDA device {ordinal}: this \
                         process sees {count} ({visible})"
                    ),
                });
            }
            let ctx = CudaContext::new(ordinal)
                .map_err(|e| driver_error("cuDevicePrimaryCtxRetain", e.0, ""))?;
            (ctx, false)
        }
        CudaDevice::Current => adopt_current(previous, count)?,
    };
    // cudarc binds the context it opens to this thread: give the caller's back.
    if current_context()? != previous {
        // SAFETY: `previous` was current on this thread a moment ago (or is null, which
        // unbinds); the caller still owns it.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(previous) })?;
    }
    Ok(opened)
}

/// The context current on this thread, wrapped for cudarc.
fn adopt_current(current: CUcontext, count: i32) -> Result<(Arc<CudaContext>, bool)> {
    if current.is_null() {
        return Err(Error::Backend {
            call: "cuCtxGetCurrent",
            code: CUresult::CUDA_ERROR_INVALID_CONTEXT as i32,
            message: "CudaOptions::current(): no CUDA context is current on this thread; make \
                      one current first (PyTorch: torch.cuda.set_device, or any CUDA op) or \
                      choose a device with CudaOptions::ordinal"
                .into(),
        });
    }
    let mut device: CUdevice = 0;
    // SAFETY: writes one value; `current` is the thread's current context.
    check("cuCtxGetDevice", unsafe {
        sys::cuCtxGetDevice(&mut device)
    })?;
    let mut ordinal = None;
    for i in 0..count {
        let mut d: CUdevice = 0;
        // SAFETY: writes one value; i < count.
        check("cuDeviceGet", unsafe { sys::cuDeviceGet(&mut d, i) })?;
        if d == device {
            ordinal = usize::try_from(i).ok();
            break;
        }
    }
    let ordinal = ordinal.ok_or_else(|| Error::Backend {
        call: "cuDeviceGet",
        code: CUresult::CUDA_ERROR_INVALID_DEVICE as i32,
        message: "the current context's device is not among this process's devices".into(),
    })?;
    // Is the current context the device's primary one? Ask without activating it.
    let (mut flags, mut active) = (0u32, 0i32);
    // SAFETY: writes two values; `device` is valid.
    check("cuDevicePrimaryCtxGetState", unsafe {
        sys::cuDevicePrimaryCtxGetState(device, &mut flags, &mut active)
    })?;
    let mut primary = false;
    if active != 0 {
        let mut ctx: CUcontext = ptr::null_mut();
        // SAFETY: retains the (active) primary context; released just below.
        check("cuDevicePrimaryCtxRetain", unsafe {
            sys::cuDevicePrimaryCtxRetain(&mut ctx, device)
        })?;
        primary = ctx == current;
        // SAFETY: releases the retain just taken.
        let _ = unsafe { sys::cuDevicePrimaryCtxRelease_v2(device) };
    }
    if primary {
        let ctx = CudaContext::new(ordinal)
            .map_err(|e| driver_error("cuDevicePrimaryCtxRetain", e.0, ""))?;
        Ok((ctx, false))
    } else {
        // SAFETY: `current` is a live context of `device` (it is current on this thread).
        // cudarc would destroy it when its wrapper drops; the backend never drops that
        // wrapper (`borrowed`), so ownership stays with the caller, whose obligation it is
        // to keep the context alive (documented on `CudaDevice::Current`).
        let ctx = unsafe { CudaContext::from_raw_context(ordinal, device, current) }
            .map_err(|e| driver_error("cuDeviceGetAttribute", e.0, ""))?;
        Ok((ctx, true))
    }
}

impl Drop for Cuda {
    fn drop(&mut self) {
        let previous = current_context().ok();
        {
            let bound = Bound::new(self.ctx);
            // Every fence a consumer left (its kernels may still read the slots), then
            // every copy (out of the ring, into the slots). Errors are ignored: a context
            // that fails these is dead, and nothing runs on it any more.
            for event in self.res.fence.iter() {
                // SAFETY: a live event of this backend.
                let _ = unsafe { sys::cuEventSynchronize(event.0) };
            }
            for stream in self.res.fence_streams.iter() {
                // SAFETY: a live stream of this backend.
                let _ = unsafe { sys::cuStreamSynchronize(stream.0) };
            }
            // SAFETY: as above.
            let _ = unsafe { sys::cuStreamSynchronize(self.res.copy_stream.0) };
            // SAFETY: `interop` is dropped exactly once, here, and not used after.
            let interop = unsafe { ManuallyDrop::take(&mut self.interop) };
            for slot in interop.slots.into_vec() {
                // The memory is `res.memory`'s: give up cudarc's claim without freeing.
                let _ = ManuallyDrop::into_inner(slot).leak();
            }
            drop(interop.stream);
            // SAFETY: `res` is dropped exactly once, here, with the context current (or
            // the context dead), after the syncs above; nothing uses it after.
            unsafe { ManuallyDrop::drop(&mut self.res) };
            drop(bound);
        }
        // SAFETY: `context` is taken exactly once, here.
        let context = unsafe { ManuallyDrop::take(&mut self.context) };
        if self.borrowed {
            // The caller's own context: cudarc's wrapper would destroy it.
            std::mem::forget(context);
        } else {
            drop(context);
        }
        // cudarc binds a context when its wrapper drops: give the thread's back.
        if let Some(previous) = previous {
            if current_context().ok() != Some(previous) {
                // SAFETY: `previous` was current on this thread when the drop began.
                let _ = unsafe { sys::cuCtxSetCurrent(previous) };
            }
        }
    }
}

impl Backend for Cuda {
    type Options = CudaOptions;
    type Stream = CuStream;
    type Event = CuEvent;
    type DevicePtr = CUdeviceptr;
    type Captured = CudaFence;
    const NOTIFIES_COPY_DONE: bool = false;

    fn open(
        options: &CudaOptions,
        ring: Arc<HostRing>,
        layout: Layout,
        _waker: CopyWaker,
    ) -> Result<Self> {
        load_driver()?;
        let (context, borrowed) = open_context(options)?;
        // From here an early return must not drop a borrowed context's wrapper.
        let context = ManuallyDrop::new(context);
        let result = open_resources(&context, &ring, layout);
        match result {
            Ok((res, interop, base, slot_stride)) => Ok(Cuda {
                res: ManuallyDrop::new(res),
                interop: ManuallyDrop::new(interop),
                ctx: context.cu_ctx(),
                ordinal: context.ordinal(),
                context,
                borrowed,
                base,
                slot_stride,
                batch_bytes: layout.batch_bytes,
                ring,
            }),
            Err(e) => {
                let context = ManuallyDrop::into_inner(context);
                if borrowed {
                    std::mem::forget(context);
                }
                Err(e)
            }
        }
    }

    fn wait_fence(&self, d: usize, fence: CudaFence) -> Result<()> {
        if fence.recorded {
            self.bind_copy_thread()?;
            // SAFETY: live handles of this backend; FENCE(d) was recorded by the release
            // that published `fence` (happens-before this call, backend contract).
            check("cuStreamWaitEvent", unsafe {
                sys::cuStreamWaitEvent(self.res.copy_stream.0, self.res.fence[d].0, 0)
            })?;
        }
        Ok(())
    }

    fn copy(&self, _seq: u64, h: usize, d: usize, bytes: usize) -> Result<()> {
        self.bind_copy_thread()?;
        let (stream, dst) = (self.res.copy_stream.0, self.slot(d));
        let src = self.ring.slot_ptr(h).cast_const().cast::<c_void>();
        debug_assert!(bytes <= self.batch_bytes);
        // SAFETY: `src..src + bytes` lies in host slot h of the registered ring, which
        // the slot protocol keeps unwritten until COPIED(h) completes; `dst..dst + bytes`
        // lies in device slot d, which nothing reads until READY(d) (the consumer waits on
        // it) and whose previous reader's fence the copy stream already waits on.
        check("cuMemcpyHtoDAsync", unsafe {
            sys::cuMemcpyHtoDAsync_v2(dst, src, bytes, stream)
        })?;
        // SAFETY: live handles of this backend, recorded by the copy thread only.
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(self.res.ready[d].0, stream)
        })?;
        // SAFETY: as above.
        check("cuEventRecord", unsafe {
            sys::cuEventRecord(self.res.copied[h].0, stream)
        })
    }

    fn copied(&self, h: usize) -> Result<bool> {
        // SAFETY: a live event of this backend (queries need no current context).
        match unsafe { sys::cuEventQuery(self.res.copied[h].0) } {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            other => Err(driver_error("cuEventQuery", other, "")),
        }
    }

    fn ready_on(&self, d: usize, stream: &CuStream) -> Result<()> {
        let _bound = Bound::new(self.ctx)?;
        // SAFETY: READY(d) is live; `stream` is live by CuStream's contract.
        check("cuStreamWaitEvent", unsafe {
            sys::cuStreamWaitEvent(stream.raw, self.res.ready[d].0, 0)
        })
    }

    fn ready_sync(&self, d: usize) -> Result<()> {
        let _bound = Bound::new(self.ctx)?;
        // SAFETY: a live event of this backend.
        check("cuEventSynchronize", unsafe {
            sys::cuEventSynchronize(self.res.ready[d].0)
        })
    }

    fn capture(&self, d: usize, fence: Fence<'_, Self>) -> Result<CudaFence> {
        let recorded = match fence {
            Fence::Sync => false,
            Fence::Stream(stream) => {
                let _bound = Bound::new(self.ctx)?;
                // SAFETY: FENCE(d) is live and recorded only by slot d's holder (us, now);
                // `stream` is live by CuStream's contract.
                let result = unsafe { sys::cuEventRecord(self.res.fence[d].0, stream.raw) };
                if result != CUresult::CUDA_SUCCESS {
                    return Err(self.stream_fence_error(stream.raw, result));
                }
                true
            }
            Fence::Event(event) => {
                let _bound = Bound::new(self.ctx)?;
                let fence_stream = self.res.fence_streams[d].0;
                // SAFETY: slot d's fence stream, used only by slot d's holder; `event` is
                // live by CuEvent's contract (it may belong to any context).
                check("cuStreamWaitEvent", unsafe {
                    sys::cuStreamWaitEvent(fence_stream, event.raw, 0)
                })?;
                // SAFETY: as above; FENCE(d) is recorded only by slot d's holder.
                check("cuEventRecord", unsafe {
                    sys::cuEventRecord(self.res.fence[d].0, fence_stream)
                })?;
                true
            }
        };
        Ok(CudaFence { recorded })
    }

    /// `cuCtxSynchronize` on the pipeline's context: blocks the calling thread until every
    /// stream of the context has drained (see the module docs for the cost).
    fn capture_conservative(&self, _d: usize) -> CudaFence {
        if let Ok(_bound) = Bound::new(self.ctx) {
            // SAFETY: synchronizes the current (the backend's) context. A failure means the
            // context is dead: nothing runs on it, so no fence is needed either.
            let _ = unsafe { sys::cuCtxSynchronize() };
        }
        CudaFence { recorded: false }
    }

    fn device_ptr(&self, d: usize) -> CUdeviceptr {
        self.slot(d)
    }
}

type Opened = (Resources, Interop, CUdeviceptr, usize);

/// Allocates, registers and creates everything, with the context current.
fn open_resources(context: &Arc<CudaContext>, ring: &HostRing, layout: Layout) -> Result<Opened> {
    let _bound = Bound::new(context.cu_ctx())?;
    let slot_stride = layout
        .batch_bytes
        .checked_next_multiple_of(SLOT_ALIGN)
        .and_then(|s| s.checked_mul(layout.device_slots).map(|_| s))
        .ok_or_else(|| Error::Backend {
            call: "cuMemAlloc",
            code: CUresult::CUDA_ERROR_INVALID_VALUE as i32,
            message: "device slots overflow usize".into(),
        })?;
    let memory = DeviceMemory::new(slot_stride * layout.device_slots)?;
    let registration = Registration::new(ring)?;
    let events = |n: usize| (0..n).map(|_| Event::new()).collect::<Result<Box<[_]>>>();
    let ready = events(layout.device_slots)?;
    let copied = events(layout.host_slots)?;
    let fence = events(layout.device_slots)?;
    let fence_streams = (0..layout.device_slots)
        .map(|_| Stream::new())
        .collect::<Result<Box<[_]>>>()?;
    let copy_stream = Stream::new()?;
    let base = memory.0;

    // The cudarc views. Event tracking off: the views are plain memory to cudarc (the
    // pipeline orders them with READY and the release fences), and no cudarc event is
    // created for them.
    // SAFETY: this `CudaContext` is the backend's own wrapper; tracking affects only slices
    // created after the call, i.e. the views below.
    unsafe { context.disable_event_tracking() };
    // SAFETY: the copy stream belongs to this context and outlives the wrapper (the
    // backend drops the interop before `res`).
    let stream = unsafe { context.wrap_borrowed_stream(copy_stream.0) };
    let slots = (0..layout.device_slots)
        .map(|d| {
            let ptr = base + (d * slot_stride) as CUdeviceptr;
            // SAFETY: `ptr..ptr + batch_bytes` lies in the device allocation, which outlives
            // the view (leaked, not freed, in the backend's drop).
            ManuallyDrop::new(unsafe { stream.upgrade_device_ptr::<u8>(ptr, layout.batch_bytes) })
        })
        .collect();
    Ok((
        Resources {
            ready,
            copied,
            fence,
            fence_streams,
            copy_stream,
            _memory: memory,
            _registration: registration,
        },
        Interop { slots, stream },
        base,
        slot_stride,
    ))
}

impl Batch<Cuda> {
    /// The batch's bytes as a cudarc view (`len()` bytes), for kernels launched through
    /// cudarc (candle-style code). Order your stream after the copy first
    /// ([`wait_on`](Batch::wait_on)); cudarc does not track this memory.
    pub fn view(&self) -> CudaView<'_, u8> {
        self.shared.backend.interop.slots[self.slot].slice(0..self.len)
    }

    /// READY(slot): recorded on the copy stream after this batch's H2D. For DLPack-style
    /// consumers that wait on it themselves (`cuStreamWaitEvent`). The handle is reused for
    /// later batches in the same slot: wait on it before releasing the batch.
    pub fn ready_event(&self) -> CUevent {
        self.shared.backend.res.ready[self.slot].0
    }

    /// Releases the batch fenced on `stream` (see [`Fence::Stream`]); on failure the batch
    /// comes back inside the error.
    // The error hands the batch back, exactly as `Batch::release` does.
    #[allow(clippy::result_large_err)]
    pub fn release_on(
        self,
        stream: impl Into<CuStream>,
    ) -> Result<(), crate::batch::ReleaseError<Cuda>> {
        let stream = stream.into();
        self.release(Fence::Stream(&stream))
    }
}

#[cfg(test)]
mod tests {
    /// The device machine (root, no locked-memory accounting) never refuses the
    /// registration, so the hint's content is checked here.
    #[test]
    fn a_refused_registration_says_what_to_change() {
        let hint = super::register_hint(256 << 20);
        assert!(hint.contains("268435456 bytes"), "{hint}");
        assert!(
            hint.contains("RLIMIT_MEMLOCK") && hint.contains("ulimit -l unlimited"),
            "{hint}"
        );
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max locked memory"))
            .unwrap();
        let soft = line.split_whitespace().nth(3).unwrap();
        assert!(hint.contains(&format!("soft {soft} / hard")), "{hint}");
    }
}
