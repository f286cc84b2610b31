//! [`Member`]: what one kind of source does inside a mixture — all of a mixture that
//! differs between its kinds: the rules its builder checks the sources by, each source's
//! items by count and its record in the mixture's state at a count, what places its rows,
//! how a step of the mixed sequence is walked (and packed), and its state as a
//! [`State`]. The rest of a mixture — the blend and the walk of the global sequence with
//! its stop rule, the state and its checks, the builder's settings, `Locate` and the
//! `Source` impl — is written once over it. Samplers of windows
//! ([`WindowMember`](super::windows_member::WindowMember)) and packed documents
//! ([`DocMember`](super::documents_member::DocMember)) implement it.

use std::fmt;

use super::settings::MixSettings;
use super::state::SourceRecord;
use super::stream::Stream;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::locate::Location;
use crate::row::Row;
use crate::source::documents::index::BuiltBy;
use crate::source::sampling::rng::mix64;
use crate::source::state::State;

/// How a source's items differ from source 0's: what differs, source 0's value and the
/// source's (a [`MixtureProblem::Shape`](crate::error::mixture::MixtureProblem::Shape)).
pub(crate) type ShapeDifference = (&'static str, u64, u64);

/// One source of a mixture of some kind, and what that kind does differently. (Public
/// only as the hidden member of a [`Mixable`](super::mixable::Mixable) kind; nothing
/// outside the crate can name it.)
pub trait Member: Sized + Send + Sync + 'static {
    /// A source as the mixture's builder takes it: a sampler, or a documents builder.
    type Given: Clone + Send + Sync;
    /// A source's own state in the mixture's state, at its count.
    type Record: SourceRecord;
    /// How the mixture's steps are packed, shared by its iterators and decoder (nothing
    /// for windows: a step is a batch of samples).
    type Packing: Send + Sync;
    /// The packing as the builder holds it, before its check.
    type PackingGiven: Clone + Default + fmt::Debug;
    /// A source's items by count, with what a walk of them keeps (an epoch's permutation).
    type Reader: Send;
    /// This rank's part of a step, kept as the step is walked.
    type Kept: Send;
    /// What walking a step tells beyond its positions.
    type Walked;

    /// The kind, as a mismatch of states names it (`"a mixture of ..."`).
    const KIND: &'static str;
    /// Whether the steps are batches of a batch size (a start step and skipped steps
    /// need one), rather than items of their own.
    const STEPS_NEED_BATCH_SIZE: bool;

    /// The first setting `given` has that belongs to the mixture, if any.
    fn own_setting(given: &Self::Given) -> Option<&'static str>;

    /// Where `source`'s items differ from `first`'s, if they do.
    fn shape(first: &Self::Given, source: &Self::Given) -> Option<ShapeDifference>;

    /// The packing `packing` was checked from, so that checking it again gives the same.
    fn packing_given(packing: &Self::Packing) -> Self::PackingGiven;

    /// The source as given.
    fn given(&self) -> &Self::Given;

    /// Its items by count; shards not indexed yet that they reach are indexed as `by`.
    fn reader(&self, by: BuiltBy) -> Self::Reader;

    /// Its items in one epoch of its walk (`u64::MAX` where not known, which no stop rule
    /// then asks for).
    fn epoch_len(&self, reader: &Self::Reader) -> u64;

    /// Checks that `saved` is a state of this source, as the source checks its own,
    /// naming it source `index` in a mismatch; its count of items there.
    fn count_of(&self, saved: &Self::Record, index: usize) -> Result<u64>;

    /// Its state after `n` of its items (found by `reader`), in a mixture's run at step
    /// `step` on `world` ranks.
    fn record(
        &self,
        reader: &mut Self::Reader,
        n: u64,
        step: u64,
        world: u64,
    ) -> Result<Self::Record, SourceError>;

    /// Where the row of this source `row` lies (its `source` is this source's index).
    fn locate(&self, row: &Row) -> Option<Location>;

    /// Walks step `step` of a run with `settings` and `packing` from the stream's
    /// position, for every rank, keeping this rank's part in `keep` when given; `None`
    /// when the stop rule ends the sequence inside it (the step is dropped).
    fn walk_step(
        stream: &mut Stream<Self::Reader>,
        settings: &MixSettings,
        packing: &Self::Packing,
        step: u64,
        keep: Option<&mut Self::Kept>,
    ) -> Result<Option<Self::Walked>, SourceError>;

    /// Checks a delivered step, as walked, before it is counted (a step of documents that
    /// needs more of them than `cu_seqlens` holds is an error).
    fn check_step(
        packing: &Self::Packing,
        step: u64,
        walked: &Self::Walked,
    ) -> Result<(), SourceError>;

    /// Its record as a [`State`].
    fn state(record: Self::Record) -> State;

    /// Its record in `state`, where `state` is of this kind of source.
    fn record_of(state: &State) -> Option<&Self::Record>;

    /// Adds what the packing says to a mixture's `Debug`.
    fn debug_packing(packing: &Self::Packing, out: &mut fmt::DebugStruct<'_, '_>) {
        let _ = (packing, out);
    }
}

/// A source's own order seed `q` keyed by a mixture's `seed`: `q ^ mix64(seed)`, so that
/// the mixture's seed and the source's together pick the order (seed 0 leaves every
/// source's order as it is alone, since `mix64(0) = 0`).
pub(crate) fn keyed_seed(q: u64, seed: u64) -> u64 {
    q ^ mix64(seed)
}

/// `e`, an error checking source `index`'s own state: a mismatch's `what` becomes
/// "source `index`'s `what`".
pub(crate) fn naming_source(index: usize, e: crate::error::Error) -> crate::error::Error {
    let name = |what: String| format!("source {index}'s {what}");
    match e {
        crate::error::Error::Source(SourceError::CheckpointMismatch { what, saved, here }) => {
            SourceError::CheckpointMismatch {
                what: name(what),
                saved,
                here,
            }
            .into()
        }
        crate::error::Error::Source(SourceError::DocumentsCheckpointMismatch {
            what,
            saved,
            here,
        }) => SourceError::DocumentsCheckpointMismatch {
            what: name(what),
            saved,
            here,
        }
        .into(),
        other => other,
    }
}
