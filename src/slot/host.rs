//! Host slots: the protocol state of each slot of the pinned ring (its bytes live in the
//! [`HostRing`]), and the samples gathered for it.
//!
//! Each transition is a method that touches the slot's cells and publishes its stamp in
//! one go. Who may call which method is fixed by the protocol: one feeder thread gathers
//! (the [`Filling`] guard), any decode worker decodes the items it claimed (the [`Item`]
//! guard), one copy thread copies and frees. The methods that hand out that ownership
//! are `unsafe` and say so.

use crate::describe::Describe;
use crate::host_ring::HostRing;
use crate::park::ParkSlot;
use crate::sync::{AtomicBool, AtomicUsize, Ordering, UnsafeCell};

use super::index::HostIdx;
use super::info::SlotInfo;
use super::stamp::{HostState, Stamp};

/// One host slot's protocol state.
#[derive(Debug)]
struct HostSlot {
    stamp: Stamp<HostState>,
    /// Samples in the slot's current batch. Written by the feeder while FILLING; read by
    /// the decode workers after they Acquire DECODING and by the copy thread after it
    /// Acquires FILLED; unchanged until the slot is FREE again.
    count: UnsafeCell<usize>,
    /// Work items of the current batch not yet finished. Stored (Relaxed) by the feeder
    /// while FILLING, published with DECODING; decremented (AcqRel) by each worker as it
    /// finishes an item. The RMWs form one release sequence, so the worker that takes it
    /// to zero has acquired every other worker's writes into the slot.
    pending: AtomicUsize,
    /// Whether an item of the current batch failed. Cleared by the feeder while FILLING;
    /// set (Relaxed) by a failing worker before its decrement of `pending`, read by the
    /// last worker after its own (ordered by that release sequence).
    failed: AtomicBool,
}

/// The protocol state of every host slot.
#[derive(Debug)]
pub(crate) struct HostSlots {
    slots: Box<[HostSlot]>,
    /// Samples in a full batch.
    per_batch: usize,
    /// Samples per decode work item (the last item of a batch may have fewer).
    per_item: usize,
    /// Each slot's batch's description: written by the feeder while FILLING, read by the
    /// copy thread once FILLED (`DeviceSlots::copy_info`).
    pub(super) info: SlotInfo,
}

/// The samples gathered for each host slot, one cell per sample: written by the feeder
/// while the slot is FILLING, each taken by the one decode worker whose item holds it.
pub(crate) struct SampleCells<S> {
    cells: Box<[UnsafeCell<Option<S>>]>,
    per_batch: usize,
}

// SAFETY: cell `h * per_batch + j` is touched only by host slot `h`'s owner under the slot
// protocol (the feeder while FILLING, then the worker whose item holds sample `j`);
// `S: Send` lets samples move from the feeder to the workers.
unsafe impl<S: Send> Sync for SampleCells<S> {}

impl<S> std::fmt::Debug for SampleCells<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SampleCells")
            .field("per_batch", &self.per_batch)
            .finish()
    }
}

impl<S> SampleCells<S> {
    /// Bytes the cells of `host_slots` slots of `per_batch` samples take; `None` past
    /// `usize::MAX`.
    pub(crate) fn bytes(host_slots: usize, per_batch: usize) -> Option<usize> {
        host_slots
            .checked_mul(per_batch)?
            .checked_mul(std::mem::size_of::<UnsafeCell<Option<S>>>())
    }

    pub(crate) fn new(host_slots: usize, per_batch: usize) -> Self {
        SampleCells {
            cells: (0..host_slots * per_batch)
                .map(|_| UnsafeCell::new(None))
                .collect(),
            per_batch,
        }
    }

    fn cell(&self, h: HostIdx, j: usize) -> &UnsafeCell<Option<S>> {
        &self.cells[h.0 * self.per_batch + j]
    }
}

/// Where host slot `h`'s batch `k` waits, as the decode workers and copy thread see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// Not there yet (the slot holds an earlier batch, or batch `k` is still on its way).
    Pending,
    /// Batch `k` is gathered: its samples can be decoded.
    Decoding,
    /// Batch `k` is decoded: it can be copied.
    Filled,
    /// There is no batch `k`: the source ended.
    End,
    /// Building batch `k` failed.
    Failed,
    /// The slot has moved on to a later batch: batch `k` was copied and its slot freed.
    Past,
}

