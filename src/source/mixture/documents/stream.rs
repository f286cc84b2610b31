//! [`MixedStream`]: a mixture's global document sequence from some position on — which
//! source each document comes from (the blend rule) and which of that source's documents
//! it is (the next of its own walk) — and [`walk_step`]: one step packed from it for every
//! rank, as [`Documents`](crate::source::Documents) packs a step from its own walk.

use super::inner::DocMixInner;
use super::piece::MixedPiece;
use crate::error::source::SourceError;
use crate::source::documents::by_count::DocsByCount;
use crate::source::documents::fill::Fill;
use crate::source::documents::index::BuiltBy;
use crate::source::documents::schedule::StepSizes;
use crate::source::documents::walk::Extent;
use crate::source::mixture::run_origin::RunOrigin;
use crate::source::mixture::walk::Walk;

/// The mixture's documents from a run's origin on, one after another.
pub(crate) struct MixedStream {
    /// Which source each position takes, and that source's count.
    walk: Walk,
    /// Each source's documents by count.
    sources: Vec<DocsByCount>,
}

impl MixedStream {
    /// The documents of `inner`'s run from `origin`; shards the walk reaches that no one
    /// indexed yet are indexed as `by`.
    pub(crate) fn new(inner: &DocMixInner, origin: &RunOrigin, by: BuiltBy) -> Self {
        let sources: Vec<DocsByCount> = inner
            .members
            .iter()
            .map(|m| DocsByCount::new(&m.walked, by))
            .collect();
        // A stop rule counts every source's documents up front (build indexes every shard
        // for it); without one, the epoch lengths are never asked for.
        let epoch_lens = sources
            .iter()
            .map(|s| s.known_epoch_len().unwrap_or(u64::MAX))
            .collect();
        MixedStream {
            walk: origin.walk(&inner.settings.norm, inner.settings.stop, epoch_lens),
            sources,
        }
    }

    /// The next document: its source and its place; `None` where the stop rule ends the
    /// stream (then for good). A shard that cannot be indexed is its error.
    pub(crate) fn next(&mut self) -> Result<Option<(u16, Extent)>, SourceError> {
        let Some((s, n)) = self.walk.next() else {
            return Ok(None);
        };
        let (_, extent) = self.sources[s].get(n)?;
        Ok(Some((s as u16, extent)))
    }

    /// The global position of the next document.
    pub(crate) fn position(&self) -> u64 {
        self.walk.position()
    }

    /// The walk as it stands (to come back to).
    pub(crate) fn walk(&self) -> &Walk {
        &self.walk
    }

    /// Each source's documents by count.
    pub(crate) fn sources_mut(&mut self) -> &mut [DocsByCount] {
        &mut self.sources
    }
}

/// One step walked for every rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct StepWalked {
    /// The most pieces any rank packs, and the first rank that packs that many.
    pub(crate) most_pieces: (u64, u64),
    /// The global position where the step's documents start.
    pub(crate) start: u64,
}

/// Walks one step of `sizes` for `world` ranks from the stream's position: rank after
/// rank, each filling its `N + 1` tokens with the next documents ([`Fill`]). Keeps `rank`'s
/// pieces in `keep` (its first `cap` of them: a rank that needs more is an error anyway),
/// when given. `None` when the stream ends inside the step (the step is dropped).
pub(crate) fn walk_step(
    stream: &mut MixedStream,
    sizes: StepSizes,
    world: u64,
    rank: u64,
    mut keep: Option<&mut Vec<MixedPiece>>,
    cap: usize,
) -> Result<Option<StepWalked>, SourceError> {
    let start = stream.position();
    let mut most_pieces = (0, 0);
    for r in 0..world {
        let mut fill = Fill::new(sizes);
        let mut count = 0u64;
        while !fill.is_full() {
            let Some((source, extent)) = stream.next()? else {
                return Ok(None);
            };
            let len = fill.take(extent.tokens());
            count += 1;
            if r == rank {
                if let Some(list) = keep.as_deref_mut().filter(|l| l.len() < cap) {
                    list.push(MixedPiece {
                        source,
                        piece: extent.piece(len),
                    });
                }
            }
        }
        if count > most_pieces.0 {
            most_pieces = (count, r);
        }
    }
    Ok(Some(StepWalked { most_pieces, start }))
}
