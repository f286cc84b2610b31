//! [`BosIndex`]: where every shard's documents start, built once per shard and kept, by
//! whoever needs it first — the build or resume (up front), the thread ahead of the walk,
//! or the walk itself (a step then waited) — and [`IndexStats`], which says who built what.

use std::sync::Arc;

use super::cache::IndexCache;
use super::problem::{largest, DocumentProblem};
use super::scan::bos_positions;
use crate::error::source::SourceError;
use crate::source::tokens::shard::TokenShard;
use crate::source::tokens::shards::TokenShards;
use crate::sync::native::{AtomicU64, Mutex, OnceLock, Ordering};

/// Who built a shard's index. (Public only as an argument of a mixture's hidden member;
/// nothing outside the crate can name it.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltBy {
    /// The build, a resume or a checkpoint: before any step is asked for.
    Start,
    /// The thread that indexes ahead of the walk.
    Ahead,
    /// The walk, for a step that needed it: the step waited.
    Walk,
}

/// How a source's shards were indexed so far:
/// [`Documents::index_stats`](crate::source::Documents::index_stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct IndexStats {
    /// Shards in the source.
    pub shards: u64,
    /// Shards indexed so far.
    pub indexed: u64,
    /// Of those, indexed before any step was asked for: at `build`, `iter_from` or a
    /// checkpoint call (every shard in shuffled order).
    pub at_start: u64,
    /// Of those, indexed by the thread ahead of the walk (sequential order), off every
    /// step's path.
    pub ahead: u64,
    /// Of those, indexed by the walk itself because the thread ahead had not got there:
    /// a step waited for it (0 in a healthy run).
    pub on_walk: u64,
    /// Of the shards indexed, those whose index came from the
    /// [`index_cache`](crate::source::DocumentsBuilder::index_cache) rather than a scan.
    pub from_cache: u64,
}

/// Every shard's index: the positions of its `bos` tokens, and where its tokens start
/// among all shards'.
pub(crate) struct BosIndex {
    shards: Vec<Arc<TokenShard>>,
    bos: u32,
    /// Whether each shard's document starts come from its own index file (Megatron's
    /// `.idx`, datatrove's `.ds.index`) rather than a scan for `bos` (then
    /// [`FILE_INDEX_BOS`](super::builder::FILE_INDEX_BOS)).
    from_files: bool,
    /// Shard `s`'s first token's offset among all shards' tokens.
    first_token: Box<[u64]>,
    /// Shard `s`'s `bos` positions, once built (never empty: a shard without is an error),
    /// and whether they came from the cache.
    built: Box<[OnceLock<Built>]>,
    /// Held while shard `s` is built, so that it is scanned once: a second builder waits
    /// for the first, then finds it built (or builds it itself if the first failed).
    building: Box<[Mutex<()>]>,
    /// Where indexes are kept across runs, if anywhere.
    cache: Option<IndexCache>,
    /// Shards built by each [`BuiltBy`], in its order. Statistics only (relaxed): they
    /// pair with nothing.
    counts: [AtomicU64; 3],
    /// Shards whose index came from the cache. Statistics only (relaxed): it pairs with
    /// nothing.
    cached: AtomicU64,
}

/// A shard's index, and where it came from.
struct Built {
    positions: Box<[u32]>,
    from_cache: bool,
}

impl std::fmt::Debug for BosIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BosIndex")
            .field("shards", &self.shards.len())
            .field("bos", &self.bos)
            .field("stats", &self.stats())
            .finish()
    }
}

impl BosIndex {
    /// An index of `shards` for `bos` (or, `from_files`, from each shard's own index
    /// file), nothing built yet, kept across runs in `cache` if given. A shard whose format
    /// cannot hold `bos` (when scanned for it) is
    /// [`DocumentProblem::BosOutOfRange`], one of more tokens than a `u32` position places
    /// [`DocumentProblem::TooManyTokens`], naming it.
    pub(super) fn new(
        shards: &TokenShards,
        bos: u32,
        from_files: bool,
        cache: Option<IndexCache>,
    ) -> Result<Self, SourceError> {
        let shards = shards.shards().to_vec();
        if let Some(s) = shards
            .iter()
            .find(|s| !from_files && u64::from(bos) > largest(s.format()))
        {
            return Err(SourceError::file(
                s.path(),
                DocumentProblem::BosOutOfRange {
                    bos,
                    format: s.format(),
                },
            ));
        }
        let most = u64::from(u32::MAX);
        if let Some(s) = shards.iter().find(|s| s.len() as u64 > most) {
            let tokens = s.len() as u64;
            return Err(SourceError::file(
                s.path(),
                DocumentProblem::TooManyTokens { tokens, most },
            ));
        }
        let mut first_token = Vec::with_capacity(shards.len());
        let mut total = 0u64;
        for s in &shards {
            first_token.push(total);
            total += s.len() as u64;
        }
        Ok(BosIndex {
            built: shards.iter().map(|_| OnceLock::new()).collect(),
            building: shards.iter().map(|_| Mutex::new(())).collect(),
            shards,
            bos,
            from_files,
            first_token: first_token.into(),
            cache,
            counts: Default::default(),
            cached: AtomicU64::new(0),
        })
    }

