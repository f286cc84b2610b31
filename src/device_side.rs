//! The device side of a pipeline: the backend and the device slots' protocol state. The
//! copy thread, the consumer and every leased batch share it, so it lives until the last
//! of them is gone.

use crate::host_kept::HostKept;
use std::fmt;

use crate::backend::contract::{Backend, CopyRole};
use crate::fields::Fields;
use crate::locate::Locate;
use crate::park::ParkSlot;
use crate::slot::device::DeviceSlots;
use crate::sync::native;
use crate::trace::Trace;

/// The backend and its device slots. Aligned to 128 bytes, so that in the `Arc` every batch
/// holds the reference counts (changed at each pop and each batch's drop) have a cache line
/// to themselves, not one with the fields the copy thread reads.
#[repr(align(128))]
pub(crate) struct DeviceSide<B: Backend> {
    pub(crate) backend: B,
    pub(crate) slots: DeviceSlots<B::Captured>,
    /// Woken by a release (std's `Arc`: shared with the backend's copy waker).
    pub(crate) copier: native::Arc<ParkSlot>,
    /// Bytes of one sample in a slot.
    pub(crate) sample_bytes: usize,
    /// The timeline, when tracing is on (releases record spans in it).
    pub(crate) trace: Option<native::Arc<Trace>>,
    /// Poison mode: each release fills its slot with the poison pattern, on the device,
    /// after its fence (`ConfigBuilder::poison_released`).
    pub(crate) poison: bool,
    /// The batches' field layout, if they have one (`ConfigBuilder::fields`).
    pub(crate) fields: Option<native::Arc<Fields>>,
    /// What places the batches' rows in their files (`ConfigBuilder::locator`).
    pub(crate) locator: Option<native::Arc<dyn Locate>>,
    /// The host bytes of the fields kept until release (`ConfigBuilder::host_fields`).
    pub(crate) kept: Option<HostKept>,
}

impl<B: Backend> Drop for DeviceSide<B> {
    fn drop(&mut self) {
        // Fences released but never waited on (their slots were not reused): hand each to
        // the copy stream, so that the backend's teardown (which drains the copy stream
        // before freeing anything) waits for the consumer's last reads too. Errors mean a
        // dead device, where nothing runs any more.
        let Self { backend, slots, .. } = self;
        // The teardown inherits the copy thread's role: that thread has ended.
        let role = CopyRole(());
        for (d, fence) in slots.take_fences() {
            let _ = backend.wait_fence(&role, d, fence);
        }
    }
}

impl<B: Backend> fmt::Debug for DeviceSide<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceSide")
            .field("device_slots", &self.slots.len())
            .field("sample_bytes", &self.sample_bytes)
            .finish()
    }
}
