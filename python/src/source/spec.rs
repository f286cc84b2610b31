//! What a loader needs from a source: its sampler (and decoder), the epochs it cuts into
//! batches, the steps it begins at and skips, its checkpoints, what places its rows, and a
//! pipeline started over it.

use std::sync::Arc;

use pinring::source::{
    Checkpoint, Documents, DocumentsCheckpoint, FixedRecords, RecordBytes, Sampler, Samples,
    Schedule, Segmented, SourceError, TokenShards, Tokens,
};
use pinring::{Backend, Config, ConfigBuilder, Fields, Locate, Pipeline};

use crate::position::{EpochPlace, Position};
use crate::source::mixed::MixSpec;
use crate::source::steps::{kept_between, Steps};
use crate::state::SourceState;

/// A source's sampler (of either format), or a packed-documents source.
#[derive(Debug, Clone)]
pub(crate) enum Spec {
    /// Token windows of `seq_len + 1` tokens.
    Tokens {
        /// The windows.
        sampler: Sampler<TokenShards>,
        /// Widens the tokens to the dtype.
        decoder: Tokens,
    },
    /// Single records.
    Records {
        /// The records.
        sampler: Sampler<FixedRecords>,
    },
    /// Packed documents: a batch is one step of this rank.
    Documents {
        /// The source (with the run's start step and skipped steps, if any).
        docs: Documents,
    },
    /// A mixture of samplers of one kind.
    Mixed(MixSpec),
}

/// Runs `$body` with `$s` bound to the spec's sampler, whichever source it samples, or
/// `$other` for a source without one (Documents, a mixture).
macro_rules! with_sampler {
    ($spec:expr, $s:ident => $body:expr, _ => $other:expr) => {
        match $spec {
            Spec::Tokens { sampler: $s, .. } => $body,
            Spec::Records { sampler: $s } => $body,
            Spec::Documents { .. } | Spec::Mixed(_) => $other,
        }
    };
}

/// The error of a state of the other kind of source.
fn other_kind(state: &SourceState, here: &'static str) -> pinring::Error {
    let what = "the kind of source".to_owned();
    let saved = state.kind().trim_start_matches("a ").to_owned();
    let here = here.to_owned();
    match state {
        SourceState::Windows(_) => SourceError::DocumentsCheckpointMismatch { what, saved, here },
        _ => SourceError::CheckpointMismatch { what, saved, here },
    }
    .into()
}

/// The window state in `from`, or the error of a state of the other kind.
fn windows_state(from: Option<&SourceState>) -> pinring::Result<Option<&Checkpoint>> {
    match from {
        None => Ok(None),
        Some(SourceState::Windows(c)) => Ok(Some(c)),
        Some(other) => Err(other_kind(other, "TokenWindows or FixedRecords source")),
    }
}

/// The documents state in `from`, or the error of a state of the other kind.
fn documents_state(from: Option<&SourceState>) -> pinring::Result<Option<&DocumentsCheckpoint>> {
    match from {
        None => Ok(None),
        Some(SourceState::Documents(c)) => Ok(Some(c)),
        Some(other) => Err(other_kind(other, "Documents source")),
    }
}

/// The sampler `s` again, cutting its epochs into batches of `batch` samples, so that
/// every rank gets the same number of batches (see `SamplerBuilder::batch_size`), its run
/// beginning at `steps.start` and leaving out `steps.skip`.
fn batched<S: Segmented + Clone>(
    s: &Sampler<S>,
    batch: u64,
    drop_last: bool,
    steps: &Steps,
) -> pinring::Result<Sampler<S>> {
    let b = s
        .to_builder()
        .batch_size(batch)
        .drop_last(drop_last)
        .skip_steps(steps.skip.iter().copied());
    if steps.start > 0 {
        b.start_step(steps.start).build()
    } else {
        b.build()
    }
}

/// The checkpoint of `s`'s run from `from` (its start when `None`) after this rank
/// popped `samples` samples: the run begins at the sampler's start step and leaves out its
/// skipped steps (and `from`'s).
fn sampler_checkpoint<S: Segmented>(
    s: &Sampler<S>,
    from: Option<&Checkpoint>,
    samples: u64,
) -> pinring::Result<Checkpoint> {
    match from {
        None => s.checkpoint_after(&s.checkpoint(0, 0), samples),
        Some(from) => s.checkpoint_after(from, samples),
    }
}

