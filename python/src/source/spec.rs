//! What a loader needs from a source: its sampler (and decoder), the epochs it cuts into
//! batches, its checkpoints, and a pipeline started over it.

use pinring::source::{
    Checkpoint, Documents, DocumentsCheckpoint, FixedRecords, RecordBytes, Sampler, Samples,
    Segmented, SourceError, TokenShards, Tokens,
};
use pinring::{Backend, Config, ConfigBuilder, Pipeline};

use crate::holder::Position;
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
        /// The source.
        docs: Documents,
    },
}

/// Runs `$body` with `$s` bound to the spec's sampler, whichever source it samples, or
/// `$docs` with `$d` bound to a Documents source.
macro_rules! with_sampler {
    ($spec:expr, $s:ident => $body:expr, $d:pat => $docs:expr) => {
        match $spec {
            Spec::Tokens { sampler: $s, .. } => $body,
            Spec::Records { sampler: $s } => $body,
            Spec::Documents { docs: $d } => $docs,
        }
    };
}

/// The error of a state of the other kind of source.
fn other_kind(state: &SourceState, here: &'static str) -> pinring::Error {
    let what = "the kind of source".to_owned();
    let saved = state.kind().trim_start_matches("a ").to_owned();
    let here = here.to_owned();
    match state {
        SourceState::Documents(_) => SourceError::CheckpointMismatch { what, saved, here },
        SourceState::Windows(_) => SourceError::DocumentsCheckpointMismatch { what, saved, here },
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
/// every rank gets the same number of batches (see `SamplerBuilder::batch_size`).
fn batched<S: Segmented + Clone>(
    s: &Sampler<S>,
    batch: u64,
    drop_last: bool,
) -> pinring::Result<Sampler<S>> {
    Sampler::builder(s.source().clone())
        .window(s.window())
        .stride(s.stride())
        .order(s.order())
        .shard(s.rank(), s.world_size())
        .batch_size(batch)
        .drop_last(drop_last)
        .build()
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

/// Where a position of delivered batches stands in the epochs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EpochPlace {
    /// The epoch of the next batch.
    pub(crate) epoch: u64,
    /// Batches left in that epoch, the next one included.
    pub(crate) left: u64,
}

impl Spec {
    /// Whether the source packs documents (a batch is a step).
    pub(crate) fn is_documents(&self) -> bool {
        matches!(self, Spec::Documents { .. })
    }

    /// The config builder a pipeline over this source starts from: batches of `batch`
    /// samples of `sample_bytes` bytes, or a Documents source's own (a step a batch, its
    /// fields).
    pub(crate) fn config_base(&self, batch: usize, sample_bytes: usize) -> ConfigBuilder {
        match self {
            Spec::Documents { docs } => docs.config(),
            _ => Config::builder()
                .batch_size(batch)
                .bytes_per_sample(sample_bytes),
        }
    }

    /// Samples per epoch for this rank; None for Documents (not known up front).
    pub(crate) fn epoch_len(&self) -> Option<u64> {
        with_sampler!(self, s => Some(s.epoch_len()), _ => None)
    }

    /// The same source with its epochs cut into batches of `batch` samples on every rank
    /// (the last one of an epoch short unless `drop_last`); Documents as it is.
    pub(crate) fn batched(&self, batch: u64, drop_last: bool) -> pinring::Result<Spec> {
        Ok(match self {
            Spec::Tokens { sampler, decoder } => Spec::Tokens {
                sampler: batched(sampler, batch, drop_last)?,
                decoder: *decoder,
            },
            Spec::Records { sampler } => Spec::Records {
                sampler: batched(sampler, batch, drop_last)?,
            },
            Spec::Documents { .. } => self.clone(),
        })
    }

    /// Batches per epoch for this rank (the same on every rank); 0 without a batch size;
    /// None for Documents (not known up front).
    pub(crate) fn epoch_batches(&self) -> Option<u64> {
        with_sampler!(self, s => Some(s.epoch_batches().unwrap_or(0)), _ => None)
    }

    /// The rank-agnostic state after what `position` says was popped since its `from`
    /// (the start of epoch 0 when `None`): samples for windows, steps for documents (a
    /// documents state walks on from the last one computed, kept in `position`).
    pub(crate) fn checkpoint(&self, position: &mut Position) -> pinring::Result<SourceState> {
        let from = position.from.as_ref();
        match self {
            Spec::Documents { docs } => {
                let start = documents_state(from)?;
                let (done, after) = match &position.documents_after {
                    Some((done, state)) if *done <= position.batches => (*done, Some(state)),
                    _ => (0, start),
                };
                let state = docs.checkpoint_after(after, position.batches - done)?;
                position.documents_after = Some((position.batches, state.clone()));
                Ok(SourceState::Documents(state))
            }
            _ => {
                let from = windows_state(from)?;
                let consumed = position.samples;
                with_sampler!(self, s => match from {
                    None => Ok(SourceState::Windows(s.checkpoint(0, consumed))),
                    Some(from) => s.checkpoint_after(from, consumed).map(SourceState::Windows),
                }, _ => unreachable!("documents are handled above"))
            }
        }
    }

    /// Checks that this source can resume from `state`.
    pub(crate) fn check(&self, state: &SourceState) -> pinring::Result<()> {
        match self {
            Spec::Documents { docs } => match documents_state(Some(state))? {
                Some(c) => docs.check_checkpoint(c),
                None => Ok(()),
            },
            _ => match windows_state(Some(state))? {
                Some(c) => with_sampler!(self, s => s.check_checkpoint(c), _ => Ok(())),
                None => Ok(()),
            },
        }
    }

    /// The epoch of the batch after `popped` batches delivered since `from` (the start
    /// when `None`), and how many batches its epoch has left; None for Documents, whose
    /// epochs' lengths are not known up front.
    pub(crate) fn place(
        &self,
        from: Option<&SourceState>,
        popped: u64,
    ) -> pinring::Result<Option<EpochPlace>> {
        let Some(per_epoch) = self.epoch_batches() else {
            return Ok(None);
        };
        let per_epoch = per_epoch.max(1);
        let (epoch, first) = match windows_state(from)? {
            None => (0, per_epoch),
            Some(state) => (
                state.epoch,
                with_sampler!(self, s => s.batches_left(state)?.unwrap_or(0), _ => 0),
            ),
        };
        Ok(Some(if popped < first {
            EpochPlace {
                epoch,
                left: first - popped,
            }
        } else {
            let after = popped - first;
            EpochPlace {
                epoch: epoch + 1 + after / per_epoch,
                left: per_epoch - after % per_epoch,
            }
        }))
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
            Spec::Documents { docs } => {
                let steps = match documents_state(from)? {
                    None => docs.iter(),
                    Some(state) => docs.iter_from(state)?,
                };
                let cap = epochs.unwrap_or(u64::MAX);
                Pipeline::new(
                    config,
                    docs.decoder(),
                    steps.take_while(move |step| step.epoch() < cap),
                )
            }
        }
    }
}
