//! What a built [`Config`] says: its accessors.

use std::time::Duration;

use super::{Config, LastBatch, NodeShare};
use crate::backend::contract::Backend;
use crate::fields::Fields;
use crate::locate::Locate;

impl<B: Backend> Config<B> {
    /// Samples in a full batch.
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }
    /// Bytes each sample takes in a slot (what [`ConfigBuilder::bytes_per_sample`](crate::ConfigBuilder::bytes_per_sample) set).
    pub fn bytes_per_sample(&self) -> usize {
        self.sample_bytes
    }
    /// Bytes of a full batch.
    pub fn batch_bytes(&self) -> usize {
        self.batch_bytes
    }
    /// Bytes from one device slot's start to the next (batch bytes rounded up to the 4 KiB
    /// page, as the host ring's stride without huge pages: a run of consecutive batches
    /// then copies in one piece; and kernels can use wide loads on any batch size).
    pub fn device_stride(&self) -> usize {
        self.device_stride
    }
    /// Host slots in the pinned ring.
    pub fn host_slots(&self) -> usize {
        self.settings.host_slots
    }
    /// Device slots (batches the consumer can hold at once).
    pub fn device_slots(&self) -> usize {
        self.settings.device_slots
    }
    /// Bytes from one slot's start to the next in the host ring (batch bytes rounded up
    /// to the page; the device slots' stride may differ, see the memory line of this
    /// config's `Display`).
    pub fn host_stride(&self) -> usize {
        self.host_stride
    }
    /// Threads in the decode pool.
    pub fn decode_threads(&self) -> usize {
        self.decode_threads
    }
    /// The most bytes the host ring and its bookkeeping may take.
    pub fn host_budget(&self) -> usize {
        self.settings.host_budget
    }
    /// The share of its node this pipeline takes ([`ConfigBuilder::node_share`](crate::ConfigBuilder::node_share)).
    pub fn node_share(&self) -> NodeShare {
        NodeShare {
            local_ranks: self.settings.local_ranks,
            decode_threads: self.decode_threads,
            host_budget: self.settings.host_budget,
        }
    }
    /// The core the copy thread is pinned to, if any.
    pub fn copy_core(&self) -> Option<usize> {
        self.settings.copy_core
    }
    /// Cores the decode threads are pinned to (worker `i` on `cores[i % len]`), if any.
    pub fn decode_cores(&self) -> &[usize] {
        &self.settings.decode_cores
    }
    /// How long a waiting thread spins before it parks (see [`ConfigBuilder::spin`](crate::ConfigBuilder::spin)).
    pub fn spin(&self) -> Duration {
        self.settings.spin
    }
    /// What happens to a short last batch.
    pub fn last_batch(&self) -> LastBatch {
        self.settings.last_batch
    }
    /// Whether the host ring asks for huge pages.
    pub fn huge_pages(&self) -> bool {
        self.settings.huge_pages
    }
    /// How long `pop` waits before it reports which stage is behind.
    pub fn pop_timeout(&self) -> Option<Duration> {
        self.settings.pop_timeout
    }
    /// How long `pop` waits while every device slot is leased before it says so.
    pub fn lease_timeout(&self) -> Duration {
        self.settings.lease_timeout
    }
    /// How long dropping the pipeline waits for threads running user code.
    pub fn shutdown_timeout(&self) -> Duration {
        self.settings.shutdown_timeout
    }
    /// Spans the trace ring holds (0: tracing off; see [`ConfigBuilder::trace`](crate::ConfigBuilder::trace)).
    pub fn trace_spans(&self) -> usize {
        self.settings.trace
    }
    /// Rows a batch's description holds at most (see
    /// [`ConfigBuilder::rows_per_batch`](crate::ConfigBuilder::rows_per_batch)).
    pub fn rows_per_batch(&self) -> usize {
        self.rows_per_batch
    }
    /// The batch's fields, where it has a layout of named arrays (see
    /// [`ConfigBuilder::fields`](crate::ConfigBuilder::fields)).
    pub fn fields(&self) -> Option<&Fields> {
        self.fields.as_deref()
    }
    /// What places the batches' rows in their files, if set (see
    /// [`ConfigBuilder::locator`](crate::ConfigBuilder::locator)).
    pub fn locator(&self) -> Option<&std::sync::Arc<dyn Locate>> {
        self.settings.locator.as_ref()
    }
    /// Bytes of host memory the pipeline keeps beside its ring for the samples'
    /// bookkeeping that does not depend on the sample type: the descriptions of every host
    /// and device slot's batch (14 bytes a row: its id, length and source). The sample cells (one per sample per host
    /// slot, each the size of the decoder's sample) come on top when the pipeline starts;
    /// both count in the host budget and against the memory available.
    pub fn bookkeeping_bytes(&self) -> usize {
        self.id_bytes
    }
    /// Bytes of host memory the pipeline pins: its host ring, `host_slots` slots of
    /// [`host_stride`](Self::host_stride) bytes (mapped and pre-faulted before the first
    /// batch).
    pub fn pinned_bytes(&self) -> usize {
        self.host_stride * self.settings.host_slots
    }
    /// Bytes of device memory the pipeline allocates: `device_slots` slots of
    /// [`device_stride`](Self::device_stride) bytes.
    pub fn device_bytes(&self) -> usize {
        self.device_stride * self.settings.device_slots
    }
    /// Whether released device slots are filled with a poison pattern (see
    /// [`ConfigBuilder::poison_released`](crate::ConfigBuilder::poison_released); also on when `PINRING_POISON_RELEASED=1` was set
    /// when the config was built).
    pub fn poison_released(&self) -> bool {
        self.settings.poison_released
    }
    /// Whether the pipeline's threads run as `SCHED_BATCH` (see
    /// [`ConfigBuilder::batch_scheduling`](crate::ConfigBuilder::batch_scheduling)).
    pub fn batch_scheduling(&self) -> bool {
        self.settings.batch_scheduling
    }
    /// The declared consumer stream, if any (see [`ConfigBuilder::consumer_stream`](crate::ConfigBuilder::consumer_stream)).
    pub fn consumer_stream(&self) -> Option<&B::Stream> {
        self.consumer_stream.as_ref()
    }
    /// The backend's options.
    pub fn backend_options(&self) -> &B::Options {
        &self.backend
    }
}
