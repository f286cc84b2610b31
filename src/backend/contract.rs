//! The backend contract: the public, sealed [`Backend`], the private [`Ops`] the pipeline
//! drives, and what they exchange.
//!
//! A [`Backend`] owns the device side of one pipeline: the device slots, the copy stream,
//! the per-slot READY points (recorded after each copy into a slot, for the consumer's
//! stream-side waits), the copy count (how many batches' copies have completed: it frees
//! host slots and ends `Batch::synchronize`'s parked wait) and whatever it needs to
//! capture a consumer's release fence. Users pick one through
//! [`ConfigBuilder::backend`](crate::ConfigBuilder::backend) and meet its stream, event and
//! pointer types on [`Batch`](crate::Batch); the operations the pipeline drives are on a
//! private supertrait, so no code outside this crate can call them (nor implement a
//! backend):
//!
//! ```compile_fail,E0599
//! use pinring::{Config, Pipeline};
//! let config = Config::builder().batch_size(1).bytes_per_sample(8).build()?;
//! let p = Pipeline::new(config, pinring::decode_fn(|_: u8, _: &mut [u8]| Ok(())), 0..1u8)?;
//! // The copy thread's completion query is the pipeline's alone: this does not compile.
//! let _ = p.backend().completed(0);
//! # Ok::<(), pinring::Error>(())
//! ```
//!
//! Nor through a generic bound (which reaches a supertrait's methods without naming it):
//! every operation takes a slot index or role of a type only the crate can make.
//!
//! ```compile_fail,E0308
//! fn poke<B: pinring::Backend>(backend: &B) {
//!     let _ = backend.completed(0);
//! }
//! ```
//!
//! Threading contract (the slot protocol guarantees it, and a backend may rely on it):
//! - `wait_fence`, `copy` and `completed` are called by the copy thread only, and
//!   `wait_fence` for the slots' leftover fences by the last owner at teardown;
//! - `ready_on`, `ready_sync`, every `capture_*`, `poison` and `device_ptr` for slot `d`
//!   are called only by the holder of the batch leased in slot `d` (any thread), between
//!   the copy into `d` and the release that publishes the captured fence;
//! - a capture for slot `d` (and the `poison` of what it captured) happens-before the copy
//!   thread's `wait_fence` of it (the release publishes it with a Release store the copy
//!   thread Acquire-loads), and that `wait_fence` happens-before the next `copy` into `d`.

use std::fmt;
use std::time::Duration;

use super::bound::BoundStreams;
use crate::error::{Error, Result};
use crate::host_ring::HostRing;
use crate::park::ParkSlot;
use crate::slot::index::{DeviceIdx, HostIdx};
use crate::sync::native::Arc;

/// The device side of a pipeline: [`Cpu`](crate::Cpu) (always built) or `Cuda` (feature
/// `cuda`).
///
/// Sealed: its operations live on a private supertrait. The protocol's safety rests on
/// each backend honouring the threading contract (`src/backend/contract.rs`) and its
/// fences' meaning.
pub trait Backend: Sized + Send + Sync + 'static + Ops {
    /// How to open the backend (device choice, fault injection, ...).
    type Options: Clone + fmt::Debug + Default + Send + Sync + 'static;
    /// The caller's stream: what [`Batch::wait_on`](crate::Batch::wait_on) binds to and
    /// [`Fence::Stream`](crate::Fence::Stream) records on.
    type Stream: Clone + fmt::Debug + Send + Sync + 'static;
    /// The caller's event, for [`Fence::Event`](crate::Fence::Event).
    type Event: fmt::Debug + Send + Sync + 'static;
    /// Where a leased batch's bytes are on the device.
    type DevicePtr: Copy + fmt::Debug + Send + Sync + 'static;
}

/// Sizes and limits a backend opens with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of one full batch.
    pub batch_bytes: usize,
    /// Bytes from one host slot's start to the next (a page multiple).
    pub host_stride: usize,
    /// Bytes from one device slot's start to the next (the batch rounded up to the page:
    /// equal to `host_stride` unless the ring uses huge pages).
    pub device_stride: usize,
    /// Number of host slots in the ring.
    pub host_slots: usize,
    /// Number of device slots.
    pub device_slots: usize,
    /// How long the backend's teardown may wait for device work (copies, release fences)
    /// before it leaks the memory that work may still touch instead of freeing it.
    pub shutdown_timeout: Duration,
    /// Whether released device slots are poisoned ([`Ops::poison`] is called): a backend
    /// may set up what that needs when it opens.
    pub poison_released: bool,
    /// Whether the backend's own threads run as `SCHED_BATCH`
    /// ([`ConfigBuilder::batch_scheduling`](crate::ConfigBuilder::batch_scheduling)).
    pub batch_scheduling: bool,
}