// SAFETY: the cells are touched only by the owner the slot's stamp names (the slot
// protocol); everything else is atomics.
unsafe impl Sync for HostSlots {}
// SAFETY: as above; the slots own plain data.
unsafe impl Send for HostSlots {}

impl HostSlots {
    /// Bytes the protocol state of `host_slots` slots takes, beside their descriptions
    /// (see `SlotInfo::bytes`).
    pub(crate) fn state_bytes(host_slots: usize) -> Option<usize> {
        host_slots.checked_mul(std::mem::size_of::<HostSlot>())
    }

    /// Slot `h` starts FREE(h), for batch `h`.
    pub(crate) fn new(host_slots: usize, per_batch: usize, per_item: usize, rows: usize) -> Self {
        HostSlots {
            slots: (0..host_slots)
                .map(|h| HostSlot {
                    stamp: Stamp::new(h as u64, HostState::Free),
                    count: UnsafeCell::new(0),
                    pending: AtomicUsize::new(0),
                    failed: AtomicBool::new(false),
                })
                .collect(),
            per_batch,
            per_item,
            info: SlotInfo::new(host_slots, rows),
        }
    }

    /// Host slot of batch `k`.
    #[inline]
    pub(crate) fn idx(&self, k: u64) -> HostIdx {
        HostIdx((k % self.slots.len() as u64) as usize)
    }

    fn slot(&self, k: u64) -> &HostSlot {
        &self.slots[self.idx(k).0]
    }

    /// How many host slots (H).
    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Work items a full batch splits into.
    pub(crate) fn items_per_batch(&self) -> usize {
        self.per_batch.div_ceil(self.per_item)
    }

    /// Each slot's (sequence, state), for statistics.
    pub(crate) fn states(&self) -> Vec<(u64, HostState)> {
        self.slots.iter().map(|s| s.stamp.load()).collect()
    }

    /// The (sequence, state) of batch `k`'s slot (Acquire).
    pub(crate) fn state(&self, k: u64) -> (u64, HostState) {
        self.slot(k).stamp.load()
    }

    // -- feeder --------------------------------------------------------------------------

    /// Whether batch `k`'s slot is FREE(k): the feeder may gather batch `k` (Acquire: the
    /// copy out of it, and everything before, is done).
    #[inline]
    pub(crate) fn is_free(&self, k: u64) -> bool {
        self.slot(k).stamp.is(k, HostState::Free)
    }

