//! Device backends: where device slots live and how copies and fences run.
//!
//! A [`Backend`] owns the device side of one pipeline: the device slots, the copy stream,
//! the per-slot READY events (recorded after each H2D), the per-host-slot COPIED events
//! (the copy thread polls them to free host slots) and whatever it needs to capture a
//! consumer's release [`Fence`](crate::Fence). The pipeline's protocol code calls it; users
//! pick one through [`ConfigBuilder::backend`](crate::ConfigBuilder::backend) and meet its
//! stream, event and pointer types on [`Batch`](crate::Batch).
//!
//! Threading contract (the protocol guarantees it, the backend may rely on it):
//! - `copy`, `wait_fence` and `copied` are called by the copy thread only.
//! - `ready_on`, `ready_sync`, `capture`, `capture_conservative` and `device_ptr` for slot
//!   `d` are called only by the holder of the batch leased in slot `d` (any thread), and
//!   only between the copy thread's `copy(.., d, ..)` and the release that publishes the
//!   captured fence.
//! - `capture(d, ..)` happens-before the copy thread's `wait_fence(d, ..)` for that capture
//!   (the release publishes it with a Release store the copy thread Acquire-loads).

pub mod cpu;
#[cfg(feature = "cuda")]
pub mod cuda;
#[cfg(pinring_loom)]
pub mod model;

use std::fmt;
use std::sync::Arc;

use crate::error::Result;
use crate::host_ring::HostRing;
use crate::park::ParkSlot;
use crate::Fence;

pub use cpu::{Cpu, CpuDevicePtr, CpuEvent, CpuOptions, CpuStream};
#[cfg(feature = "cuda")]
pub use cuda::{CuEvent, CuStream, Cuda, CudaDevice, CudaOptions};

mod sealed {
    pub trait Sealed {}
}
pub(crate) use sealed::Sealed;

/// Sizes a backend opens with.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of one full batch (samples per batch × bytes per sample).
    pub batch_bytes: usize,
    /// Number of host slots in the ring.
    pub host_slots: usize,
    /// Number of device slots.
    pub device_slots: usize,
}

/// Lets a backend wake the copy thread when a copy completes (backends whose
/// [`Backend::NOTIFIES_COPY_DONE`] is true call it after each COPIED event completes).
#[doc(hidden)]
#[derive(Clone)]
pub struct CopyWaker(pub(crate) Arc<ParkSlot>);

impl CopyWaker {
    /// Wakes the copy thread if it sleeps.
    pub fn wake(&self) {
        self.0.wake();
    }
}

impl fmt::Debug for CopyWaker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CopyWaker")
    }
}

/// The device side of a pipeline: [`Cpu`] (always built) or `Cuda` (feature `cuda`).
///
/// Sealed: the protocol's safety rests on each backend honouring the module's threading
/// contract and its fences' meaning.
pub trait Backend: Sized + Send + Sync + 'static + Sealed {
    /// How to open the backend (device choice, fault injection, ...).
    type Options: Clone + fmt::Debug + Default + Send + Sync + 'static;
    /// The caller's stream: what [`Batch::wait_on`](crate::Batch::wait_on) binds to and
    /// [`Fence::Stream`] records on.
    type Stream: Clone + Send + Sync + 'static;
    /// The caller's event, for [`Fence::Event`].
    type Event: Send + Sync + 'static;
    /// Where a leased batch's bytes are on the device.
    type DevicePtr: Copy + fmt::Debug + Send + Sync + 'static;
    /// A release fence as the releasing thread captured it.
    #[doc(hidden)]
    type Captured: Send + 'static;
    /// Whether the backend wakes the copy thread (through [`CopyWaker`]) when a copy
    /// completes; when false the copy thread polls [`copied`](Backend::copied).
    #[doc(hidden)]
    const NOTIFIES_COPY_DONE: bool;

    /// Opens the device side over `ring`.
    #[doc(hidden)]
    fn open(
        options: &Self::Options,
        ring: Arc<HostRing>,
        layout: Layout,
        waker: CopyWaker,
    ) -> Result<Self>;

    /// Copy thread: makes the copy stream wait for a captured release fence of slot `d`
    /// before anything enqueued after it (stream-side; never a host block on CUDA).
    #[doc(hidden)]
    fn wait_fence(&self, d: usize, fence: Self::Captured) -> Result<()>;

    /// Copy thread: enqueues the H2D of `bytes` bytes of batch `seq` from host slot `h`
    /// into device slot `d`, then records READY(d) and COPIED(h) after it.
    #[doc(hidden)]
    fn copy(&self, seq: u64, h: usize, d: usize, bytes: usize) -> Result<()>;

    /// Copy thread: whether the last copy out of host slot `h` has completed.
    #[doc(hidden)]
    fn copied(&self, h: usize) -> Result<bool>;

    /// Lease holder: makes `stream` wait (stream-side) for READY(d).
    #[doc(hidden)]
    fn ready_on(&self, d: usize, stream: &Self::Stream) -> Result<()>;

    /// Lease holder: blocks the calling thread until READY(d) has completed.
    #[doc(hidden)]
    fn ready_sync(&self, d: usize) -> Result<()>;

    /// Lease holder: captures a release fence for slot `d` (records it now where the fence
    /// is a stream), so that a later [`wait_fence`](Backend::wait_fence) waits on exactly
    /// the work the caller had enqueued at this point.
    #[doc(hidden)]
    fn capture(&self, d: usize, fence: Fence<'_, Self>) -> Result<Self::Captured>;

    /// Lease holder dropping an unbound batch: a fence that covers any device work that
    /// may still read slot `d`. Never fails; may block (documented per backend).
    #[doc(hidden)]
    fn capture_conservative(&self, d: usize) -> Self::Captured;

    /// Where device slot `d` is.
    #[doc(hidden)]
    fn device_ptr(&self, d: usize) -> Self::DevicePtr;
}
