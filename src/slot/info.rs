//! What each slot's batch says about itself: its rows (a sample each, or a packed
//! document each: the id, the source it came from, its length), its epoch and step, and
//! the extents of its fields ([`Decode::describe`](crate::Decode::describe) writes them).
//!
//! Host slots hold a batch's description from gathering to the copy; device slots from
//! the copy to the release, so that a [`Batch`](crate::Batch) can lend its columns as
//! slices. Each cell is touched under the slot protocol, as the slot's other cells are: on
//! a host slot the feeder writes while FILLING and the copy thread reads after it
//! Acquires FILLED; on a device slot the copy thread writes while COPYING and the lease
//! holder reads after it Acquires the batch's token (published after LEASED). They are
//! std's cells in every build (the models check the stamps that order them, not these
//! plain copies), so that a device slot's columns can be lent as plain slices.

use crate::row::{Row, MAX_DIMS};
use crate::sync::native::UnsafeCell;

/// A value of `epoch` or `step` that says "not given".
const NONE: u64 = u64::MAX;

/// What a batch says of itself beside its rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Head {
    /// The epoch its samples were drawn for (`NONE`: its samples carry no ids).
    epoch: u64,
    /// The step it is, where the source numbers steps (`NONE`: not given).
    step: u64,
    /// Rows written.
    rows: usize,
    /// Rows the source wanted to write past the capacity.
    dropped: usize,
    /// The extents of its fields (0 where not given).
    dims: [u64; MAX_DIMS],
}

impl Head {
    const EMPTY: Head = Head {
        epoch: NONE,
        step: NONE,
        rows: 0,
        dropped: 0,
        dims: [0; MAX_DIMS],
    };

    /// The epoch, `None` if the batch's samples carry no ids.
    pub(crate) fn epoch(&self) -> Option<u64> {
        (self.epoch != NONE).then_some(self.epoch)
    }

    /// The step, where the source gave one.
    pub(crate) fn step(&self) -> Option<u64> {
        (self.step != NONE).then_some(self.step)
    }

    /// The field extents.
    pub(crate) fn dims(&self) -> &[u64; MAX_DIMS] {
        &self.dims
    }

    /// Rows the source described past the capacity (not kept).
    pub(crate) fn dropped(&self) -> usize {
        self.dropped
    }
}

/// The descriptions of `slots` slots of up to `capacity` rows each, in columns.
pub(crate) struct SlotInfo {
    heads: Box<[UnsafeCell<Head>]>,
    ids: Box<[UnsafeCell<u64>]>,
    lens: Box<[UnsafeCell<u32>]>,
    sources: Box<[UnsafeCell<u16>]>,
    capacity: usize,
}

impl std::fmt::Debug for SlotInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SlotInfo")
            .field("slots", &self.heads.len())
            .field("capacity", &self.capacity)
            .finish()
    }
}

// SAFETY: every cell is touched only by the owner its slot's stamp names (see the module
// docs); the cells hold plain integers.
unsafe impl Sync for SlotInfo {}

/// Lends `cells` (the cells of one slot no one writes now) as a slice of their values.
///
/// # Safety
/// No one writes the cells while the slice lives.
unsafe fn plain<T>(cells: &[UnsafeCell<T>]) -> &[T] {
    // SAFETY: `UnsafeCell<T>` has `T`'s layout, so the cells are contiguous `T`s; no one
    // writes them while the slice lives (this function's contract).
    unsafe { std::slice::from_raw_parts(cells.as_ptr().cast::<T>(), cells.len()) }
}

/// `n` cells of `T`'s default.
fn cells<T: Default>(n: usize) -> Box<[UnsafeCell<T>]> {
    (0..n).map(|_| UnsafeCell::new(T::default())).collect()
}

impl SlotInfo {
    /// Bytes the descriptions of `slots` slots of `capacity` rows take; `None` past
    /// `usize::MAX`.
    pub(crate) fn bytes(slots: usize, capacity: usize) -> Option<usize> {
        let row = std::mem::size_of::<u64>() + std::mem::size_of::<u32>() + 2;
        capacity
            .checked_mul(row)?
            .checked_add(std::mem::size_of::<Head>())?
            .checked_mul(slots)
    }

    pub(crate) fn new(slots: usize, capacity: usize) -> Self {
        SlotInfo {
            heads: (0..slots).map(|_| UnsafeCell::new(Head::EMPTY)).collect(),
            ids: cells(slots * capacity),
            lens: cells(slots * capacity),
            sources: cells(slots * capacity),
            capacity,
        }
    }

    fn range(&self, slot: usize) -> std::ops::Range<usize> {
        slot * self.capacity..(slot + 1) * self.capacity
    }