    /// Takes batch `k`'s slot for gathering: FREE(k) → FILLING(k).
    ///
    /// # Safety
    /// Only the feeder calls this, after [`is_free`](Self::is_free)`(k)` returned true, and
    /// for one `k` at a time: the slot is then the feeder's alone.
    pub(crate) unsafe fn begin_fill<'a, S>(
        &'a self,
        k: u64,
        samples: &'a SampleCells<S>,
    ) -> Filling<'a, S> {
        let slot = self.slot(k);
        slot.stamp.publish(k, HostState::Filling);
        Filling {
            slots: self,
            samples,
            k,
        }
    }

    /// Publishes END(k) on batch `k`'s slot: the source ended before batch `k`.
    ///
    /// # Safety
    /// Only the feeder calls this, when the slot is FREE(k) (checked with
    /// [`is_free`](Self::is_free)) and it gathers nothing more.
    pub(crate) unsafe fn end_at(&self, k: u64, wake: &[&ParkSlot]) {
        self.slot(k).stamp.publish(k, HostState::End);
        wake.iter().for_each(|p| p.wake());
    }

    // -- decode workers ------------------------------------------------------------------

    /// Where batch `k` stands for a decode worker (Acquire).
    #[inline]
    pub(crate) fn progress(&self, k: u64) -> Progress {
        match self.slot(k).stamp.load() {
            (seq, state) if seq == k => match state {
                HostState::Decoding => Progress::Decoding,
                HostState::Filled | HostState::InFlight => Progress::Filled,
                HostState::End => Progress::End,
                HostState::Failed => Progress::Failed,
                HostState::Free | HostState::Filling => Progress::Pending,
            },
            (seq, _) if seq > k => Progress::Past,
            _ => Progress::Pending,
        }
    }

    /// Takes item `c` of batch `k` for decoding: `None` when the batch has fewer items
    /// (a short last batch).
    ///
    /// # Safety
    /// The caller saw [`progress`](Self::progress)`(k)` return `Decoding`, and item `(k,
    /// c)` was claimed by it alone (the decode workers' claim counter hands out each
    /// item once).
    pub(crate) unsafe fn take_item<'a, S>(
        &'a self,
        k: u64,
        c: usize,
        samples: &'a SampleCells<S>,
    ) -> Option<Item<'a, S>> {
        let slot = self.slot(k);
        // SAFETY: the slot is DECODING(k) (the caller's Acquire load): the feeder wrote
        // the count before publishing it and nobody writes it until FREE(k + H).
        let n = slot.count.with(|c| unsafe { *c });
        let first = c * self.per_item;
        (first < n).then(|| Item {
            slots: self,
            samples,
            k,
            first,
            end: (first + self.per_item).min(n),
        })
    }

    // -- copy thread ---------------------------------------------------------------------

    /// Takes batch `k`'s slot for its copy: FILLED(k) → IN_FLIGHT(k); returns its sample
    /// count.
    ///
    /// # Safety
    /// Only the copy thread calls this, after [`progress`](Self::progress)`(k)` returned
    /// `Filled`.
    pub(crate) unsafe fn start_copy(&self, k: u64) -> usize {
        let slot = self.slot(k);
        // SAFETY: FILLED(k) was Acquired by the caller: the count was written before it
        // and is not written again until FREE(k + H).
        let n = slot.count.with(|c| unsafe { *c });
        slot.stamp.publish(k, HostState::InFlight);
        n
    }

    /// The copy out of batch `k`'s slot has completed: IN_FLIGHT(k) → FREE(k + H), and the
    /// feeder is woken.
    ///
    /// # Safety
    /// Only the copy thread calls this, for a slot it took with
    /// [`start_copy`](Self::start_copy)`(k)`, once the backend reports that slot's copy
    /// complete (invariant 1).
    pub(crate) unsafe fn free(&self, k: u64, feeder: &ParkSlot) {
        let next = k + self.slots.len() as u64;
        self.slot(k).stamp.publish(next, HostState::Free);
        feeder.wake();
    }
}

/// The feeder's hold on a slot while it gathers batch `k` (FILLING(k)).
#[derive(Debug)]
pub(crate) struct Filling<'a, S> {
    slots: &'a HostSlots,
    samples: &'a SampleCells<S>,
    k: u64,
}

impl<S> Filling<'_, S> {
    /// Stores sample `j` of the batch.
    pub(crate) fn put(&mut self, j: usize, sample: S) {
        let h = self.slots.idx(self.k);
        self.samples.cell(h, j).with_mut(|p| {
            // SAFETY: the slot is FILLING(k), the feeder's alone (`begin_fill`).
            unsafe { *p = Some(sample) }
        });
    }

    /// Empties the batch's description (before gathering starts, or starts over).
    pub(crate) fn clear_description(&mut self) {
        // SAFETY: the slot is FILLING(k), the feeder's alone.
        unsafe { self.slots.info.clear(self.slots.idx(self.k).0) }
    }

    /// Where the next sample writes its part of the batch's description.
    pub(crate) fn describe(&mut self) -> Describe<'_> {
        // SAFETY: the slot is FILLING(k), the feeder's alone, for as long as `self` (and so
        // the value, which borrows it) lives.
        unsafe { Describe::new(&self.slots.info, self.slots.idx(self.k).0) }
    }

    /// Records the batch's epoch (`None`: its samples carry no ids).
    pub(crate) fn set_epoch(&mut self, epoch: Option<u64>) {
        // SAFETY: the slot is FILLING(k), the feeder's alone.
        unsafe { (self.slots.info).set(self.slots.idx(self.k).0, Some(epoch), None, None) }
    }

    /// Hands the batch of `n` samples to the decode workers: writes the count, arms the
    /// item countdown, publishes DECODING(k) and wakes the workers.
    pub(crate) fn hand_to_decoders(self, n: usize, decoders: &ParkSlot) {
        let slot = self.slots.slot(self.k);
        // SAFETY: the slot is FILLING(k), the feeder's alone.
        slot.count.with_mut(|c| unsafe { *c = n });
        slot.pending
            .store(n.div_ceil(self.slots.per_item), Ordering::Relaxed);
        slot.failed.store(false, Ordering::Relaxed);
        // Release: the samples, the count and the countdown go with it.
        slot.stamp.publish(self.k, HostState::Decoding);
        decoders.wake();
    }

    /// The source ended before this batch had a sample: publishes END(k).
    pub(crate) fn end(self, wake: &[&ParkSlot]) {
        // SAFETY: FILLING(k) is the feeder's; END(k) from it is the feeder's transition.
        unsafe { self.slots.end_at(self.k, wake) }
    }

    /// Gathering failed (the source panicked): publishes FAILED(k). Record the error first.
    pub(crate) fn fail(self, wake: &[&ParkSlot]) {
        self.slots
            .slot(self.k)
            .stamp
            .publish(self.k, HostState::Failed);
        wake.iter().for_each(|p| p.wake());
    }
}

