//! [`DocMixInner`]: what a mixture of packed documents shares with its steps and decoder —
//! its sources as walked, the settings, the packing — and [`DocMember`], one source.

use super::lists::PieceLists;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::documents::builder::DocumentsBuilder;
use crate::source::documents::by_count::DocsByCount;
use crate::source::documents::checkpoint::DocumentsCheckpoint;
use crate::source::documents::index::BuiltBy;
use crate::source::documents::layout::Layout;
use crate::source::documents::order::DocOrder;
use crate::source::documents::packed::Documents;
use crate::source::documents::schedule::Schedule;
use crate::source::mixture::settings::{MixSettings, MixShared};
use crate::source::mixture::state::MixtureState;
use crate::source::sampling::rng::mix64;

/// What a mixture of packed documents shares with its iterators, steps and decoder.
/// (Public only as the hidden [`Mixable::Shared`](crate::source::Mixable) of
/// [`Documents`]; nothing outside the crate can name it.)
pub struct DocMixInner {
    pub(crate) members: Vec<DocMember>,
    pub(crate) settings: MixSettings,
    /// The step sizes.
    pub(crate) schedule: Schedule,
    /// The fields of a step and their places in its slot.
    pub(crate) layout: Layout,
    /// The `bos` of every source.
    pub(crate) bos: u32,
    /// The lists a step's pieces are kept in, handed out and taken back.
    pub(crate) lists: PieceLists,
}

impl std::fmt::Debug for DocMixInner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocMixInner")
            .field("sources", &self.members.len())
            .field("weights", &self.settings.weights)
            .finish_non_exhaustive()
    }
}

impl MixShared for DocMixInner {
    type Part = DocumentsCheckpoint;

    fn settings(&self) -> &MixSettings {
        &self.settings
    }

    fn sources(&self) -> usize {
        self.members.len()
    }

    fn check_run(&self, state: &MixtureState<DocumentsCheckpoint>) -> Result<Vec<u64>> {
        self.settings
            .checked_counts(state, &self.members, DocMember::count_of)
    }
}

/// One source of a mixture of documents.
pub(crate) struct DocMember {
    /// The source's builder, as given.
    pub(crate) given: DocumentsBuilder,
    /// The source as the mixture walks it: its order keyed by the mixture's seed
    /// ([`keyed`]), the mixture's schedule and layout, world size 1.
    pub(crate) walked: Documents,
    /// Its order as given: what its states record.
    pub(crate) given_order: DocOrder,
}

/// `order` keyed by a mixture's `seed`: a shuffled order of seed `q` walks as seed
/// `q ^ mix64(seed)` (seed 0 leaves it as it is, since `mix64(0) = 0`), as a mixture of
/// samplers keys its sources' orders; the sequential order has no seed and stays.
pub(crate) fn keyed(order: DocOrder, seed: u64) -> DocOrder {
    match order {
        DocOrder::Sequential => DocOrder::Sequential,
        DocOrder::Shuffled { seed: q } => DocOrder::Shuffled {
            seed: q ^ mix64(seed),
        },
    }
}

impl DocMember {
    /// Its state after `n` of its documents (their places found by `docs`): the checkpoint
    /// of its walk before its `n`-th document, with its order as given, the mixture's
    /// `step` and `world` size.
    pub(crate) fn checkpoint(
        &self,
        docs: &mut DocsByCount,
        n: u64,
        step: u64,
        world: u64,
    ) -> Result<DocumentsCheckpoint, SourceError> {
        let cursor = docs.cursor(n)?;
        let mut c = self.walked.checkpoint_at(cursor, step);
        c.seed = self.given_order.seed();
        c.world_size = world;
        Ok(c)
    }

    /// Checks that `saved` is a state of this source (the same dataset, `bos`, order as
    /// given, seed, schedule and `max_docs`, a cursor inside it, no skipped steps of its
    /// own — the mixture's are in the mixture's state; not its step or world size),
    /// naming the source `index` in a mismatch; the count of its documents before the
    /// cursor.
    pub(crate) fn count_of(&self, saved: &DocumentsCheckpoint, index: usize) -> Result<u64> {
        let name = |what: String| format!("source {index}'s {what}");
        if !saved.skip.is_empty() {
            return Err(SourceError::DocumentsCheckpointMismatch {
                what: name("skipped steps".into()),
                saved: format!("{:?}", saved.skip),
                here: "none (a mixture's skipped steps are the `skip` of its own state)".into(),
            }
            .into());
        }
        let given_seed = self.given_order.seed();
        if saved.seed != given_seed {
            return Err(SourceError::DocumentsCheckpointMismatch {
                what: name("the seed".into()),
                saved: saved.seed.to_string(),
                here: given_seed.to_string(),
            }
            .into());
        }
        // The walk's own checkpoints record the keyed seed.
        let mut walked = saved.clone();
        walked.seed = self.walked.order().seed();
        self.walked.check_checkpoint(&walked).map_err(|e| match e {
            crate::Error::Source(SourceError::DocumentsCheckpointMismatch {
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
        })?;
        let mut docs = DocsByCount::new(&self.walked, BuiltBy::Start);
        Ok(docs.count(saved.cursor())?)
    }
}
