//! [`Run`]: what a [`Loader`](crate::Loader) decides about a source's run and the source
//! itself does not — which rank of how many, batches of how many samples, where the run
//! begins and which of its steps it leaves out — as one public value, which every
//! source's builder holds (its `shard`, `batch_size`, `start_step` and `skip_steps` set
//! its fields), and its one check into a [`CheckedRun`].

use std::ops::Range;

use super::sampling::skip::SkipSteps;
use crate::error::source::SourceError;

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
    /// Adds `ranges`, half-open `(start, end)` pairs as the sources' builders take them, to
    /// the steps to skip.
    pub(crate) fn skip_too(&mut self, ranges: impl IntoIterator<Item = (u64, u64)>) {
        (self.skip_steps).extend(ranges.into_iter().map(|(a, b)| a..b));
    }

    /// The skipped ranges as `(start, end)` pairs, as the sources' builders take them.
    pub fn skip_pairs(&self) -> Vec<(u64, u64)> {
        self.skip_steps.iter().map(|r| (r.start, r.end)).collect()
    }

    /// Checks the run of a source whose steps are batches of samples: a zero world size
    /// or batch size is [`SourceError::Zero`], a reversed skipped range
    /// [`SourceError::BadSkip`], a start step or skipped steps without a batch size
    /// [`SourceError::StepsNeedBatchSize`], a rank not below the world size
    /// [`SourceError::BadRank`] (the first that applies, in that order).
    pub(crate) fn check(&self) -> Result<CheckedRun, SourceError> {
        self.checked(true)
    }

    /// Checks the run of a source whose every item is a step of its own (packed documents:
    /// no batch size numbers them), as [`check`](Self::check) does but for
    /// [`SourceError::StepsNeedBatchSize`]: a start step and skipped steps need none.
    pub(crate) fn check_own_steps(&self) -> Result<CheckedRun, SourceError> {
        self.checked(false)
    }

    /// [`check`](Self::check), where steps need a batch size only with
    /// `steps_need_batch_size`.
    fn checked(&self, steps_need_batch_size: bool) -> Result<CheckedRun, SourceError> {
        let world = nonzero(self.world_size, "world_size")?;
        let batch = self
            .batch_size
            .map(|b| nonzero(b, "batch_size"))
            .transpose()?;
        let skip = SkipSteps::new(self.skip_pairs())?;
        if steps_need_batch_size && batch.is_none() {
            if self.start_step > 0 {
                return Err(SourceError::StepsNeedBatchSize("start_step"));
            }
            if !skip.is_empty() {
                return Err(SourceError::StepsNeedBatchSize("skip_steps"));
            }
        }
        if self.rank >= world {
            return Err(SourceError::BadRank {
                rank: self.rank,
                world_size: world,
            });
        }
        Ok(CheckedRun {
            rank: self.rank,
            world,
            batch,
            start_step: self.start_step,
            skip,
        })
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

/// A [`Run`] checked: a world size and batch size that are not 0, a rank below the world
/// size, the skipped steps as [`SkipSteps`], and steps only with a batch size (where the
/// source's steps are batches).
#[derive(Debug, Clone)]
pub(crate) struct CheckedRun {
    pub(crate) rank: u64,
    pub(crate) world: u64,
    pub(crate) batch: Option<u64>,
    /// The step a run begins at, at the earliest (0: none set).
    pub(crate) start_step: u64,
    pub(crate) skip: SkipSteps,
}

impl CheckedRun {
    /// The run this was checked from (short batches dropped, no cap on epochs: what a
    /// source that has neither holds), so that checking it again gives the same.
    pub(crate) fn run(&self) -> Run {
        Run {
            rank: self.rank,
            world_size: self.world,
            batch_size: self.batch,
            drop_last: true,
            start_step: self.start_step,
            skip_steps: self.skip.ranges().iter().map(|&(a, b)| a..b).collect(),
            epochs: None,
        }
    }
}

/// `n`, or [`SourceError::Zero`] naming the setting `what` when it is 0.
pub(crate) fn nonzero(n: u64, what: &'static str) -> Result<u64, SourceError> {
    if n == 0 {
        Err(SourceError::Zero(what))
    } else {
        Ok(n)
    }
}

/// Steps to skip, as [`LoaderBuilder::skip_steps`](crate::LoaderBuilder::skip_steps) takes
/// them: one range (`10..20`) or several (`[10..20, 40..45]`, a `Vec`, a slice or a
/// borrowed `Vec` of them). One range is best given as itself: clippy's default lint
/// `single_range_in_vec_init` warns of `[10..20]` and `vec![10..20]` (an error under
/// `-D warnings`).
///
/// ```
/// use pinring::source::StepRanges;
///
/// let several = vec![10..20, 40..45];
/// assert_eq!((&several).ranges(), [10..20, 40..45].ranges());
/// assert_eq!(several[..1].ranges(), (10..20).ranges());
/// ```
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

impl StepRanges for &Vec<Range<u64>> {
    fn ranges(self) -> Vec<Range<u64>> {
        self.clone()
    }
}
