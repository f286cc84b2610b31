//! A leased batch: a device slot the consumer holds until it releases it. The generic
//! part is here; each backend's own accessors are in a file of their own (`cpu.rs`,
//! `cuda.rs`), beside each other rather than inside the backends, which sit below the
//! batch and do not know it. `candle.rs` (feature `candle`): a batch's fields as candle
//! tensors; `view.rs`: typed views' element types and errors.

#[cfg(feature = "candle")]
mod candle;
mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
pub(crate) mod view;

use std::fmt;

use crate::backend::bound::BoundStreams;
use crate::backend::contract::Backend;
use crate::backend::cpu::Cpu;
use crate::backend::fence::Fence;
use crate::device_side::DeviceSide;
use crate::error::source::SourceError;
use crate::error::{Error, Result};
use crate::fields::{Dtype, Fields};
use crate::locate::Location;
use crate::row::{Row, MAX_DIMS};
use crate::slot::index::DeviceIdx;
use crate::sync::Arc;
use crate::trace::{Kind, Track};

/// One batch on the device, leased to the consumer until released.
///
/// Release it with [`release`](Batch::release) (from any thread, in any order), or drop
/// it: a batch bound to streams with [`wait_on`](Batch::wait_on) is then fenced on every
/// one of them; an unbound one is fenced conservatively (cpu backend: the slot's next copy
/// waits for everything queued on every [`CpuStream`](crate::CpuStream) so far, without
/// blocking; cuda backend: the dropping thread synchronizes the pipeline's context, a host
/// block — bind or release explicitly on the hot path). A batch stays valid after its
/// pipeline is dropped.
pub struct Batch<B: Backend = Cpu> {
    device: Arc<DeviceSide<B>>,
    seq: u64,
    slot: DeviceIdx,
    samples: usize,
    len: usize,
    /// The streams `wait_on` bound the batch to: a release fences on each of them.
    bound: BoundStreams<B::Binding>,
    released: bool,
}

impl<B: Backend> Batch<B> {
    pub(crate) fn new(device: Arc<DeviceSide<B>>, seq: u64, slot: usize, samples: usize) -> Self {
        let len = samples * device.sample_bytes;
        Batch {
            device,
            seq,
            slot: DeviceIdx(slot),
            samples,
            len,
            bound: BoundStreams::new(),
            released: false,
        }
    }

    /// The batch's sequence number: 0, 1, 2, ... in source order.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Samples in the batch: less than `batch_size` only for a short batch, the
    /// source's last or an epoch's last (a batch never spans two epochs).
    pub fn samples(&self) -> usize {
        self.samples
    }

    /// Bytes of the batch: `samples() × bytes_per_sample`.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds no bytes (never: empty batches are not delivered).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Index of the device slot the batch occupies.
    pub fn slot(&self) -> usize {
        self.slot.0
    }

    /// Where the batch's bytes start on the device.
    pub fn device_ptr(&self) -> B::DevicePtr {
        self.device.backend.device_ptr(self.slot)
    }

    /// The backend (for the backend-specific accessors in `cpu.rs` and `cuda.rs`).
    pub(crate) fn backend(&self) -> &B {
        &self.device.backend
    }

    /// The device slot, as the backend names it.
    #[cfg(feature = "cuda")]
    pub(crate) fn device_idx(&self) -> DeviceIdx {
        self.slot
    }

