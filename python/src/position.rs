//! Where a loader's delivered batches leave its run: the state it started from and what
//! was popped since, and where that stands in the epochs.

use crate::state::SourceState;

/// Where a position of delivered batches stands in the epochs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EpochPlace {
    /// The epoch of the next batch.
    pub(crate) epoch: u64,
    /// Batches left in that epoch, the next one included.
    pub(crate) left: u64,
}

/// Where the delivered batches leave the run: the state the pipeline started from and what
/// was popped since.
#[derive(Debug, Default)]
pub(crate) struct Position {
    /// The state the pipeline started from; `None`: the start of epoch 0.
    pub(crate) from: Option<SourceState>,
    /// Samples popped since `from`.
    pub(crate) samples: u64,
    /// Batches popped since `from`.
    pub(crate) batches: u64,
    /// The epoch of the last batch popped, if any.
    pub(crate) last_epoch: Option<u64>,
    /// Whether a pop found the end of the run (every batch delivered).
    pub(crate) ended: bool,
    /// A state of a source of packed documents (a Documents source, a mixture of them)
    /// computed earlier, and the batches popped since `from` it stands after: the next one
    /// walks on from it rather than from `from`.
    pub(crate) walked_after: Option<(u64, SourceState)>,
    /// The epoch place computed earlier and the batches popped since `from` it was
    /// computed at: later batches count it down until its epoch ends.
    pub(crate) place: Option<(u64, EpochPlace)>,
}
