//! A leased batch: a device slot the consumer holds until it releases it.

use std::fmt;

use crate::backend::{Backend, Cpu};
use crate::error::{Error, Result};
use crate::shared::Shared;
use crate::slot::DeviceState;
use crate::sync::Arc;

/// What the device must finish before a released batch's slot is reused.
///
/// Reuse always waits stream-side (the copy stream waits on the fence); the host never
/// blocks on it. Fences are per slot: a late fence on one slot never holds up another.
pub enum Fence<'a, B: Backend = Cpu> {
    /// The caller promises the device no longer reads the slot (for example, it has
    /// synchronized). Cheapest; wrong if the promise is false.
    Sync,
    /// Reuse waits for this event as it stands now (its latest record at release time).
    Event(&'a B::Event),
    /// Records an event on this stream now; reuse waits for it.
    Stream(&'a B::Stream),
}

impl<B: Backend> fmt::Debug for Fence<'_, B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Fence::Sync => "Fence::Sync",
            Fence::Event(_) => "Fence::Event",
            Fence::Stream(_) => "Fence::Stream",
        })
    }
}

/// One batch on the device, leased to the consumer until released.
///
/// Release it with [`release`](Batch::release) (from any thread, in any order), or drop
/// it: a batch bound to a stream with [`wait_on`](Batch::wait_on) is then fenced on that
/// stream; an unbound one is fenced conservatively (on the cpu backend: every
/// [`CpuStream`](crate::CpuStream) drains first; see the backend's docs for its cost).
/// A batch stays valid after its pipeline is dropped.
pub struct Batch<B: Backend = Cpu> {
    pub(crate) shared: Arc<Shared<B>>,
    pub(crate) seq: u64,
    pub(crate) slot: usize,
    pub(crate) samples: usize,
    pub(crate) len: usize,
    pub(crate) bound: Option<B::Stream>,
    pub(crate) released: bool,
}

impl<B: Backend> Batch<B> {
    pub(crate) fn new(shared: Arc<Shared<B>>, seq: u64, slot: usize, samples: usize) -> Self {
        let len = samples * shared.sample_bytes;
        Batch {
            shared,
            seq,
            slot,
            samples,
            len,
            bound: None,
            released: false,
        }
    }

    /// The batch's sequence number: 0, 1, 2, ... in source order.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Samples in the batch (less than `samples_per_batch` only for a short last batch).
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// Bytes of the batch: `samples() × sample_bytes`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds no bytes (never: empty batches are not delivered).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Index of the device slot the batch occupies.
    pub fn slot(&self) -> usize {
        self.slot
    }

    /// Where the batch's bytes start on the device.
    pub fn device_ptr(&self) -> B::DevicePtr {
        self.shared.backend.device_ptr(self.slot)
    }

    /// Makes `stream` wait, stream-side, until the batch is on the device; the host does
    /// not block. Binds the batch to `stream`: dropping it then fences on `stream`.
    pub fn wait_on(&mut self, stream: &B::Stream) -> Result<()> {
        self.shared.backend.ready_on(self.slot, stream)?;
        self.bound = Some(stream.clone());
        Ok(())
    }

    /// Blocks the calling thread until the batch is on the device.
    pub fn synchronize(&self) -> Result<()> {
        self.shared.backend.ready_sync(self.slot)
    }

    /// Gives the slot back; its reuse waits for `fence`. On failure (the fence could not be
    /// captured) the batch comes back inside the error, still leased.
    pub fn release(mut self, fence: Fence<'_, B>) -> Result<(), ReleaseError<B>> {
        #[cfg(pinring_loom)]
        if crate::loom_api::mutated(crate::loom_api::Mutation::PublishBeforeRecord) {
            // Seeded bug (models only): RELEASED is published before the fence is recorded.
            let slot = &self.shared.device[self.slot];
            slot.stamp.publish(self.seq, DeviceState::Released as u8);
        }
        match self.shared.backend.capture(self.slot, fence) {
            Ok(captured) => {
                self.publish(captured);
                Ok(())
            }
            Err(error) => Err(ReleaseError { batch: self, error }),
        }
    }

    /// Stores the captured fence and hands the slot to the copy thread.
    fn publish(&mut self, captured: B::Captured) {
        let slot = &self.shared.device[self.slot];
        // SAFETY: this batch holds device slot `slot` (LEASED(seq)); the copy thread reads
        // the fence cell only after it Acquires the RELEASED stamp published below.
        slot.fence.with_mut(|f| unsafe { *f = Some(captured) });
        // Release: the fence (recorded inside `capture`, before this) is visible to the
        // copy thread's Acquire load of the stamp — invariant 2.
        slot.stamp.publish(self.seq, DeviceState::Released as u8);
        self.released = true;
        self.shared.copier.wake();
    }
}

impl Batch<Cpu> {
    /// The batch's bytes. Waits (host-side) until its copy has completed.
    pub fn bytes(&self) -> &[u8] {
        self.shared.backend.ready_sync_infallible(self.slot);
        let ptr = self.shared.backend.device_ptr(self.slot).as_ptr();
        // SAFETY: READY(slot) has completed, so the copy into the slot is done; the slot
        // is not written again until this batch is released, which consumes it and so
        // ends this borrow. `len` bytes lie inside the slot.
        unsafe { std::slice::from_raw_parts(ptr, self.len) }
    }
}

impl<B: Backend> Drop for Batch<B> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let backend = &self.shared.backend;
        let captured = match self.bound.take() {
            Some(stream) => backend
                .capture(self.slot, Fence::Stream(&stream))
                .unwrap_or_else(|_| backend.capture_conservative(self.slot)),
            None => backend.capture_conservative(self.slot),
        };
        self.publish(captured);
    }
}

impl<B: Backend> fmt::Debug for Batch<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("seq", &self.seq)
            .field("samples", &self.samples)
            .field("len", &self.len)
            .field("slot", &self.slot)
            .finish()
    }
}

/// A release that failed, with the batch handed back still leased.
pub struct ReleaseError<B: Backend = Cpu> {
    /// The batch, still leased; release or drop it again.
    pub batch: Batch<B>,
    /// Why the fence could not be captured.
    pub error: Error,
}

impl<B: Backend> fmt::Debug for ReleaseError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReleaseError")
            .field("batch", &self.batch)
            .field("error", &self.error)
            .finish()
    }
}

impl<B: Backend> fmt::Display for ReleaseError<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "release of batch {} failed: {}",
            self.batch.seq, self.error
        )
    }
}

impl<B: Backend> std::error::Error for ReleaseError<B> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}