    /// The stable ids of the batch's rows, in order: one per sample, where the samples
    /// carry ids ([`Decode::identify`](crate::Decode::identify): a
    /// [`Sampler`](crate::source::Sampler)'s windows do), or one per document of a batch
    /// of packed documents ([`Decode::describe`](crate::Decode::describe)); empty
    /// otherwise. An id is the row's index in its source's fixed enumeration
    /// ([`WindowSpec::id`](crate::source::WindowSpec::id) for windows), the same whatever
    /// the order, seed, rank or world size, so a rank can log or check exactly what it saw.
    ///
    /// ```
    /// use pinring::source::{write_shard, NextToken, TokenShards, TokenType};
    /// use pinring::{Config, Fence, Pipeline};
    /// # let dir = std::env::temp_dir().join(format!("pinring-ids-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &(0..100u16).collect::<Vec<_>>())?; // 11 windows of 9
    /// let sampler = TokenShards::open([dir.join("a.bin")])?.windows(9).stride(9).build()?;
    /// let decoder = NextToken::new(TokenType::I32);
    /// let config = Config::builder().batch_size(4).bytes_per_sample(decoder.sample_bytes(9)).build()?;
    /// // Two epochs of 11 windows: batches of 4, 4, 3 in each (a batch never spans two).
    /// let mut pipeline = Pipeline::new(config, decoder, sampler.iter().until_epoch(2))?;
    /// let mut seen = Vec::new();
    /// while let Some(batch) = pipeline.pop()? {
    ///     seen.push((batch.epoch(), batch.sample_ids().to_vec()));
    ///     batch.release(Fence::Sync)?;
    /// }
    /// assert_eq!(seen.len(), 6);
    /// assert_eq!(seen[2], (0, vec![8, 9, 10]));
    /// assert_eq!(seen[3], (1, vec![0, 1, 2, 3]));
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sample_ids(&self) -> &[u64] {
        // SAFETY: this batch holds the lease of its slot until it is released or dropped,
        // which takes `self`; the slice borrows `self`.
        unsafe { self.device.slots.leased_rows(self.slot).0 }
    }

    /// Each row's length in its source's units, in the order of
    /// [`sample_ids`](Self::sample_ids), where the source says it (a packed document's
    /// tokens in the batch: the differences of `cu_seqlens`); 0 otherwise.
    pub fn row_lens(&self) -> &[u32] {
        // SAFETY: as in `sample_ids`.
        unsafe { self.device.slots.leased_rows(self.slot).1 }
    }

    /// Each row's source, in the order of [`sample_ids`](Self::sample_ids): its index in a
    /// mixture of sources; 0 otherwise.
    pub fn row_sources(&self) -> &[u16] {
        // SAFETY: as in `sample_ids`.
        unsafe { self.device.slots.leased_rows(self.slot).2 }
    }

    /// Where each row of the batch came from, in the order of
    /// [`sample_ids`](Self::sample_ids): its source, file, and first unit and length in the
    /// source's units (tokens, records), as the pipeline's locator
    /// ([`ConfigBuilder::locator`](crate::ConfigBuilder::locator)) places it from the row's
    /// id, length and source. Nothing is read. Without a locator it is
    /// [`SourceError::NoLocator`]; a row the locator cannot place (a locator of another
    /// source) is [`SourceError::Unlocated`]. It allocates the list: call it where a batch
    /// is worth tracing (a loss spike), not on every step of the hot path.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pinring::source::{write_shard, TokenShards, TokenType, Tokens};
    /// use pinring::{Config, Fence, Pipeline};
    /// # let dir = std::env::temp_dir().join(format!("pinring-batch-locate-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &(0..1000u16).collect::<Vec<_>>())?;
    /// let sampler = TokenShards::open([dir.join("a.bin")])?.windows(9).batch_size(4).build()?;
    /// let decoder = Tokens::new(TokenType::U16);
    /// let config = Config::builder().batch_size(4).bytes_per_sample(decoder.sample_bytes(9))
    ///     .locator(Arc::new(sampler.clone())).build()?;
    /// let mut pipeline = Pipeline::new(config, decoder, sampler.iter().take(8))?;
    /// let batch = pipeline.pop()?.unwrap();
    /// let rows = batch.locate()?;
    /// assert_eq!(rows.len(), 4);
    /// // Window 1 starts at token 8 of a.bin; its first token is 8.
    /// assert_eq!((rows[1].offset, rows[1].len), (8, 9));
    /// assert_eq!(&batch.bytes()[18..20], &8u16.to_le_bytes());
    /// batch.release(Fence::Sync)?;
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn locate(&self) -> Result<Vec<Location>> {
        let locator = self.device.locator.as_ref().ok_or(SourceError::NoLocator)?;
        let ids = self.sample_ids();
        let (lens, sources) = (self.row_lens(), self.row_sources());
        let mut rows = Vec::with_capacity(ids.len());
        for (row, ((&id, &len), &source)) in ids.iter().zip(lens).zip(sources).enumerate() {
            let at = locator.locate(&Row { id, len, source });
            rows.push(at.ok_or(SourceError::Unlocated {
                row,
                id,
                source_index: source,
            })?);
        }
        Ok(rows)
    }

