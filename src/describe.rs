//! A batch's description: what each sample tells its batch about itself while the feeder
//! gathers it ([`Decode::describe`](crate::Decode::describe)), and what the consumer
//! reads back from the [`Batch`](crate::Batch): the batch's rows (where each came from),
//! the step it is, and the extents of its fields.

use crate::row::Row;
use crate::slot::info::SlotInfo;

/// Where a sample writes its part of its batch's description: see
/// [`Decode::describe`](crate::Decode::describe). The feeder hands one out per sample,
/// for the slot it gathers into.
pub struct Describe<'a> {
    info: &'a SlotInfo,
    slot: usize,
}

impl std::fmt::Debug for Describe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Describe")
            .field("slot", &self.slot)
            .finish()
    }
}

impl<'a> Describe<'a> {
    /// The description of `slot` of `info`.
    ///
    /// # Safety
    /// The caller owns the slot (the feeder, while FILLING) for as long as the value
    /// lives.
    pub(crate) unsafe fn new(info: &'a SlotInfo, slot: usize) -> Self {
        Describe { info, slot }
    }

    /// Appends a row to the batch; `false` when the batch holds
    /// [`Config::rows_per_batch`](crate::Config::rows_per_batch) rows already (the row is
    /// not kept; [`Batch::rows_dropped`](crate::Batch::rows_dropped) counts it).
    pub fn row(&mut self, row: Row) -> bool {
        // SAFETY: the feeder owns the slot while this value lives (`new`'s contract).
        unsafe { self.info.push(self.slot, row) }
    }

    /// Says which step of the run the batch is ([`Batch::step`](crate::Batch::step)).
    pub fn step(&mut self, step: u64) {
        // SAFETY: as in `row`.
        unsafe { self.info.set(self.slot, None, Some(step), None) }
    }

    /// Gives the extents of the batch's fields ([`Batch::dims`](crate::Batch::dims)),
    /// at most [`MAX_DIMS`](crate::MAX_DIMS) of them (the rest are ignored): with a field layout
    /// ([`ConfigBuilder::fields`](crate::ConfigBuilder::fields)), each field's length
    /// comes from one of them.
    pub fn dims(&mut self, dims: &[u64]) {
        // SAFETY: as in `row`.
        unsafe { self.info.set(self.slot, None, None, Some(dims)) }
    }
}
