//! [`WindowMember`]: a sampler of windows inside a mixture — its sampler as given, and the
//! same sampler with its order keyed by the mixture's seed, which the mixture walks — as a
//! [`Member`]: its `n`-th sample of its own walk, its checkpoint at count `n`, and a step
//! of the mixed sequence cut into `W·B` positions.

use std::fmt;

use super::member::{keyed_seed, naming_source, Member, ShapeDifference};
use super::settings::MixSettings;
use super::stop::Stop;
use super::stream::Stream;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::locate::Location;
use crate::row::Row;
use crate::source::documents::index::BuiltBy;
use crate::source::sampling::checkpoint::Checkpoint;
use crate::source::sampling::order::Order;
use crate::source::sampling::sampler::Sampler;
use crate::source::sampling::samples::Samples;
use crate::source::sampling::segmented::Segmented;
use crate::source::state::State;

/// One sampler of a mixture. (Public only as the hidden member of a
/// [`Mixable`](super::mixable::Mixable) kind; nothing outside the crate can name it.)
pub struct WindowMember<S> {
    /// The sampler as given: its checkpoints (with its own seed) and its locations.
    pub(crate) given: Sampler<S>,
    /// The sampler the mixture walks: the given one with its order keyed by the mixture's
    /// seed ([`keyed`]).
    walked: Sampler<S>,
    /// Samples in one epoch of its walk (`N`: world size 1, no batch size).
    pub(crate) epoch_len: u64,
}

impl<S> fmt::Debug for WindowMember<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WindowMember")
            .field("given", &self.given)
            .field("epoch_len", &self.epoch_len)
            .finish_non_exhaustive()
    }
}

/// `order` keyed by a mixture's `seed` ([`keyed_seed`]); the sequential order has no seed
/// and stays.
fn keyed(order: Order, seed: u64) -> Order {
    match order {
        Order::Sequential => Order::Sequential,
        Order::Shuffled { seed: q } => Order::Shuffled {
            seed: keyed_seed(q, seed),
        },
        Order::Random { seed: q } => Order::Random {
            seed: keyed_seed(q, seed),
        },
    }
}

impl<S: Segmented + Clone> WindowMember<S> {
    /// The member for `given` in a mixture of seed `seed`.
    pub(crate) fn new(given: Sampler<S>, seed: u64) -> Result<Self> {
        let walked = given
            .to_builder()
            .order(keyed(given.order(), seed))
            .build()?;
        let epoch_len = given.epoch_len();
        Ok(WindowMember {
            given,
            walked,
            epoch_len,
        })
    }
}

impl<S: Segmented> WindowMember<S> {
    /// Its `n`-th sample: sample `n mod N` of epoch `⌊n / N⌋` of its walk (`reader` keeps
    /// the epoch's permutation).
    pub(crate) fn window(&self, reader: &mut Samples<S>, n: u64) -> S::Window {
        reader.window_at(n / self.epoch_len, n % self.epoch_len)
    }
}

impl<S: Segmented> Member for WindowMember<S> {
    type Given = Sampler<S>;
    type Record = Checkpoint;
    type Packing = ();
    type PackingGiven = ();
    type Reader = Samples<S>;
    /// This rank's samples of the step: (source, its sample's count).
    type Kept = Vec<(u16, u64)>;
    type Walked = ();

    const KIND: &'static str = "a mixture of token windows or records";
    const STEPS_NEED_BATCH_SIZE: bool = true;

    /// Its ranks, batch size, start step or skipped steps.
    fn own_setting(source: &Sampler<S>) -> Option<&'static str> {
        if source.world_size() != 1 {
            Some("rank/world_size")
        } else if source.batch_size().is_some() {
            Some("batch_size")
        } else if source.start_step() != 0 {
            Some("start_step")
        } else if !source.skip_steps().is_empty() {
            Some("skip_steps")
        } else {
            None
        }
    }

    /// Their window, or their record size.
    fn shape(first: &Sampler<S>, source: &Sampler<S>) -> Option<ShapeDifference> {
        let bytes = |s: &Sampler<S>| s.fingerprint().record_bytes;
        if source.window() != first.window() {
            Some(("window", first.window(), source.window()))
        } else if bytes(source) != bytes(first) {
            Some(("record size", bytes(first), bytes(source)))
        } else {
            None
        }
    }

    fn packing_given(_: &()) {}

    fn given(&self) -> &Sampler<S> {
        &self.given
    }

    fn reader(&self, _: BuiltBy) -> Samples<S> {
        self.walked.iter()
    }

    fn epoch_len(&self, _: &Samples<S>) -> u64 {
        self.epoch_len
    }

    /// Checks `saved` as its sampler checks its own checkpoints; the count of its samples
    /// there (`epoch · N + consumed`).
    fn count_of(&self, saved: &Checkpoint, index: usize) -> Result<u64> {
        (self.given.check_checkpoint(saved)).map_err(|e| naming_source(index, e))?;
        let count =
            u128::from(saved.epoch) * u128::from(self.epoch_len) + u128::from(saved.consumed);
        Ok(u64::try_from(count).unwrap_or(u64::MAX))
    }

    /// Its checkpoint at world size 1 after `n` samples.
    fn record(
        &self,
        _: &mut Samples<S>,
        n: u64,
        _: u64,
        _: u64,
    ) -> Result<Checkpoint, SourceError> {
        Ok(self.given.checkpoint(0, n))
    }

    /// The sample of the row's id, as its sampler places it.
    fn locate(&self, row: &Row) -> Option<Location> {
        self.given.location(row.id, row.source)
    }

    /// The step's `W·B` positions (`W` without a batch size), this rank's kept in order.
    fn walk_step(
        stream: &mut Stream<Self::Reader>,
        s: &MixSettings,
        _: &(),
        _: u64,
        keep: Option<&mut Vec<(u16, u64)>>,
    ) -> Result<Option<()>, SourceError> {
        let (world, rank) = (s.run.world, s.run.rank);
        let chunk = world.saturating_mul(s.run.batch.unwrap_or(1));
        let walk = &mut stream.walk;
        let Some(plan) = keep else {
            // Nothing kept: the blend alone, unless a stop rule may end the walk here.
            if s.stop == Stop::Never {
                walk.skip(chunk);
                return Ok(Some(()));
            }
            return Ok((walk.skip_within(chunk) == chunk).then_some(()));
        };
        plan.clear();
        for j in 0..chunk {
            let Some((source, n)) = walk.next() else {
                plan.clear();
                return Ok(None);
            };
            if j % world == rank {
                plan.push((source as u16, n));
            }
        }
        Ok(Some(()))
    }

    fn check_step(_: &(), _: u64, _: &()) -> Result<(), SourceError> {
        Ok(())
    }

    fn state(record: Checkpoint) -> State {
        State::Windows(record)
    }

    fn record_of(state: &State) -> Option<&Checkpoint> {
        match state {
            State::Windows(c) => Some(c),
            _ => None,
        }
    }
}