    /// Rows the source described past
    /// [`Config::rows_per_batch`](crate::Config::rows_per_batch), which the batch does not
    /// keep (0 unless the config is too small for the source).
    pub fn rows_dropped(&self) -> usize {
        // SAFETY: as in `sample_ids`.
        unsafe { self.device.slots.leased_head(self.slot) }.dropped()
    }

    /// The epoch the batch's samples were drawn for, where they carry it (as
    /// [`sample_ids`](Self::sample_ids)); 0 otherwise. A batch never spans two epochs: the
    /// last batch of an epoch may be short (or, with
    /// [`LastBatch::Drop`](crate::LastBatch::Drop), dropped).
    pub fn epoch(&self) -> u64 {
        // SAFETY: as in `sample_ids`.
        unsafe { self.device.slots.leased_head(self.slot) }
            .epoch()
            .unwrap_or(0)
    }

    /// Which step of the run the batch is, where the source numbers steps
    /// ([`Describe::step`](crate::Describe::step)).
    pub fn step(&self) -> Option<u64> {
        // SAFETY: as in `sample_ids`.
        unsafe { self.device.slots.leased_head(self.slot) }.step()
    }

    /// The extents of the batch's fields, as its source gave them
    /// ([`Describe::dims`](crate::Describe::dims)); zeros where not given.
    pub fn dims(&self) -> [u64; MAX_DIMS] {
        // SAFETY: as in `sample_ids`.
        *unsafe { self.device.slots.leased_head(self.slot) }.dims()
    }

    /// The host bytes of field `name` of this batch (its `len` elements, as
    /// [`field`](Self::field) says), kept from pop until release where the config keeps
    /// them ([`ConfigBuilder::host_fields`](crate::ConfigBuilder::host_fields)); `None`
    /// for a field not kept. The same bytes the device slot holds, on the host, whatever
    /// the backend.
    pub fn host_field_bytes(&self, name: &str) -> Option<&[u8]> {
        let at = self.field(name)?;
        let kept = self.device.kept.as_ref()?;
        // SAFETY: this batch holds its device slot's lease while it lives, and the bytes
        // borrow it.
        unsafe { kept.get(self.slot.0, at.offset, at.bytes()) }
    }

    /// The tokens this step's model input holds, `N`, for a batch of packed documents
    /// (of one source or a mixture): the length of its `inputs` field in this batch (what
    /// `batch.dims()[2]` is for documents). `None` for a batch without an `inputs` field
    /// (token windows: their tokens are samples × `T`).
    pub fn step_tokens(&self) -> Option<usize> {
        self.field("inputs").map(|f| f.len)
    }

    /// The batch's field layout, where it has one ([`ConfigBuilder::fields`](crate::ConfigBuilder::fields)).
    pub fn fields(&self) -> Option<&Fields> {
        self.device.fields.as_deref()
    }

    /// The field named `name` of this batch: where it lies in the slot and its length in
    /// this batch; `None` without such a field.
    pub fn field(&self, name: &str) -> Option<FieldAt> {
        let field = self.fields()?.get(name)?;
        Some(FieldAt {
            dtype: field.dtype,
            offset: field.offset,
            len: field.len(&self.dims()),
        })
    }

    /// Makes `stream` wait, stream-side, until the batch is on the device; the host does
    /// not block. A batch whose copy the pipeline already saw complete (what a pipeline
    /// ahead of its consumer hands out) needs no wait, and none is enqueued: work enqueued
    /// on any stream after this call runs after the copy. Binds the batch to `stream`: its
    /// release (explicit or by drop) is then fenced on `stream`, and on every other stream
    /// it was bound to, so that a batch read on several streams is reused only once all of
    /// them are done (a batch keeps four streams; bound to more, it is fenced
    /// conservatively). A stream the backend could not fence on later (cuda: a stream of
    /// another context) is refused here with [`Error::Fence`].
    pub fn wait_on(&mut self, stream: &B::Stream) -> Result<()> {
        let binding = self
            .device
            .backend
            .ready_on(self.slot, self.seq, stream, false)?;
        self.bound.bind(binding);
        Ok(())
    }

