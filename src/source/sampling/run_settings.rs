//! [`RunSettings`]: the settings every sampling builder shares — which rank of how many,
//! the batch size that numbers the steps, where the run begins and which steps it leaves
//! out — and their one check, [`RunSettings::check`].

use super::skip::SkipSteps;
use crate::error::source::SourceError;

/// The rank, world size, batch size, start step and skipped steps as a builder was given
/// them ([`SamplerBuilder`](crate::source::SamplerBuilder),
/// [`MixtureBuilder`](crate::source::MixtureBuilder); without a batch size
/// [`DocumentsBuilder`](crate::source::DocumentsBuilder),
/// [`DocumentMixtureBuilder`](crate::source::DocumentMixtureBuilder)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RunSettings {
    pub(crate) rank: u64,
    pub(crate) world_size: u64,
    pub(crate) batch_size: Option<u64>,
    pub(crate) start_step: Option<u64>,
    pub(crate) skip_steps: Vec<(u64, u64)>,
}

/// [`RunSettings`] checked: a world size and batch size that are not 0, a rank below the
/// world size, skipped steps as [`SkipSteps`], and steps only with a batch size.
#[derive(Debug, Clone)]
pub(crate) struct CheckedRun {
    pub(crate) rank: u64,
    pub(crate) world: u64,
    pub(crate) batch: Option<u64>,
    /// The step a run begins at, at the earliest (0: none set).
    pub(crate) start_step: u64,
    pub(crate) skip: SkipSteps,
}

impl Default for RunSettings {
    /// Rank 0 of 1, no batch size, no start step, no skipped steps.
    fn default() -> Self {
        RunSettings {
            rank: 0,
            world_size: 1,
            batch_size: None,
            start_step: None,
            skip_steps: Vec::new(),
        }
    }
}

impl RunSettings {
    /// The settings `run` was checked from, so that checking them again gives the same:
    /// a start step of 0 is "none set", the skipped steps their merged ranges.
    pub(crate) fn of(run: &CheckedRun) -> Self {
        RunSettings {
            rank: run.rank,
            world_size: run.world,
            batch_size: run.batch,
            start_step: (run.start_step > 0).then_some(run.start_step),
            skip_steps: run.skip.ranges().to_vec(),
        }
    }

    /// Checks the settings: a zero world size or batch size is [`SourceError::Zero`], a
    /// reversed skipped range [`SourceError::BadSkip`], a start step or skipped steps
    /// without a batch size [`SourceError::StepsNeedBatchSize`], a rank not below the
    /// world size [`SourceError::BadRank`] (the first that applies, in that order).
    pub(crate) fn check(self) -> Result<CheckedRun, SourceError> {
        self.checked(true)
    }

    /// Checks the settings of a source whose every item is a step of its own (packed
    /// documents: no batch size numbers them), as [`check`](Self::check) does but for
    /// [`SourceError::StepsNeedBatchSize`]: a start step and skipped steps need none.
    pub(crate) fn check_own_steps(self) -> Result<CheckedRun, SourceError> {
        self.checked(false)
    }

    /// [`check`](Self::check), where steps need a batch size only with
    /// `steps_need_batch_size`.
    fn checked(self, steps_need_batch_size: bool) -> Result<CheckedRun, SourceError> {
        let world = nonzero(self.world_size, "world_size")?;
        let batch = self
            .batch_size
            .map(|b| nonzero(b, "batch_size"))
            .transpose()?;
        let skip = SkipSteps::new(self.skip_steps)?;
        if steps_need_batch_size && batch.is_none() {
            if self.start_step.is_some() {
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
            start_step: self.start_step.unwrap_or(0),
            skip,
        })
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
