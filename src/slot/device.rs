//! Device slots: the protocol state of each device slot (its memory lives in the backend)
//! and the release fence that waits in it between a release and the slot's next copy.

use crate::park::ParkSlot;
use crate::sync::UnsafeCell;

use super::host::HostSlots;
use super::index::DeviceIdx;
use super::info::{Head, SlotInfo};
use super::release_wake::ReleaseWake;
use super::stamp::{DeviceState, Stamp};

/// One device slot's protocol state, on cache lines of its own: the consumer releases one
/// slot while the copy thread takes its neighbours.
#[derive(Debug)]
#[repr(align(128))]
struct DeviceSlot<F> {
    stamp: Stamp<DeviceState>,
    /// The release fence of the slot's last lease. Written by the releasing thread while
    /// LEASED, before it publishes RELEASED; taken by the copy thread after it Acquires
    /// RELEASED.
    fence: UnsafeCell<Option<F>>,
}

/// The protocol state of every device slot; `F` is the backend's captured fence.
#[derive(Debug)]
pub(crate) struct DeviceSlots<F> {
    slots: Box<[DeviceSlot<F>]>,
    /// Each slot's batch's description: written by the copy thread while COPYING, read
    /// by the lease holder.
    info: SlotInfo,
    /// When a release wakes the copy thread.
    wake: ReleaseWake,
}

// SAFETY: a fence cell is touched only by the owner the slot's stamp names (the releasing
// thread while LEASED, the copy thread once RELEASED); `F: Send` lets the fence move from
// the one to the other.
unsafe impl<F: Send> Sync for DeviceSlots<F> {}

impl<F> DeviceSlots<F> {
    /// Bytes the protocol state of `device_slots` slots takes (stamps and fence cells),
    /// beside their descriptions (see `SlotInfo::bytes`).
    pub(crate) fn state_bytes(device_slots: usize) -> Option<usize> {
        device_slots.checked_mul(std::mem::size_of::<DeviceSlot<F>>())
    }

    /// Slot `d` starts FREE(d), for batch `d`; batches of up to `rows` rows.
    pub(crate) fn new(device_slots: usize, rows: usize) -> Self {
        DeviceSlots {
            slots: (0..device_slots)
                .map(|d| DeviceSlot {
                    stamp: Stamp::new(d as u64, DeviceState::Free),
                    fence: UnsafeCell::new(None),
                })
                .collect(),
            info: SlotInfo::new(device_slots, rows),
            wake: ReleaseWake::new(device_slots),
        }
    }

    /// Copies batch `k`'s description from its host slot into its device slot.
    ///
    /// # Safety
    /// Only the copy thread calls this, between `start_copy(k)` and `lease(k)` (the device
    /// slot is COPYING(k), the copy thread's), while batch `k`'s host slot is FILLED or
    /// IN_FLIGHT (the feeder wrote its description while FILLING(k), before it published
    /// DECODING(k), and writes it again only after FREE(k + H)).
    pub(crate) unsafe fn copy_info(&self, k: u64, host: &HostSlots) {
        // SAFETY: the copy thread owns the device slot and may read the host slot (this
        // function's contract).
        unsafe {
            self.info
                .copy_from(self.idx(k).0, &host.info, host.idx(k).0)
        }
    }

    /// The head of the description of the batch leased in slot `d`.
    ///
    /// # Safety
    /// The caller holds the lease of slot `d` (the batch's token was popped and the batch
    /// not yet released): the copy thread writes the slot's description only after a
    /// release.
    pub(crate) unsafe fn leased_head(&self, d: DeviceIdx) -> Head {
        // SAFETY: the caller holds the lease (this function's contract).
        unsafe { self.info.head(d.0) }
    }

    /// The rows of the batch leased in slot `d`, as (ids, lens, sources).
    ///
    /// # Safety
    /// As [`leased_head`](Self::leased_head), for as long as the slices live.
    pub(crate) unsafe fn leased_rows(&self, d: DeviceIdx) -> (&[u64], &[u32], &[u16]) {
        // SAFETY: the caller holds the lease (this function's contract).
        unsafe { self.info.rows(d.0) }
    }

    /// How many device slots (D).
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Device slot of batch `k`.
    #[inline]
    pub(crate) fn idx(&self, k: u64) -> DeviceIdx {
        DeviceIdx((k % self.slots.len() as u64) as usize)
    }

