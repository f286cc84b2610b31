//! The cuda backend: a pinned host ring, side-stream H2D copies and event-fenced device
//! slots, through the CUDA driver API (cudarc, loaded at run time).
//!
//! In layers, as cudarc's own `driver::{sys, result, safe}`: `driver` loads libcuda and
//! names failed calls; `context` opens the pipeline's context and binds it for a call
//! without disturbing the caller's; `resources` owns every driver resource (RAII, each
//! freed in its context); `backend` is the [`Cuda`](crate::Cuda) backend; `handles` are the
//! caller's [`CuStream`](crate::CuStream) and [`CuEvent`](crate::CuEvent). The cudarc
//! interop of a batch (`view_on`, `ready_event`, `release_on`) is in `src/batch/cuda.rs`.
//! Driver calls go through cudarc's `result` layer where it has one.
//!
//! # What it holds
//!
//! - The host ring (one anonymous mapping) registered with `cuMemHostRegister`
//!   (portable, not write-combined, its exact size) for the backend's lifetime.
//! - The device slots: one `cuMemAlloc` of `device_slots` slots, each starting on a page
//!   boundary, so that a run of consecutive batches lies in the device slots as in the
//!   host ring and copies in one `cuMemcpyHtoDAsync` (each batch keeps its READY event).
//! - One non-blocking copy stream, driven by the pipeline's copy thread alone.
//! - Events, all created once with timing disabled and reused (none is created per
//!   batch): READY(d) per device slot (recorded after each copy into it), COPIED(h) per
//!   host slot (recorded after each copy out of it; a completion thread of the backend's
//!   follows them in order, spinning briefly and then waiting in the driver, parked, and
//!   wakes the copy thread as copies complete), FENCE(d) per device slot (what a release
//!   captured) and LINK(d) per device slot (joins several streams into FENCE(d)).
//! - One non-blocking fence stream per device slot, for [`Fence::Event`], releases of a
//!   batch bound to several streams, and the poison mode.
//!
//! # Release fences
//!
//! A release captures what the device must finish, at release time, in FENCE(d):
//! - [`Fence::Stream(s)`](crate::Fence::Stream): `cuEventRecord(FENCE(d), s)`. `s` must belong
//!   to the pipeline's context (otherwise [`Error::Fence`]).
//! - [`Fence::Event(e)`](crate::Fence::Event): `cuStreamWaitEvent(fence_stream(d), e)` then
//!   `cuEventRecord(FENCE(d), fence_stream(d))`, so FENCE(d) stands for `e`'s record as it
//!   was at release time even if the caller records `e` again later, and a late `e`
//!   stalls only slot `d`. `e` may belong to another context or device.
//! - [`Fence::Sync`] captures nothing (it covers every stream, by the caller's promise).
//!
//! A batch bound with [`Batch::wait_on`](crate::Batch::wait_on) to streams the fence does
//! not name is fenced on each of them too: for every such stream `b`,
//! `cuEventRecord(LINK(d), b)` and `cuStreamWaitEvent(fence_stream(d), LINK(d))` (each wait
//! takes LINK's record as it stands, so one event serves every stream), then FENCE(d) is
//! recorded on the fence stream after the fence's own wait. A batch bound to one stream
//! and released on it (the common case) costs one record, as before.
//!
//! The copy thread then enqueues `cuStreamWaitEvent(copy_stream, FENCE(d))` before the
//! next copy into slot `d`. Nothing on this path blocks the host.
//!
//! [`Batch::wait_on`](crate::Batch::wait_on) refuses a stream of another context (its
//! release could not be fenced on it). A bound batch dropped unreleased is fenced on its
//! streams; if one of them is the per-thread default stream of another thread, or the
//! legacy stream while another context is current on the dropping thread, or the batch was
//! bound to more streams than it keeps (4), it is fenced conservatively instead. A batch
//! dropped unreleased and unbound is fenced conservatively: the dropping thread calls
//! `cuCtxSynchronize` on the pipeline's context, which blocks it until every stream of the
//! context has drained — as long as the longest queued kernel — and stalls the copies too.
//! Release explicitly or bind with `wait_on` to avoid it. Work in *another* context is not
//! covered: release such batches with a fence.
//!
//! # Poison mode
//!
//! With [`ConfigBuilder::poison_released`](crate::ConfigBuilder::poison_released), each
//! release then enqueues on the slot's fence stream `cuStreamWaitEvent(FENCE(d))` (when a
//! fence was captured), `cuMemsetD8Async(slot d, 0xFF, device_stride)` and
//! `cuEventRecord(FENCE(d))`: the slot is filled once the consumer's work is done, without
//! waiting for its next use, and its next copy waits for the fill. It costs three driver
//! calls per release on the releasing thread and one memset of the slot per batch on the
//! device (a device-memory write at its bandwidth, beside the H2D copies); measure it with
//! the GPU suite's `poison_mode_cost` (tests/gpu).
//!
//! # Contexts
//!
//! A pipeline binds one device: its primary context, chosen by ordinal
//! ([`CudaOptions::ordinal`](crate::CudaOptions::ordinal)), or the context current on the thread that creates the
//! pipeline ([`CudaOptions::current`](crate::CudaOptions::current), what PyTorch users have). Calls made on behalf of
//! the consumer make that context current only for the call when the calling thread has
//! another one current (and bind it when the thread has none); the copy thread binds it
//! once. pinring changes none of the context's settings: [`Cuda::context`](crate::Cuda::context) behaves as
//! cudarc documents. Several pipelines on several devices can live in one process.
//!
//! # Teardown
//!
//! The backend goes when the pipeline and its last batch are gone. It first waits for the
//! copy stream, which by then also waits for every release fence still pending, up to the
//! pipeline's [`shutdown_timeout`](crate::ConfigBuilder::shutdown_timeout); past it (a
//! kernel that never finishes), it frees nothing — device memory, the pinned ring, streams
//! and events are leaked, never freed under work that may still touch them.
//!
//! # No driver
//!
//! `libcuda` is opened at run time by pinring itself, whichever way cudarc links it. When
//! it is missing, or lacks an entry point pinring needs, creating a pipeline returns
//! [`Error::Backend`] saying so; nothing panics. [`Cuda::device_count`](crate::Cuda::device_count) tells a program
//! whether it can use this backend at all.
//!
//! [`Error::Backend`]: crate::Error::Backend
//! [`Error::Fence`]: crate::Error::Fence
//! [`Fence::Stream`]: crate::Fence::Stream
//! [`Fence::Event`]: crate::Fence::Event
//! [`Fence::Sync`]: crate::Fence::Sync

pub(crate) mod backend;
mod completion;
mod context;
mod driver;
pub(crate) mod handles;
pub(crate) mod options;
mod resources;