/// Lets a backend wake the copy thread when a copy completes.
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

/// One copy the copy thread asks for: a run of `batches` consecutive batches from
/// `first`, in consecutive host slots from `host` and consecutive device slots from
/// `device` (neither wraps around). Every batch but the last is copied whole (a short
/// one, the last of an epoch, takes its stale tail along, which no one reads); the last
/// has `last_bytes` bytes. The backend copies them (in one piece where it can), then
/// records each batch's READY point and, after the run, its completion point.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyRun {
    /// The first batch's sequence number.
    pub first: u64,
    /// The first batch's host slot.
    pub host: HostIdx,
    /// The first batch's device slot.
    pub device: DeviceIdx,
    /// Batches in the run (at least 1).
    pub batches: usize,
    /// Bytes of the run's last batch (the others are full).
    pub last_bytes: usize,
}

impl CopyRun {
    /// The run's batches as (sequence, host slot, device slot).
    pub fn each(&self) -> impl Iterator<Item = (u64, HostIdx, DeviceIdx)> + '_ {
        (0..self.batches).map(move |i| {
            (
                self.first + i as u64,
                HostIdx(self.host.0 + i),
                DeviceIdx(self.device.0 + i),
            )
        })
    }

    /// The sequence number after the run's last batch.
    pub fn end(&self) -> u64 {
        self.first + self.batches as u64
    }

    /// Bytes to copy of the run's batch `seq`: `last_bytes` for its last, `batch_bytes`
    /// (a full batch) for every other.
    pub fn bytes_of(&self, seq: u64, batch_bytes: usize) -> usize {
        if seq + 1 == self.end() {
            self.last_bytes
        } else {
            batch_bytes
        }
    }
}

/// A copy run that failed: how many of its batches were enqueued whole first, and why
/// the rest was not.
#[derive(Debug)]
pub struct CopyFailed {
    /// Batches of the run (from its first) enqueued with their READY points.
    pub enqueued: usize,
    /// Why the next one was not.
    pub error: Error,
}

impl CopyFailed {
    /// A failure before any of the run's batches was enqueued.
    pub fn at_start(error: Error) -> Self {
        CopyFailed { enqueued: 0, error }
    }
}

/// What the copy thread (and the teardown, which inherits its role) passes to the
/// operations that are its alone: a value only this crate can make, so that no code
/// outside it can call them.
#[derive(Debug)]
pub struct CopyRole(pub(crate) ());

/// The byte a poisoned device slot is filled with: every byte 0xFF, so that integers read
/// -1 (signed) or their largest value (unsigned: 255, 65,535, ...; out of range for any
/// vocabulary) and floats read NaN.
pub const POISON_BYTE: u8 = 0xFF;

/// The backend operations: nominally `pub` so that [`Backend`] may name it as a
/// supertrait, but in a crate-private module, so nothing outside the crate can call them.
///
/// Release fences: a release captures, for slot `d`, what the device must finish before
/// the slot is reused: the caller's fence AND every stream the batch was bound to with
/// `wait_on` that the fence does not already cover (`bound`); past the binding capacity
/// (`bound.overflowed()`) the capture is conservative. Fences stay per slot: a late fence
/// on one slot never holds up another's reuse.
pub trait Ops: Sized {
    /// A release fence as the releasing thread captured it.
    type Captured: Send + 'static;
    /// What a batch bound with `wait_on` remembers of one stream, to fence its release;
    /// equal bindings name the same stream (a batch keeps each once).
    type Binding: PartialEq + Send + Sync + 'static;

    /// Opens the device side over `ring`.
    fn open(
        options: &<Self as Backend>::Options,
        ring: Arc<HostRing>,
        layout: Layout,
        waker: CopyWaker,
    ) -> Result<Self>
    where
        Self: Backend;

    /// Whether the backend wakes the copy thread (through the [`CopyWaker`]) when a
    /// copy completes; when not, the copy thread polls [`completed`](Ops::completed).
    fn notifies_copy_done(&self, role: &CopyRole) -> bool;

    /// Copy thread: makes the copy stream wait (stream-side) for a captured release
    /// fence of slot `d` before anything enqueued after it.
    fn wait_fence(&self, role: &CopyRole, d: DeviceIdx, fence: Self::Captured) -> Result<()>;

    /// Copy thread: enqueues the run's copy, then records each batch's READY point and
    /// the run's completion point. On failure, says how many of the run's batches (from
    /// its first) were enqueued whole before it: those are delivered, the failure is
    /// the next batch's.
    fn copy(&self, role: &CopyRole, run: &CopyRun) -> Result<(), CopyFailed>;