    /// Each slot's (sequence, state), for statistics.
    pub(crate) fn states(&self) -> Vec<(u64, DeviceState)> {
        self.slots.iter().map(|s| s.stamp.load()).collect()
    }

    /// The (sequence, state) of slot `d` (Acquire).
    pub(crate) fn state(&self, d: DeviceIdx) -> (u64, DeviceState) {
        self.slots[d.0].stamp.load()
    }

    /// Whether batch `k`'s slot can take it: never used (FREE(k)) or its previous batch
    /// released (RELEASED(k - D)). Acquire: the release's fence comes with it.
    #[inline]
    pub(crate) fn can_take(&self, k: u64) -> bool {
        let d = self.idx(k);
        match self.slots[d.0].stamp.load() {
            (seq, DeviceState::Free) => seq == k,
            (seq, DeviceState::Released) => seq + self.slots.len() as u64 == k,
            _ => false,
        }
    }

    /// Whether every release wakes the copy thread (fewer than four device slots).
    #[inline]
    pub(crate) fn releases_wake(&self) -> bool {
        self.wake.eager()
    }

    /// Copy thread, before it pushes a run's tokens: a pop's request is served.
    #[inline]
    pub(crate) fn served(&self) {
        self.wake.served();
    }

    /// Consumer, when a pop finds no batch: the copy thread refills the released slots now.
    #[inline]
    pub(crate) fn ask(&self, copier: &ParkSlot) {
        self.wake.ask(copier);
    }

    /// Takes batch `k`'s slot for its copy: FREE(k) or RELEASED(k - D) → COPYING(k);
    /// returns the previous lease's fence, which the copy must wait for (invariant 2).
    ///
    /// # Safety
    /// Only the copy thread calls this, after [`can_take`](Self::can_take)`(k)` returned
    /// true.
    pub(crate) unsafe fn start_copy(&self, k: u64) -> Option<F> {
        let slot = &self.slots[self.idx(k).0];
        // SAFETY: RELEASED(k - D) or FREE(k) was Acquired by the caller: the releasing
        // thread is done with the cell, and nobody else touches it until LEASED(k).
        let fence = slot.fence.with_mut(|f| unsafe { (*f).take() });
        slot.stamp.publish(k, DeviceState::Copying);
        // A slot is FREE only for its first batch (`can_take`): every later take is of a
        // RELEASED slot.
        if k >= self.slots.len() as u64 {
            self.wake.taken();
        }
        fence
    }

    /// The copy of batch `k` is enqueued: COPYING(k) → LEASED(k). The token push that
    /// follows hands the lease to the consumer.
    ///
    /// # Safety
    /// Only the copy thread calls this, after [`start_copy`](Self::start_copy)`(k)`.
    pub(crate) unsafe fn lease(&self, k: u64) {
        self.slots[self.idx(k).0]
            .stamp
            .publish(k, DeviceState::Leased);
    }

    /// Gives back the lease of batch `seq` in slot `d`: stores its captured fence, publishes
    /// RELEASED(seq) and wakes the copy thread. The fence must be recorded before this call
    /// (invariant 2: the Release store publishes a recorded fence).
    ///
    /// # Safety
    /// The caller holds the lease of batch `seq` in slot `d` (LEASED(seq)) and gives it up
    /// here, once.
    pub(crate) unsafe fn release(&self, d: DeviceIdx, seq: u64, fence: F, copier: &ParkSlot) {
        let slot = &self.slots[d.0];
        // SAFETY: LEASED(seq) is the caller's; the copy thread reads the cell only after it
        // Acquires the RELEASED stamp published below.
        slot.fence.with_mut(|f| unsafe { *f = Some(fence) });
        // Release: the fence (recorded before this call) goes with it.
        slot.stamp.publish(seq, DeviceState::Released);
        self.wake.released(copier);
    }

    /// The fences still waiting in RELEASED slots, for the teardown: each must be waited
    /// on before the device memory goes. `&mut self`: every thread is done with the slots.
    pub(crate) fn take_fences(&mut self) -> impl Iterator<Item = (DeviceIdx, F)> + '_ {
        self.slots.iter_mut().enumerate().filter_map(|(d, slot)| {
            // SAFETY: `&mut self` proves no other access to the cells exists.
            let fence = slot.fence.with_mut(|f| unsafe { (*f).take() });
            fence.map(|f| (DeviceIdx(d), f))
        })
    }
}
