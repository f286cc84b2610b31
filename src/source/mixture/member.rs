//! [`Member`]: one source inside a mixture — its sampler as given, and the same sampler
//! with its order keyed by the mixture's seed, which the mixture walks.

use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::sampling::checkpoint::Checkpoint;
use crate::source::sampling::order::Order;
use crate::source::sampling::rng::mix64;
use crate::source::sampling::sampler::Sampler;
use crate::source::sampling::segmented::Segmented;

/// One source of a mixture.
pub(crate) struct Member<S> {
    /// The sampler as given: its checkpoints (with its own seed) and its locations.
    pub(crate) given: Sampler<S>,
    /// The sampler the mixture walks: the given one with its order keyed by the mixture's
    /// seed ([`keyed`]).
    pub(crate) walked: Sampler<S>,
    /// Samples in one epoch of its walk (`N`: world size 1, no batch size).
    pub(crate) epoch_len: u64,
}

/// `order` keyed by a mixture's `seed`: a shuffled or random order of seed `q` walks as
/// seed `q ^ mix64(seed)`, so that the mixture's seed and the source's own seed together
/// pick the order (seed 0 leaves every source's order as it is alone, since `mix64(0) =
/// 0`); the sequential order has no seed and stays.
pub(crate) fn keyed(order: Order, seed: u64) -> Order {
    match order {
        Order::Sequential => Order::Sequential,
        Order::Shuffled { seed: q } => Order::Shuffled {
            seed: q ^ mix64(seed),
        },
        Order::Random { seed: q } => Order::Random {
            seed: q ^ mix64(seed),
        },
    }
}

impl<S: Segmented + Clone> Member<S> {
    /// The member for `given` in a mixture of seed `seed`.
    pub(crate) fn new(given: Sampler<S>, seed: u64) -> Result<Self> {
        let walked = given
            .to_builder()
            .order(keyed(given.order(), seed))
            .build()?;
        let epoch_len = given.epoch_len();
        Ok(Member {
            given,
            walked,
            epoch_len,
        })
    }
}

impl<S: Segmented> Member<S> {
    /// Checks that `saved` is a state of this source as its sampler checks its own
    /// checkpoints, naming the source `index` in a mismatch; the count of its samples
    /// there (`epoch · N + consumed`).
    pub(crate) fn count_of(&self, saved: &Checkpoint, index: usize) -> Result<u64> {
        self.given.check_checkpoint(saved).map_err(|e| match e {
            crate::Error::Source(SourceError::CheckpointMismatch { what, saved, here }) => {
                SourceError::CheckpointMismatch {
                    what: format!("source {index}'s {what}"),
                    saved,
                    here,
                }
                .into()
            }
            other => other,
        })?;
        let count =
            u128::from(saved.epoch) * u128::from(self.epoch_len) + u128::from(saved.consumed);
        Ok(u64::try_from(count).unwrap_or(u64::MAX))
    }
}
