//! [`DocMember`]: a source of packed documents inside a mixture — its builder as given,
//! and the source as the mixture walks it — as a [`Member`]: its `n`-th document by count
//! ([`DocsByCount`]), its checkpoint before it, and a step packed from the mixed document
//! stream for every rank; [`DocPacking`], how the mixture packs its steps.

use std::fmt;

use super::member::{keyed_seed, naming_source, Member, ShapeDifference};
use super::mixed_piece::MixedPiece;
use super::piece_lists::PieceLists;
use super::settings::MixSettings;
use super::stream::Stream;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::locate::Location;
use crate::row::Row;
use crate::source::documents::builder::DocumentsBuilder;
use crate::source::documents::by_count::DocsByCount;
use crate::source::documents::checkpoint::DocumentsCheckpoint;
use crate::source::documents::fill::Fill;
use crate::source::documents::index::BuiltBy;
use crate::source::documents::layout::Layout;
use crate::source::documents::order::DocOrder;
use crate::source::documents::packed::Documents;
use crate::source::documents::packing::Packing;
use crate::source::documents::schedule::Schedule;
use crate::source::state::State;

/// One source of a mixture of documents. (Public only as the hidden member of a
/// [`Mixable`](super::mixable::Mixable) kind; nothing outside the crate can name it.)
#[derive(Debug)]
pub struct DocMember {
    /// The source's builder, as given.
    pub(crate) given: DocumentsBuilder,
    /// The source as the mixture walks it: its order keyed by the mixture's seed
    /// ([`keyed`]), the mixture's schedule and layout, world size 1.
    pub(crate) walked: Documents,
    /// Its order as given: what its states record.
    pub(crate) given_order: DocOrder,
}

/// How a mixture of documents packs its steps, shared with its steps and decoder.
pub struct DocPacking {
    /// The step sizes.
    pub(crate) schedule: Schedule,
    /// The fields of a step and their places in its slot.
    pub(crate) layout: Layout,
    /// The `bos` of every source.
    pub(crate) bos: u32,
    /// The lists a step's pieces are kept in, handed out and taken back.
    pub(crate) lists: PieceLists,
}

impl fmt::Debug for DocPacking {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DocPacking")
            .field("schedule", &self.schedule)
            .field("bos", &self.bos)
            .finish_non_exhaustive()
    }
}

/// One step walked for every rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepWalked {
    /// The most pieces any rank packs, and the first rank that packs that many.
    pub(crate) most_pieces: (u64, u64),
    /// The global position where the step's documents start.
    pub(crate) start: u64,
}

/// `order` keyed by a mixture's `seed` ([`keyed_seed`]), as a mixture of samplers keys its
/// sources' orders; the sequential order has no seed and stays.
pub(crate) fn keyed(order: DocOrder, seed: u64) -> DocOrder {
    match order {
        DocOrder::Sequential => DocOrder::Sequential,
        DocOrder::Shuffled { seed: q } => DocOrder::Shuffled {
            seed: keyed_seed(q, seed),
        },
    }
}

impl Member for DocMember {
    type Given = DocumentsBuilder;
    type Record = DocumentsCheckpoint;
    type Packing = DocPacking;
    type PackingGiven = Packing;
    type Reader = DocsByCount;
    /// This rank's pieces of the step.
    type Kept = Vec<MixedPiece>;
    type Walked = StepWalked;

    const KIND: &'static str = "a mixture of packed documents";
    const STEPS_NEED_BATCH_SIZE: bool = false;