    /// `wait_on` the pipeline's declared consumer stream (checked when the pipeline
    /// started), as `pop` does for every batch.
    pub(crate) fn wait_on_declared(&mut self, stream: &B::Stream) -> Result<()> {
        let binding = self
            .device
            .backend
            .ready_on(self.slot, self.seq, stream, true)?;
        self.bound.bind(binding);
        Ok(())
    }

    /// Blocks the calling thread until the batch is on the device. The thread parks (it
    /// does not spin) and is woken when the backend learns that the batch's copy completed;
    /// a batch already there returns at once, without a driver call.
    pub fn synchronize(&self) -> Result<()> {
        self.device.backend.ready_sync(self.slot, self.seq)
    }

    /// Gives the slot back; its reuse waits for `fence`, and for every stream the batch was
    /// bound to with [`wait_on`](Self::wait_on) that `fence` does not name
    /// ([`Fence::Sync`] covers them all: the caller promises the device is done). On
    /// failure (the fence could not be captured) the batch comes back inside the error,
    /// still leased.
    ///
    /// A failed release converts into [`Error`] with `?` (the batch inside is then
    /// dropped, which fences it as a drop does).
    #[allow(clippy::result_large_err)] // the error hands the batch back
    pub fn release(mut self, fence: Fence<'_, B>) -> Result<(), ReleaseError<B>> {
        let span = self.device.trace.as_ref().map(|t| t.now());
        match fence.capture(&self.device.backend, self.slot, &self.bound) {
            Ok(captured) => {
                self.publish(captured);
                self.trace_release(span);
                Ok(())
            }
            Err(error) => Err(ReleaseError { batch: self, error }),
        }
    }

    /// Records a release span from `start`, when tracing.
    fn trace_release(&self, start: Option<u64>) {
        if let (Some(trace), Some(start)) = (&self.device.trace, start) {
            trace.span(Kind::Release, Track::Consumer, self.seq, 0, start);
        }
    }

    /// Stores the captured fence (poisoning the slot after it first, in poison mode) and
    /// hands the slot to the copy thread.
    fn publish(&mut self, mut captured: B::Captured) {
        let device = &*self.device;
        if device.poison {
            captured = device.backend.poison(self.slot, captured);
        }
        if let Some(trace) = &device.trace {
            trace.instant(
                Kind::Released,
                Track::Consumer,
                self.seq,
                self.slot.0 as u32,
            );
        }
        // SAFETY: this batch holds the lease of `seq` in `slot` (LEASED(seq)) and gives it
        // up here once: `released` keeps `Drop` from releasing again.
        unsafe {
            device
                .slots
                .release(self.slot, self.seq, captured, &device.copier)
        };
        self.released = true;
    }
}

impl<B: Backend> Drop for Batch<B> {
    fn drop(&mut self) {
        if self.released {
            return;
        }
        let span = self.device.trace.as_ref().map(|t| t.now());
        let backend = &self.device.backend;
        let captured = if self.bound.is_empty() {
            backend.capture_conservative(self.slot)
        } else {
            backend.capture_bound(self.slot, &self.bound)
        };
        self.publish(captured);
        self.trace_release(span);
    }
}

impl<B: Backend> fmt::Debug for Batch<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Batch")
            .field("seq", &self.seq)
            .field("samples", &self.samples)
            .field("len", &self.len)
            .field("slot", &self.slot.0)
            .field("bound", &self.bound)
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

impl<B: Backend> From<ReleaseError<B>> for Error {
    /// The error; the batch is dropped, which fences it as a drop does.
    fn from(e: ReleaseError<B>) -> Error {
        e.error
    }
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

/// Where one field of a batch lies in its slot, and how long it is in this batch
/// ([`Batch::field`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldAt {
    /// Its element type.
    pub dtype: Dtype,
    /// Bytes from the slot's start to its first element.
    pub offset: usize,
    /// Its elements in this batch.
    pub len: usize,
}

impl FieldAt {
    /// Its bytes in this batch.
    pub fn bytes(&self) -> usize {
        self.len * self.dtype.size()
    }
}