/// A decode worker's hold on one item of batch `k`: samples `first..end`.
#[derive(Debug)]
pub(crate) struct Item<'a, S> {
    slots: &'a HostSlots,
    samples: &'a SampleCells<S>,
    k: u64,
    first: usize,
    end: usize,
}

/// How the batch stands after a worker finished an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finished {
    /// Other items of the batch are still running.
    Pending,
    /// This was the last item: the batch is FILLED.
    Filled,
    /// This was the last item and an item failed: the batch is FAILED.
    Failed,
}

impl<S> Item<'_, S> {
    /// The batch's sequence number.
    pub(crate) fn seq(&self) -> u64 {
        self.k
    }

    /// The indices in the batch of this item's samples.
    pub(crate) fn range(&self) -> std::ops::Range<usize> {
        self.first..self.end
    }

    /// Takes sample `j` (in [`range`](Self::range)) and the bytes it is decoded into.
    #[allow(clippy::mut_from_ref)] // the slot protocol gives this item the bytes alone
    pub(crate) fn sample<'r>(
        &mut self,
        j: usize,
        ring: &'r HostRing,
        sample_bytes: usize,
    ) -> (Option<S>, &'r mut [u8]) {
        assert!(self.range().contains(&j), "sample {j} is not in this item");
        let h = self.slots.idx(self.k);
        let sample = self.samples.cell(h, j).with_mut(|p| {
            // SAFETY: sample j belongs to this item, claimed by this worker alone, and the
            // slot is DECODING(k).
            unsafe { (*p).take() }
        });
        // SAFETY: the slot is DECODING(k): no copy out of it runs (its last one completed
        // before FREE(k)) and only this item's worker writes sample j's range, which is
        // disjoint from every other sample's.
        let out = unsafe { ring.slot_mut(h.0, j * sample_bytes, sample_bytes) };
        (sample, out)
    }

    /// Finishes the item: counts it down, and if it was the batch's last, publishes
    /// FILLED(k) or (if an item failed) FAILED(k) and wakes `copier`. Record an error
    /// before finishing a failed item.
    pub(crate) fn finish(self, ok: bool, copier: &ParkSlot) -> Finished {
        let slot = self.slots.slot(self.k);
        if !ok {
            slot.failed.store(true, Ordering::Relaxed);
        }
        // AcqRel: releases this worker's writes; the last decrement acquires them all.
        if slot.pending.fetch_sub(1, Ordering::AcqRel) != 1 {
            return Finished::Pending;
        }
        let (state, finished) = if slot.failed.load(Ordering::Relaxed) {
            (HostState::Failed, Finished::Failed)
        } else {
            (HostState::Filled, Finished::Filled)
        };
        // Release: every item's bytes go with it (acquired by the countdown above).
        slot.stamp.publish(self.k, state);
        copier.wake();
        finished
    }
}