    /// Slot `slot`'s head, to change.
    ///
    /// # Safety
    /// The caller owns slot `slot` (its stamp names it), so no one else touches its cells,
    /// for as long as the reference lives.
    #[allow(clippy::mut_from_ref)] // the slot protocol hands out one owner at a time
    unsafe fn head_mut(&self, slot: usize) -> &mut Head {
        // SAFETY: the caller owns the slot (this function's contract).
        unsafe { &mut *self.heads[slot].get() }
    }

    /// Empties slot `slot`'s description, for a batch about to be gathered.
    ///
    /// # Safety
    /// As [`push`](Self::push).
    pub(crate) unsafe fn clear(&self, slot: usize) {
        // SAFETY: the caller owns the slot (this function's contract).
        unsafe { *self.head_mut(slot) = Head::EMPTY };
    }

    /// Appends a row to slot `slot`'s description; `false` (and the row counted as
    /// dropped) when the slot holds `capacity` rows already.
    ///
    /// # Safety
    /// The caller owns slot `slot` (its stamp names it), so no one else touches its cells.
    pub(crate) unsafe fn push(&self, slot: usize, row: Row) -> bool {
        // SAFETY: the caller owns the slot (this function's contract).
        let head = unsafe { self.head_mut(slot) };
        if head.rows == self.capacity {
            head.dropped += 1;
            return false;
        }
        let at = slot * self.capacity + head.rows;
        head.rows += 1;
        // SAFETY: as above: the slot's cells are the caller's.
        unsafe { self.write(at, row) };
        true
    }

    /// Writes row cell `at`.
    ///
    /// # Safety
    /// The caller owns the slot the cell belongs to.
    unsafe fn write(&self, at: usize, row: Row) {
        // SAFETY: the caller owns the cell's slot (this function's contract).
        unsafe { *self.ids[at].get() = row.id };
        // SAFETY: as above.
        unsafe { *self.lens[at].get() = row.len };
        // SAFETY: as above.
        unsafe { *self.sources[at].get() = row.source };
    }

    /// Sets slot `slot`'s epoch (`None`: its samples carry no ids), step and extents
    /// (each where given).
    ///
    /// # Safety
    /// As [`push`](Self::push).
    pub(crate) unsafe fn set(
        &self,
        slot: usize,
        epoch: Option<Option<u64>>,
        step: Option<u64>,
        dims: Option<&[u64]>,
    ) {
        // SAFETY: the caller owns the slot (this function's contract).
        let head = unsafe { self.head_mut(slot) };
        if let Some(epoch) = epoch {
            head.epoch = epoch.unwrap_or(NONE);
        }
        if let Some(step) = step {
            head.step = step;
        }
        if let Some(dims) = dims {
            let n = dims.len().min(MAX_DIMS);
            head.dims[..n].copy_from_slice(&dims[..n]);
        }
    }

    /// Slot `slot`'s head.
    ///
    /// # Safety
    /// The caller owns slot `slot`, or holds it in a state in which its owner does not
    /// write these cells.
    pub(crate) unsafe fn head(&self, slot: usize) -> Head {
        // SAFETY: no one writes the cell now (this function's contract).
        unsafe { *self.heads[slot].get() }
    }

    /// Slot `slot`'s rows, as (ids, lens, sources), borrowed.
    ///
    /// # Safety
    /// As [`head`](Self::head), for as long as the slices live.
    pub(crate) unsafe fn rows(&self, slot: usize) -> (&[u64], &[u32], &[u16]) {
        // SAFETY: no one writes the cells now (this function's contract).
        let n = unsafe { self.head(slot) }.rows;
        let r = self.range(slot);
        let r = r.start..r.start + n;
        // SAFETY: as above, for as long as the slices live.
        let ids = unsafe { plain(&self.ids[r.clone()]) };
        // SAFETY: as above.
        let lens = unsafe { plain(&self.lens[r.clone()]) };
        // SAFETY: as above.
        let sources = unsafe { plain(&self.sources[r]) };
        (ids, lens, sources)
    }

    /// Copies slot `src` of `from` into slot `dst`.
    ///
    /// # Safety
    /// The caller owns slot `dst` of `self` and may read slot `src` of `from` (as
    /// [`head`](Self::head)); both have the same capacity.
    pub(crate) unsafe fn copy_from(&self, dst: usize, from: &SlotInfo, src: usize) {
        debug_assert_eq!(self.capacity, from.capacity);
        // SAFETY: the caller may read `src` (this function's contract).
        let head = unsafe { from.head(src) };
        // SAFETY: as above.
        let (ids, lens, sources) = unsafe { from.rows(src) };
        let start = dst * self.capacity;
        for (i, ((&id, &len), &source)) in ids.iter().zip(lens).zip(sources).enumerate() {
            // SAFETY: the caller owns `dst` (this function's contract).
            unsafe { self.write(start + i, Row { id, len, source }) };
        }
        // SAFETY: as above.
        unsafe { *self.head_mut(dst) = head };
    }
}
