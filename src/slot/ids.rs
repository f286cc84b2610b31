//! The stable ids and the epoch of the samples of each slot's batch, where the samples
//! carry them ([`Decode::identify`](crate::Decode::identify): the windows of a
//! [`Sampler`](crate::source::Sampler) do).
//!
//! Host slots hold them from gathering to the copy; device slots from the copy to the
//! release, so that a [`Batch`](crate::Batch) can lend them as a slice. Each cell is
//! touched under the slot protocol, as the slot's other cells are: on a host slot the
//! feeder writes while FILLING and the copy thread reads after it Acquires FILLED; on a
//! device slot the copy thread writes while COPYING and the lease holder reads after it
//! Acquires the batch's token (published after LEASED). They are std's cells in every
//! build (the models check the stamps that order them, not these plain copies), so that
//! a device slot's ids can be lent as one `&[u64]`.

use crate::sync::native::UnsafeCell;

/// The epoch cell's value when the batch's samples carry no ids.
const NONE: u64 = u64::MAX;

/// Ids and epochs of `slots` slots of up to `per_batch` samples.
pub(crate) struct SlotIds {
    ids: Box<[UnsafeCell<u64>]>,
    epochs: Box<[UnsafeCell<u64>]>,
    per_batch: usize,
}

impl std::fmt::Debug for SlotIds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotIds")
            .field("slots", &self.epochs.len())
            .field("per_batch", &self.per_batch)
            .finish()
    }
}

// SAFETY: every cell is touched only by the owner its slot's stamp names (see the module
// docs); the cells hold plain integers.
unsafe impl Sync for SlotIds {}

impl SlotIds {
    /// Bytes the ids and epochs of `slots` slots of `per_batch` samples take (one u64 a
    /// sample, one a slot); `None` past `usize::MAX`.
    pub(crate) fn bytes(slots: usize, per_batch: usize) -> Option<usize> {
        per_batch
            .checked_add(1)?
            .checked_mul(slots)?
            .checked_mul(std::mem::size_of::<u64>())
    }

    pub(crate) fn new(slots: usize, per_batch: usize) -> Self {
        SlotIds {
            ids: (0..slots * per_batch).map(|_| UnsafeCell::new(0)).collect(),
            epochs: (0..slots).map(|_| UnsafeCell::new(NONE)).collect(),
            per_batch,
        }
    }

    /// Slot `slot`'s cells.
    fn cells(&self, slot: usize) -> &[UnsafeCell<u64>] {
        &self.ids[slot * self.per_batch..(slot + 1) * self.per_batch]
    }

    /// Records sample `j`'s id.
    ///
    /// # Safety
    /// The caller owns slot `slot` (its stamp names it), so no one else touches its cells.
    pub(crate) unsafe fn set_id(&self, slot: usize, j: usize, id: u64) {
        // SAFETY: the caller owns the slot (this function's contract).
        unsafe { *self.cells(slot)[j].get() = id };
    }

    /// Records the batch's epoch (`None`: its samples carry no ids).
    ///
    /// # Safety
    /// As [`set_id`](Self::set_id).
    pub(crate) unsafe fn set_epoch(&self, slot: usize, epoch: Option<u64>) {
        // SAFETY: the caller owns the slot (this function's contract).
        unsafe { *self.epochs[slot].get() = epoch.unwrap_or(NONE) };
    }

    /// The batch's epoch, `None` if its samples carry no ids.
    ///
    /// # Safety
    /// The caller owns slot `slot`, or holds it in a state in which its owner does not
    /// write these cells.
    pub(crate) unsafe fn epoch(&self, slot: usize) -> Option<u64> {
        // SAFETY: no one writes the cell now (this function's contract).
        let epoch = unsafe { *self.epochs[slot].get() };
        (epoch != NONE).then_some(epoch)
    }

    /// The first `n` ids of slot `slot` (none if its samples carry no ids), borrowed.
    ///
    /// # Safety
    /// As [`epoch`](Self::epoch), for as long as the slice lives.
    pub(crate) unsafe fn ids(&self, slot: usize, n: usize) -> &[u64] {
        // SAFETY: no one writes the cell now (this function's contract).
        if unsafe { self.epoch(slot) }.is_none() {
            return &[];
        }
        let cells = &self.cells(slot)[..n.min(self.per_batch)];
        // SAFETY: `UnsafeCell<u64>` has `u64`'s layout, so the cells are `n` contiguous
        // u64s; no one writes them while the slice lives (this function's contract).
        unsafe { std::slice::from_raw_parts(cells.as_ptr().cast::<u64>(), cells.len()) }
    }

    /// Copies `n` ids and the epoch of `from`'s slot `src` into slot `dst`.
    ///
    /// # Safety
    /// The caller owns slot `dst` of `self` and may read slot `src` of `from` (as
    /// [`epoch`](Self::epoch)).
    pub(crate) unsafe fn copy_from(&self, dst: usize, from: &SlotIds, src: usize, n: usize) {
        // SAFETY: the caller may read `src` (this function's contract).
        let epoch = unsafe { from.epoch(src) };
        // SAFETY: as above.
        let ids = unsafe { from.ids(src, n) };
        // SAFETY: the caller owns `dst` (this function's contract).
        unsafe { self.set_epoch(dst, epoch) };
        for (j, &id) in ids.iter().enumerate() {
            // SAFETY: as above.
            unsafe { self.set_id(dst, j, id) };
        }
    }
}