    /// Copy thread: how many batches, from the first, have been copied completely (a
    /// copy out of a host slot is done only once this count passes its batch). Never
    /// ahead of the copies it has seen complete.
    fn completed(&self, role: &CopyRole) -> Result<u64>;

    /// Copy thread, at the end of the stream (END or FAILED), before it waits for the
    /// copies in flight to complete: nothing more will be enqueued. A device that moves
    /// only when a thread waits on it (the model device) runs them here; real devices
    /// complete them on their own (the default does nothing).
    fn finish_copies(&self, role: &CopyRole) {
        let _ = role;
    }

    /// Time the backend's copy engine has spent moving bytes, where the backend can
    /// tell (the cpu backend's copies run on a thread of its own); `None` where the
    /// copies run on hardware it does not time.
    fn transfer_time(&self) -> Option<Duration> {
        None
    }

    /// Whether the backend could bind a batch to `stream` and fence on it later (what
    /// `ready_on` refuses); checked once for the pipeline's declared consumer stream when
    /// the pipeline starts.
    fn check_stream(&self, stream: &<Self as Backend>::Stream) -> Result<()>
    where
        Self: Backend;

    /// Lease holder: makes `stream` wait (stream-side) for READY(d), unless the copy count
    /// already passed `seq` (batch `seq`'s copy completed and the host saw it: work
    /// enqueued from now on, on any stream, runs after the copy, so no wait is enqueued and
    /// no driver call made); returns what a release of the batch must fence on. Refuses a
    /// stream it could not fence on later; `declared`: the pipeline's consumer stream,
    /// which `check_stream` accepted when the pipeline started, so that checks which cannot
    /// change since may be skipped.
    fn ready_on(
        &self,
        d: DeviceIdx,
        seq: u64,
        stream: &<Self as Backend>::Stream,
        declared: bool,
    ) -> Result<Self::Binding>
    where
        Self: Backend;

    /// Lease holder: blocks the calling thread, parked rather than spinning, until the
    /// copy of batch `seq` into slot `d` has completed. Backends wait for their copy count
    /// ([`CopyCount`](super::copy_count::CopyCount)) to pass `seq`, not for READY(d):
    /// READY points serve stream-side waits and need not support a parked host wait.
    fn ready_sync(&self, d: DeviceIdx, seq: u64) -> Result<()>;

    /// Lease holder releasing with `Fence::Sync`: the caller promises the device is done
    /// with slot `d`, on every stream (bound ones included); nothing to wait for.
    fn capture_sync(&self, d: DeviceIdx) -> Self::Captured;

    /// Lease holder releasing with `Fence::Stream(stream)`: a fence recorded on `stream`
    /// now, and on every stream in `bound` that is not `stream`.
    fn capture_stream(
        &self,
        d: DeviceIdx,
        stream: &<Self as Backend>::Stream,
        bound: &BoundStreams<Self::Binding>,
    ) -> Result<Self::Captured>
    where
        Self: Backend;

    /// Lease holder releasing with `Fence::Event(event)`: `event`'s latest record as it
    /// stands now, and a fence recorded on every stream in `bound`.
    fn capture_event(
        &self,
        d: DeviceIdx,
        event: &<Self as Backend>::Event,
        bound: &BoundStreams<Self::Binding>,
    ) -> Result<Self::Captured>
    where
        Self: Backend;

    /// Lease holder dropping a bound batch (`bound` is not empty): a fence on every bound
    /// stream. Never fails: what cannot be fenced exactly is fenced conservatively.
    fn capture_bound(&self, d: DeviceIdx, bound: &BoundStreams<Self::Binding>) -> Self::Captured;

    /// Lease holder dropping an unbound batch: a fence covering any device work that
    /// may still read slot `d`. Never fails; may block (documented per backend).
    fn capture_conservative(&self, d: DeviceIdx) -> Self::Captured;

    /// Lease holder, in poison mode (`Layout::poison_released`), after a capture: enqueues
    /// the fill of slot `d` with [`POISON_BYTE`] on the device, ordered after `fence`, and
    /// returns the fence the slot's next copy must wait for (after the fill). Never fails:
    /// where the fill cannot be enqueued, the slot is left as it is, still fenced.
    fn poison(&self, d: DeviceIdx, fence: Self::Captured) -> Self::Captured;

    /// Where device slot `d` is.
    fn device_ptr(&self, d: DeviceIdx) -> <Self as Backend>::DevicePtr
    where
        Self: Backend;
}