/// Where the next batch of `s`'s run stands after `samples` popped since `from`: its epoch
/// and the batches its epoch has left (those the run keeps).
fn sampler_place<S: Segmented>(
    s: &Sampler<S>,
    from: Option<&Checkpoint>,
    samples: u64,
) -> pinring::Result<(EpochPlace, Checkpoint)> {
    let at = sampler_checkpoint(s, from, samples)?;
    let raw = s.batches_left(&at)?.unwrap_or(0);
    let left = kept_between(&at.skip, at.step, at.step.saturating_add(raw));
    Ok((
        EpochPlace {
            epoch: at.epoch,
            left,
        },
        at,
    ))
}

/// `sampler`'s samples from `from` (the start of epoch 0 when `None`) to the end of epoch
/// `epochs - 1` (endless when `None`).
fn samples<S: Segmented>(
    sampler: &Sampler<S>,
    from: Option<&Checkpoint>,
    epochs: Option<u64>,
) -> pinring::Result<Samples<S>> {
    let samples = match from {
        None => sampler.iter(),
        Some(state) => sampler.iter_from_checkpoint(state)?,
    };
    Ok(match epochs {
        Some(end) => samples.until_epoch(end),
        None => samples,
    })
}

impl Spec {
    /// Whether a batch is a step of packed documents (a Documents source or a mixture of
    /// them): no batch size.
    pub(crate) fn packs_documents(&self) -> bool {
        match self {
            Spec::Documents { .. } => true,
            Spec::Mixed(m) => m.is_documents(),
            _ => false,
        }
    }

    /// What a batch of packed documents is: its fields and the schedule of its steps'
    /// sizes; None for windows and records (a batch of rows).
    pub(crate) fn step_layout(&self) -> Option<(Fields, Schedule)> {
        match self {
            Spec::Documents { docs } => Some((docs.fields(), docs.schedule().clone())),
            Spec::Mixed(m) => m.step_layout(),
            _ => None,
        }
    }

    /// Whether the source is a mixture (its batches have no epochs of its own).
    pub(crate) fn is_mixture(&self) -> bool {
        matches!(self, Spec::Mixed(_))
    }

    /// The mixture, if it is one.
    pub(crate) fn mixture(&self) -> Option<&MixSpec> {
        match self {
            Spec::Mixed(m) => Some(m),
            _ => None,
        }
    }

    /// What places a batch's rows in their files.
    pub(crate) fn locator(&self) -> Arc<dyn Locate> {
        match self {
            Spec::Tokens { sampler, .. } => Arc::new(sampler.clone()),
            Spec::Records { sampler } => Arc::new(sampler.clone()),
            Spec::Documents { docs } => Arc::new(docs.clone()),
            Spec::Mixed(m) => m.locator(),
        }
    }

    /// The config builder a pipeline over this source starts from: batches of `batch`
    /// samples of `sample_bytes` bytes, or a Documents source's own (a step a batch, its
    /// fields).
    pub(crate) fn config_base(&self, batch: usize, sample_bytes: usize) -> ConfigBuilder {
        match self {
            Spec::Documents { docs } => docs.config().locator(self.locator()),
            Spec::Mixed(m) => m.config_base(batch, sample_bytes),
            _ => Config::builder()
                .batch_size(batch)
                .bytes_per_sample(sample_bytes)
                .locator(self.locator()),
        }
    }

    /// Samples per epoch for this rank; None for Documents (not known up front) and
    /// mixtures (each source has epochs of its own).
    pub(crate) fn epoch_len(&self) -> Option<u64> {
        with_sampler!(self, s => Some(s.epoch_len()), _ => None)
    }