    /// Shards.
    pub(super) fn shards(&self) -> usize {
        self.shards.len()
    }

    /// Shard `s`.
    pub(crate) fn shard(&self, s: usize) -> &Arc<TokenShard> {
        &self.shards[s]
    }

    /// Tokens in shard `s`.
    pub(super) fn tokens(&self, s: usize) -> u64 {
        self.shards[s].len() as u64
    }

    /// Shard `s`'s first token's offset among all shards' tokens.
    pub(super) fn first_token(&self, s: usize) -> u64 {
        self.first_token[s]
    }

    /// The shard holding global token `token` (its offset over the shards' tokens in
    /// order), and the token's index in it; `None` past the last shard's end.
    pub(super) fn shard_at(&self, token: u64) -> Option<(usize, u64)> {
        let s = self.first_token.partition_point(|&t| t <= token).checked_sub(1)?;
        let at = token - self.first_token[s];
        (at < self.tokens(s)).then_some((s, at))
    }

    /// Shard `s`'s `bos` positions, if built.
    pub(super) fn get(&self, s: usize) -> Option<&[u32]> {
        self.built.get(s)?.get().map(|b| &*b.positions)
    }

    /// The `bos` token documents start with.
    pub(crate) fn bos(&self) -> u32 {
        self.bos
    }

    /// Whether the documents come from the shards' own index files, so that no token
    /// marks their starts (a piece's first token is not checked against `bos`).
    pub(crate) fn uses_file_indexes(&self) -> bool {
        self.from_files
    }

    /// The error for a piece that the index says starts a document of shard `s` at token
    /// `at`, where the shard holds `found`, not `bos`: the index is wrong for the shard as
    /// it is now. One from the cache is removed from it first, so that the next build scans
    /// the shard again; the error names it.
    pub(crate) fn not_a_start(&self, s: usize, at: u64, found: u32) -> SourceError {
        let shard = &self.shards[s];
        let from_cache = self.built[s].get().is_some_and(|b| b.from_cache);
        // Whether it came from the cache or was scanned (and stored) this run, the entry
        // is wrong for the shard now.
        let entry = self.cache.as_ref().and_then(|c| c.forget(shard, self.bos));
        let cache = entry.filter(|_| from_cache);
        SourceError::file(
            shard.path(),
            DocumentProblem::NotADocumentStart {
                at,
                found,
                bos: self.bos,
                cache,
            },
        )
    }

    /// Shard `s`'s `bos` positions, built now by `by` if no one has (waiting for a builder
    /// already at it). A shard without a `bos` token is [`DocumentProblem::NoBos`]; a
    /// shard that changed since it was opened is the read's [`SourceError::Read`].
    pub(super) fn ensure(&self, s: usize, by: BuiltBy) -> Result<&[u32], SourceError> {
        if let Some(b) = self.get(s) {
            return Ok(b);
        }
        let _building = self.building[s]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(b) = self.get(s) {
            return Ok(b);
        }
        let shard = &self.shards[s];
        // A format with an index of its documents (Megatron's, datatrove's) gives their
        // starts itself: read, never scanned or cached.
        let own = if self.from_files { shard.document_starts() } else { None };
        let (positions, from_cache) = match own {
            Some(starts) => (starts?, false),
            None => {
                let scan = || {
                    let positions = bos_positions(shard, self.bos)?;
                    if positions.is_empty() {
                        return Err(SourceError::file(
                            shard.path(),
                            DocumentProblem::NoBos { bos: self.bos },
                        ));
                    }
                    Ok(positions)
                };
                match &self.cache {
                    Some(cache) => cache.load_or_build(shard, self.bos, scan)?,
                    None => (scan()?, false),
                }
            }
        };
        if from_cache {
            self.cached.fetch_add(1, Ordering::Relaxed);
        }
        let built = self.built[s].get_or_init(|| Built {
            positions: positions.into_boxed_slice(),
            from_cache,
        });
        self.counts[by as usize].fetch_add(1, Ordering::Relaxed);
        Ok(&built.positions)
    }

    /// Who built what so far.
    pub(super) fn stats(&self) -> IndexStats {
        let count = |by: BuiltBy| self.counts[by as usize].load(Ordering::Relaxed);
        IndexStats {
            shards: self.shards.len() as u64,
            indexed: self.built.iter().filter(|b| b.get().is_some()).count() as u64,
            at_start: count(BuiltBy::Start),
            ahead: count(BuiltBy::Ahead),
            on_walk: count(BuiltBy::Walk),
            from_cache: self.cached.load(Ordering::Relaxed),
        }
    }
}