    fn own_setting(source: &DocumentsBuilder) -> Option<&'static str> {
        source.mixture_setting()
    }

    /// The width of their tokens (in bytes), or their `bos` (sources of one tokenizer).
    fn shape(first: &DocumentsBuilder, source: &DocumentsBuilder) -> Option<ShapeDifference> {
        let width = |b: &DocumentsBuilder| b.format().token_bytes() as u64;
        let bos = |b: &DocumentsBuilder| u64::from(b.resolved_bos());
        if width(source) != width(first) {
            Some(("token width", width(first), width(source)))
        } else if bos(source) != bos(first) {
            Some(("bos", bos(first), bos(source)))
        } else {
            None
        }
    }

    fn packing_given(packing: &DocPacking) -> Packing {
        Packing::of(&packing.schedule, &packing.layout)
    }

    fn given(&self) -> &DocumentsBuilder {
        &self.given
    }

    fn reader(&self, by: BuiltBy) -> DocsByCount {
        DocsByCount::new(&self.walked, by)
    }

    /// Known once every shard is counted: with [`Stop::Never`](super::stop::Stop::Never)
    /// the walk never asks for it before, and a stop rule indexes every shard at build.
    fn epoch_len(&self, reader: &DocsByCount) -> u64 {
        reader.known_epoch_len().unwrap_or(u64::MAX)
    }

    /// Checks that `saved` is a state of this source (the same dataset, `bos`, order as
    /// given, seed, schedule and `max_docs`, a cursor inside it, no skipped steps of its
    /// own — the mixture's are in the mixture's state; not its step or world size); the
    /// count of its documents before the cursor.
    fn count_of(&self, saved: &DocumentsCheckpoint, index: usize) -> Result<u64> {
        let mismatch = |what: &str, saved: String, here: String| -> crate::error::Error {
            SourceError::DocumentsCheckpointMismatch {
                what: format!("source {index}'s {what}"),
                saved,
                here,
            }
            .into()
        };
        if !saved.skip.is_empty() {
            return Err(mismatch(
                "skipped steps",
                format!("{:?}", saved.skip),
                "none (a mixture's skipped steps are the `skip` of its own state)".into(),
            ));
        }
        let given_seed = self.given_order.seed();
        if saved.seed != given_seed {
            let (saved, here) = (saved.seed.to_string(), given_seed.to_string());
            return Err(mismatch("the seed", saved, here));
        }
        // The walk's own checkpoints record the keyed seed.
        let mut walked = saved.clone();
        walked.seed = self.walked.order().seed();
        (self.walked.check_checkpoint(&walked)).map_err(|e| naming_source(index, e))?;
        let mut docs = DocsByCount::new(&self.walked, BuiltBy::Start);
        Ok(docs.count(saved.cursor())?)
    }

    /// The checkpoint of its walk before its `n`-th document, with its order as given, the
    /// mixture's `step` and `world` size.
    fn record(
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

    /// The document of the row's id, its length the row's tokens.
    fn locate(&self, row: &Row) -> Option<Location> {
        let at = self.walked.location(row.id, u64::from(row.len))?;
        Some(Location {
            source: row.source,
            ..at
        })
    }

    /// Rank after rank, each fills its `N + 1` tokens with the next documents of the
    /// stream ([`Fill`], the rule one source's walk packs by), keeping this rank's pieces
    /// (its first `max_docs` of them: a rank that needs more is an error anyway).
    fn walk_step(
        stream: &mut Stream<DocsByCount>,
        settings: &MixSettings,
        packing: &DocPacking,
        step: u64,
        mut keep: Option<&mut Vec<MixedPiece>>,
    ) -> Result<Option<StepWalked>, SourceError> {
        let sizes = packing.schedule.at(step);
        let (world, rank) = (settings.run.world, settings.run.rank);
        let cap = packing.lists.room();
        let start = stream.walk.position();
        let mut most_pieces = (0, 0);
        for r in 0..world {
            let mut fill = Fill::new(sizes);
            let mut count = 0u64;
            while !fill.is_full() {
                let Some((s, n)) = stream.walk.next() else {
                    return Ok(None);
                };
                let (_, extent) = stream.readers[s].get(n)?;
                let len = fill.take(extent.tokens());
                count += 1;
                if r == rank
                    && let Some(list) = keep.as_deref_mut().filter(|l| l.len() < cap)
                {
                    list.push(MixedPiece {
                        source: s as u16,
                        piece: extent.piece(len),
                    });
                }
            }
            if count > most_pieces.0 {
                most_pieces = (count, r);
            }
        }
        Ok(Some(StepWalked { most_pieces, start }))
    }

    /// A rank that needs more documents than `cu_seqlens` holds is
    /// [`SourceError::TooManyDocuments`](crate::source::SourceError::TooManyDocuments), on
    /// every rank alike.
    fn check_step(packing: &DocPacking, step: u64, walked: &StepWalked) -> Result<(), SourceError> {
        let sizes = packing.schedule.at(step);
        sizes.check_pieces(step, walked.most_pieces)
    }

    fn state(record: DocumentsCheckpoint) -> State {
        State::Documents(record)
    }

    fn record_of(state: &State) -> Option<&DocumentsCheckpoint> {
        match state {
            State::Documents(c) => Some(c),
            _ => None,
        }
    }

    fn debug_packing(packing: &DocPacking, out: &mut fmt::DebugStruct<'_, '_>) {
        out.field("schedule", &packing.schedule);
    }
}
