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
    /// The source index every row gets, when set ([`source`](Self::source)).
    source: Option<u16>,
    /// The samples a step of the source holds, when the sample says
    /// ([`batch_size`](Self::batch_size)): the feeder checks it.
    batch_size: Option<u64>,
}

impl std::fmt::Debug for Describe<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Describe")
            .field("slot", &self.slot)
            .field("source", &self.source)
            .field("batch_size", &self.batch_size)
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
        Describe {
            info,
            slot,
            source: None,
            batch_size: None,
        }
    }

    /// Appends a row to the batch; `false` when the batch holds
    /// [`Config::rows_per_batch`](crate::Config::rows_per_batch) rows already (the row is
    /// not kept; [`Batch::rows_dropped`](crate::Batch::rows_dropped) counts it).
    pub fn row(&mut self, mut row: Row) -> bool {
        if let Some(source) = self.source {
            row.source = source;
        }
        // SAFETY: the feeder owns the slot while this value lives (`new`'s contract).
        unsafe { self.info.push(self.slot, row) }
    }

    /// Makes every row this sample adds from now on say it came from source `source`
    /// (whatever its [`Row::source`]): a mixture's decoder sets it before the decoder of
    /// the sample's own source describes the sample
    /// ([`MixedDecoder`](crate::source::MixedDecoder)).
    pub fn source(&mut self, source: u16) {
        self.source = Some(source);
    }

    /// Says which step of the run the batch is ([`Batch::step`](crate::Batch::step)).
    pub fn step(&mut self, step: u64) {
        // SAFETY: as in `row`.
        unsafe { self.info.set(self.slot, None, Some(step), None) }
    }

    /// Says how many samples the source cuts each of its steps into, per rank: a
    /// sampler's [`batch_size`](crate::source::SamplerBuilder::batch_size) (its windows say
    /// it), a mixture's, 1 for a step of packed documents. A pipeline whose config has
    /// another [`batch_size`](crate::ConfigBuilder::batch_size) would cut the source's steps
    /// apart or together and label every batch with the wrong step: its feeder refuses the
    /// run at the first sample that says so, before anything is decoded — the first `pop`
    /// returns [`ConfigError::SourceBatchSize`](crate::ConfigError::SourceBatchSize). A
    /// sample that does not say (a source with no steps, a source of your own) is not
    /// checked.
    pub fn batch_size(&mut self, samples: u64) {
        self.batch_size = Some(samples);
    }

    /// The batch size the sample said ([`batch_size`](Self::batch_size)), if it did.
    pub(crate) fn said_batch_size(&self) -> Option<u64> {
        self.batch_size
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
