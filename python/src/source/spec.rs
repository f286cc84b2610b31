//! What a loader needs from a source: its sampler (and decoder), the epochs it cuts into
//! batches, its checkpoints, and a pipeline started over it.

use pinring::source::{
    Checkpoint, FixedRecords, RecordBytes, Sampler, Samples, Segmented, TokenShards, Tokens,
};
use pinring::{Backend, Config, Pipeline};

/// A source's sampler, of either format.
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
}

/// Runs `$body` with `$s` bound to the spec's sampler, whichever source it samples.
macro_rules! with_sampler {
    ($spec:expr, $s:ident => $body:expr) => {
        match $spec {
            Spec::Tokens { sampler: $s, .. } => $body,
            Spec::Records { sampler: $s } => $body,
        }
    };
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
    /// Samples per epoch for this rank.
    pub(crate) fn epoch_len(&self) -> u64 {
        with_sampler!(self, s => s.epoch_len())
    }

    /// The same source with its epochs cut into batches of `batch` samples on every rank
    /// (the last one of an epoch short unless `drop_last`).
    pub(crate) fn batched(&self, batch: u64, drop_last: bool) -> pinring::Result<Spec> {
        Ok(match self {
            Spec::Tokens { sampler, decoder } => Spec::Tokens {
                sampler: batched(sampler, batch, drop_last)?,
                decoder: *decoder,
            },
            Spec::Records { sampler } => Spec::Records {
                sampler: batched(sampler, batch, drop_last)?,
            },
        })
    }

    /// Batches per epoch for this rank (the same on every rank); 0 without a batch size.
    pub(crate) fn epoch_batches(&self) -> u64 {
        with_sampler!(self, s => s.epoch_batches()).unwrap_or(0)
    }

    /// The rank-agnostic state after this rank consumed `consumed` samples since `from`
    /// (the start of epoch 0 when `None`).
    pub(crate) fn checkpoint(
        &self,
        from: Option<&Checkpoint>,
        consumed: u64,
    ) -> pinring::Result<Checkpoint> {
        with_sampler!(self, s => match from {
            None => Ok(s.checkpoint(0, consumed)),
            Some(from) => s.checkpoint_after(from, consumed),
        })
    }

    /// Checks that this source can resume from `state`.
    pub(crate) fn check(&self, state: &Checkpoint) -> pinring::Result<()> {
        with_sampler!(self, s => s.check_checkpoint(state))
    }

    /// The epoch of the batch after `popped` batches delivered since `from` (the start
    /// when `None`), and how many batches its epoch has left.
    pub(crate) fn place(
        &self,
        from: Option<&Checkpoint>,
        popped: u64,
    ) -> pinring::Result<EpochPlace> {
        let per_epoch = self.epoch_batches().max(1);
        let (epoch, first) = match from {
            None => (0, per_epoch),
            Some(state) => (
                state.epoch,
                with_sampler!(self, s => s.batches_left(state))?.unwrap_or(0),
            ),
        };
        Ok(if popped < first {
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
        })
    }

    /// Starts a pipeline of backend `B` over this source, from `from` for `epochs`.
    pub(crate) fn start<B: Backend>(
        &self,
        config: Config<B>,
        from: Option<&Checkpoint>,
        epochs: Option<u64>,
    ) -> pinring::Result<Pipeline<B>> {
        match self {
            Spec::Tokens { sampler, decoder } => {
                Pipeline::new(config, *decoder, samples(sampler, from, epochs)?)
            }
            Spec::Records { sampler } => {
                Pipeline::new(config, RecordBytes, samples(sampler, from, epochs)?)
            }
        }
    }
}