    /// The same source with its epochs cut into batches of `batch` samples on every rank
    /// (the last one of an epoch short unless `drop_last`; Documents: a step a batch), its
    /// run beginning at `steps.start` and leaving out `steps.skip` (Documents: ending at
    /// the start of epoch `epochs`, its walk over skipped steps too; the samplers' runs
    /// end there by arithmetic, see `start`).
    pub(crate) fn batched(
        &self,
        batch: u64,
        drop_last: bool,
        steps: &Steps,
        epochs: Option<u64>,
    ) -> pinring::Result<Spec> {
        Ok(match self {
            Spec::Tokens { sampler, decoder } => Spec::Tokens {
                sampler: batched(sampler, batch, drop_last, steps)?,
                decoder: *decoder,
            },
            Spec::Records { sampler } => Spec::Records {
                sampler: batched(sampler, batch, drop_last, steps)?,
            },
            Spec::Documents { docs } => {
                let docs = docs.with_steps(steps.start, steps.skip.iter().copied())?;
                Spec::Documents {
                    docs: match epochs {
                        Some(end) => docs.until_epoch(end),
                        None => docs,
                    },
                }
            }
            Spec::Mixed(m) => Spec::Mixed(m.batched(batch, steps)?),
        })
    }

    /// Batches per epoch for this rank (the same on every rank); 0 without a batch size;
    /// None for Documents (not known up front) and mixtures.
    pub(crate) fn epoch_batches(&self) -> Option<u64> {
        with_sampler!(self, s => Some(s.epoch_batches().unwrap_or(0)), _ => None)
    }

    /// The rank-agnostic state after what `position` says was popped since its `from`
    /// (the start of epoch 0 when `None`): samples for windows and mixtures, steps for
    /// documents (a documents state walks on from the last one computed, kept in
    /// `position`).
    pub(crate) fn checkpoint(&self, position: &mut Position) -> pinring::Result<SourceState> {
        let from = position.from.as_ref();
        match self {
            Spec::Mixed(m) => m.checkpoint(position),
            Spec::Documents { docs } => {
                let start = documents_state(from)?;
                let (done, after) = match &position.walked_after {
                    Some((done, SourceState::Documents(state))) if *done <= position.batches => {
                        (*done, Some(state))
                    }
                    _ => (0, start),
                };
                let state =
                    SourceState::Documents(docs.checkpoint_after(after, position.batches - done)?);
                position.walked_after = Some((position.batches, state.clone()));
                Ok(state)
            }
            _ => {
                let from = windows_state(from)?;
                let consumed = position.samples;
                with_sampler!(self, s => sampler_checkpoint(s, from, consumed)
                    .map(SourceState::Windows),
                    _ => unreachable!("documents and mixtures are handled above"))
            }
        }
    }

    /// Where a run from `from` (the start when `None`) begins: `from` itself, or, for a
    /// Documents source with a start step that `from` stands before, the state at that
    /// step (its steps walked over the index by the source, nothing read: about a
    /// microsecond a step), so that the loader's epoch and states count from there.
    /// Samplers and mixtures begin at their start step by themselves (and so would
    /// Documents: this only says where).
    pub(crate) fn begin(&self, from: Option<SourceState>) -> pinring::Result<Option<SourceState>> {
        let Spec::Documents { docs } = self else {
            return Ok(from);
        };
        let at = match &from {
            None => 0,
            Some(state) => documents_state(Some(state))?.map_or(0, |c| c.step),
        };
        if docs.start_step() <= at {
            return Ok(from);
        }
        let state = docs.checkpoint_after(documents_state(from.as_ref())?, 0)?;
        Ok(Some(SourceState::Documents(state)))
    }

    /// The steps the run has (counted from step 0), when `start` lies at or past its end
    /// — the end of epoch `epochs - 1`, or a mixture's stop rule — so that a run beginning
    /// there would deliver nothing; `None` otherwise, and for an endless run. `begun` is
    /// where the run begins (`begin`'s answer). Samplers: by arithmetic on the schedule of
    /// steps. Documents: `begin` walked to the start step, stopping at the end epoch (the
    /// source's `until_epoch`), and a walk that stopped there says so with its cursor in
    /// the end epoch. Mixtures: their state at the start step stops at the run's end.
    pub(crate) fn steps_if_past_end(
        &self,
        start: u64,
        begun: Option<&SourceState>,
        epochs: Option<u64>,
    ) -> pinring::Result<Option<u64>> {
        if let Spec::Mixed(m) = self {
            return m.steps_if_past_end(start, begun);
        }
        let Some(epochs) = epochs else {
            return Ok(None);
        };
        if start == 0 {
            return Ok(None);
        }
        if let Spec::Documents { .. } = self {
            return Ok(match documents_state(begun)? {
                Some(state) if state.epoch >= epochs && state.step <= start => Some(state.step),
                _ => None,
            });
        }
        let from = windows_state(begun)?;
        with_sampler!(self, s => {
            let origin = match from {
                Some(state) => state.clone(),
                None => s.checkpoint(0, 0),
            };
            if origin.epoch >= epochs {
                return Ok(None);
            }
            let per_epoch = s.epoch_batches().unwrap_or(0);
            let end = origin
                .step
                .saturating_add(s.batches_left(&origin)?.unwrap_or(0))
                .saturating_add((epochs - origin.epoch - 1).saturating_mul(per_epoch));
            Ok((start >= end).then_some(end))
        }, _ => Ok(None))
    }

