//! [`Run`]: what a [`Loader`](crate::Loader) decides about a source's run and the source
//! itself does not — which rank of how many, batches of how many samples, where the run
//! begins and which of its steps it leaves out — as one public value.

use std::ops::Range;

use super::sampling::run_settings::RunSettings;

/// The run of a source: this process's rank of `world_size` data-parallel ranks, batches
/// of `batch_size` samples (none for packed documents, whose batch is one step), the step
/// it begins at and the steps it leaves out.
///
/// A [`Loader`](crate::Loader) holds one and sets up its source for it
/// ([`Source::with_run`](super::Source::with_run)); sources are built without one.
///
/// ```
/// use pinring::source::Run;
///
/// let run = Run { rank: 1, world_size: 4, batch_size: Some(8), ..Run::default() };
/// assert_eq!((run.start_step, run.skip_steps.len(), run.drop_last), (0, 0, true));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Run {
    /// This process's data-parallel rank, below `world_size`.
    pub rank: u64,
    /// How many data-parallel ranks share every epoch (or the mixture's sequence, or the
    /// walk of documents).
    pub world_size: u64,
    /// Samples a batch (`None` for packed documents: a batch is one step of this rank).
    pub batch_size: Option<u64>,
    /// Drop each epoch's short last batch (the default: every batch full, the same count
    /// on every rank); `false` delivers it.
    pub drop_last: bool,
    /// The step the run begins at: exactly where an uninterrupted run stands there.
    pub start_step: u64,
    /// Steps left out of the stream, as half-open ranges (`a..b`).
    pub skip_steps: Vec<Range<u64>>,
    /// Epochs the run delivers, counted from epoch 0 (`None`: no cap). A source that walks
    /// to its states (packed documents) stops its walks at the cap.
    pub epochs: Option<u64>,
}

impl Default for Run {
    /// Rank 0 of 1, no batch size, from step 0, nothing skipped, short batches dropped.
    fn default() -> Self {
        Run {
            rank: 0,
            world_size: 1,
            batch_size: None,
            drop_last: true,
            start_step: 0,
            skip_steps: Vec::new(),
            epochs: None,
        }
    }
}

impl Run {
    /// The skipped ranges as `(start, end)` pairs, as the sources' builders take them.
    pub fn skip_pairs(&self) -> Vec<(u64, u64)> {
        self.skip_steps.iter().map(|r| (r.start, r.end)).collect()
    }

    /// The settings a sampling builder holds for this run.
    pub(crate) fn settings(&self) -> RunSettings {
        RunSettings {
            rank: self.rank,
            world_size: self.world_size,
            batch_size: self.batch_size,
            start_step: (self.start_step > 0).then_some(self.start_step),
            skip_steps: self.skip_pairs(),
        }
    }

    /// The first setting of this run (the one a source was built with) that a loader owns
    /// instead, by the name the loader's builder gives it: `"rank"`, `"world_size"`,
    /// `"batch_size"`, `"start_step"`, `"skip_steps"`, `"epochs"`; `None` when all are as they are by
    /// default.
    pub(crate) fn first_set(&self) -> Option<&'static str> {
        if self.rank != 0 {
            Some("rank")
        } else if self.world_size != 1 {
            Some("world_size")
        } else if self.batch_size.is_some() {
            Some("batch_size")
        } else if self.start_step > 0 {
            Some("start_step")
        } else if !self.skip_steps.is_empty() {
            Some("skip_steps")
        } else if self.epochs.is_some() {
            Some("epochs")
        } else {
            None
        }
    }
}

/// Steps to skip, as [`LoaderBuilder::skip_steps`](crate::LoaderBuilder::skip_steps) takes
/// them: one range (`10..20`) or several (`[10..20, 40..45]`, a `Vec` or a slice of them).
pub trait StepRanges {
    /// The ranges.
    fn ranges(self) -> Vec<Range<u64>>;
}

impl StepRanges for Range<u64> {
    fn ranges(self) -> Vec<Range<u64>> {
        vec![self]
    }
}

impl<const N: usize> StepRanges for [Range<u64>; N] {
    fn ranges(self) -> Vec<Range<u64>> {
        self.into()
    }
}

impl StepRanges for Vec<Range<u64>> {
    fn ranges(self) -> Vec<Range<u64>> {
        self
    }
}

impl StepRanges for &[Range<u64>] {
    fn ranges(self) -> Vec<Range<u64>> {
        self.to_vec()
    }
}