    /// Checks that this source can resume from `state`.
    pub(crate) fn check(&self, state: &SourceState) -> pinring::Result<()> {
        match self {
            Spec::Documents { docs } => match documents_state(Some(state))? {
                Some(c) => docs.check_checkpoint(c),
                None => Ok(()),
            },
            Spec::Mixed(m) => m.check(state),
            _ => match windows_state(Some(state))? {
                Some(c) => with_sampler!(self, s => s.check_checkpoint(c), _ => Ok(())),
                None => Ok(()),
            },
        }
    }

    /// The epoch of the next batch after what `position` says was popped since its
    /// `from` (the start when `None`), and how many batches its epoch has left (of those
    /// the run keeps: not the skipped steps); None for Documents and mixtures, whose
    /// epochs' lengths are not known up front. The answer is kept in `position` and
    /// counted down batch by batch until its epoch ends (no state is made per batch).
    pub(crate) fn place(&self, position: &mut Position) -> pinring::Result<Option<EpochPlace>> {
        if self.epoch_batches().is_none() {
            return Ok(None);
        }
        if let Some((at, place)) = position.place {
            let since = position.batches.wrapping_sub(at);
            if position.batches >= at && since < place.left {
                return Ok(Some(EpochPlace {
                    epoch: place.epoch,
                    left: place.left - since,
                }));
            }
        }
        let from = windows_state(position.from.as_ref())?;
        let samples = position.samples;
        let Some((place, _)) =
            with_sampler!(self, s => Some(sampler_place(s, from, samples)?), _ => None)
        else {
            return Ok(None);
        };
        position.place = Some((position.batches, place));
        Ok(Some(place))
    }

    /// Batches a run from `from` (the start when `None`) delivers before epoch `epochs`
    /// (the run's cap): those of its steps it keeps; None for Documents and mixtures.
    pub(crate) fn total_batches(
        &self,
        from: Option<&SourceState>,
        epochs: u64,
    ) -> pinring::Result<Option<u64>> {
        if self.epoch_batches().is_none() {
            return Ok(None);
        }
        let from = windows_state(from)?;
        with_sampler!(self, s => {
            let (first, at) = sampler_place(s, from, 0)?;
            if first.epoch >= epochs {
                return Ok(Some(0));
            }
            let raw = s.batches_left(&at)?.unwrap_or(0);
            let per_epoch = s.epoch_batches().unwrap_or(0);
            let later = (epochs - first.epoch - 1).saturating_mul(per_epoch);
            let end = at.step.saturating_add(raw).saturating_add(later);
            Ok(Some(kept_between(&at.skip, at.step, end)))
        }, _ => Ok(None))
    }

    /// Starts a pipeline of backend `B` over this source, from `from` for `epochs`.
    pub(crate) fn start<B: Backend>(
        &self,
        config: Config<B>,
        from: Option<&SourceState>,
        epochs: Option<u64>,
    ) -> pinring::Result<Pipeline<B>> {
        match self {
            Spec::Tokens { sampler, decoder } => Pipeline::new(
                config,
                *decoder,
                samples(sampler, windows_state(from)?, epochs)?,
            ),
            Spec::Records { sampler } => Pipeline::new(
                config,
                RecordBytes,
                samples(sampler, windows_state(from)?, epochs)?,
            ),
            // The source ends its run at the epochs cap itself (`batched`).
            Spec::Documents { docs } => {
                let steps = match documents_state(from)? {
                    None => docs.iter(),
                    Some(state) => docs.iter_from(state)?,
                };
                Pipeline::new(config, docs.decoder(), steps)
            }
            Spec::Mixed(m) => m.start(config, from),
        }
    }
}
