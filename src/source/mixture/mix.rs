//! [`Mixture`]: several sources of one kind mixed by weight into one global sequence,
//! sharded over ranks — what every kind does alike: its settings, its states' checks and
//! reweighting, and the place of a row ([`Locate`]).

use std::fmt;
use std::sync::Arc;

use super::inner::MixInner;
use super::member::Member;
use super::mixable::Mixable;
use super::settings::MixSettings;
use super::state::MixtureState;
use super::step_walk::StepWalk;
use super::stop::Stop;
use crate::error::Result;
use crate::locate::{Locate, Location};
use crate::row::Row;
use crate::source::documents::index::BuiltBy;

/// Samples from several sources of one kind — samplers of token windows, or of records —
/// mixed by weight into one global sequence that every rank shards, resumable on any
/// world size. (`Mixture<Documents>` mixes sources of packed documents document by
/// document with the same rule and state and packs them into steps: built by
/// [`Mixture::documents`](crate::source::Mixture::documents); what follows is
/// `Mixture<S>` over samplers of segments `S`: a mixture of [`TokenWindows`] is a
/// `Mixture<TokenShards>`, of records a `Mixture<FixedRecords>`. The two kinds are one
/// implementation, each kind's sources doing what differs: see [`Mixable`].)
///
/// [`TokenWindows`]: crate::source::TokenWindows
///
/// - **Which source**: position `g` of the global sequence comes from the source that
///   [`Blend`](crate::source::Blend) gives for the weights at `g` — a pure function of the
///   weights (and their history) and `g`, which keeps every source within one sample of
///   its share at every prefix.
/// - **Which sample**: a source's `n`-th sample is sample `n mod N` of epoch `⌊n / N⌋` of
///   its own walk (`N` its epoch length; its own order, keyed by the mixture's
///   [`seed`](crate::source::MixtureBuilder::seed); a fresh shuffle each epoch), so no
///   sample repeats within a source's epoch (with a shuffled or sequential order).
/// - **Ranks**: rank `r` of `W` takes positions `r, r + W, ...` of the run; with a batch
///   size `B`, step `k` is positions `k·W·B .. (k + 1)·W·B` on every rank.
/// - **State**: a [`MixtureState`] (the global count, each source's place, the weights'
///   history, the step and skipped steps) from
///   [`checkpoint_after`](Self::checkpoint_after); [`iter_from`](Self::iter_from) resumes
///   it on any rank, world size and batch size, so that across the runs every position is
///   delivered exactly once.
/// - **Rows**: [`MixedDecoder`](crate::source::MixedDecoder) decodes with the sources'
///   decoder and describes each row with its source index and its id within its source;
///   the mixture is a [`Locate`](crate::Locate) for [`Batch::locate`](crate::Batch::locate).
///
/// Cloning a mixture is cheap.
///
/// ```
/// use std::sync::Arc;
/// use pinring::source::{write_shard, Mixture, Order, TokenShards, TokenType, Tokens};
/// use pinring::{Config, Fence, Pipeline};
/// # let dir = std::env::temp_dir().join(format!("pinring-mixture-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// write_shard(dir.join("web.bin"), &[1; 4097])?;
/// write_shard(dir.join("code.bin"), &[2; 2049])?;
/// let source = |file: &str, seed| -> pinring::Result<_> {
///     TokenShards::open([dir.join(file)])?.windows(65).order(Order::Shuffled { seed }).build()
/// };
/// let mix = Mixture::builder([source("web.bin", 1)?, source("code.bin", 2)?])
///     .weights([0.75, 0.25])
///     .batch_size(8)
///     .build()?;
/// let decoder = mix.decoder(Tokens::new(TokenType::I32));
/// let config = Config::builder().batch_size(8).bytes_per_sample(65 * 4)
///     .locator(Arc::new(mix.clone())).build()?;
/// let mut pipeline = Pipeline::new(config, decoder, mix.iter().take(10 * 8))?;
/// let mut from_code = 0;
/// while let Some(batch) = pipeline.pop()? {
///     // Rows from source 1 hold 2s; the step is the batch's.
///     assert_eq!(batch.step(), Some(batch.seq()));
///     for (row, &source) in batch.row_sources().iter().enumerate() {
///         let first = i32::from_le_bytes(batch.bytes()[row * 260..][..4].try_into().unwrap());
///         assert_eq!(first, i32::from(source) + 1);
///         from_code += usize::from(source);
///     }
///     assert!(batch.locate()?.iter().all(|at| at.len == 65));
///     batch.release(Fence::Sync)?;
/// }
/// assert_eq!(from_code, 20); // a quarter of 80
/// println!("{}", pipeline.stats()); // each source's count and share
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Mixture<S: Mixable> {
    pub(crate) inner: Arc<MixInner<S::Member>>,
}

impl<S: Mixable> Clone for Mixture<S> {
    fn clone(&self) -> Self {
        Mixture {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Mixable> fmt::Debug for Mixture<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.settings();
        let mut d = f.debug_struct("Mixture");
        d.field("sources", &self.len())
            .field("weights", &i.weights)
            .field("seed", &i.seed)
            .field("stop", &i.stop)
            .field("run", &i.run);
        S::Member::debug_packing(&self.inner.packing, &mut d);
        d.finish()
    }
}

impl<S: Mixable> Mixture<S> {
    /// The mixture of `members` with `settings`, packed by `packing`.
    pub(crate) fn new(
        members: Vec<S::Member>,
        settings: MixSettings,
        packing: <S::Member as Member>::Packing,
    ) -> Self {
        Mixture {
            inner: Arc::new(MixInner {
                members,
                settings,
                packing,
            }),
        }
    }

    /// The settings.
    pub(crate) fn settings(&self) -> &MixSettings {
        &self.inner.settings
    }

    /// This rank's run from the start.
    pub(crate) fn run(&self) -> StepWalk<S::Member> {
        let fresh = self.settings().fresh(self.len());
        StepWalk::new(self.inner.clone(), fresh)
    }

    /// This rank's run resumed from `state`, checked as
    /// [`check_state`](Self::check_state) checks it.
    pub(crate) fn run_from(&self, state: &MixtureState<S::Record>) -> Result<StepWalk<S::Member>> {
        let origin = self.inner.origin(Some(state))?;
        Ok(StepWalk::new(self.inner.clone(), origin))
    }

    /// How many sources it mixes.
    pub fn len(&self) -> usize {
        self.inner.members.len()
    }

    /// Whether it mixes no source (never: `build` refuses that).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The weights, as given.
    pub fn weights(&self) -> &[f64] {
        &self.settings().weights
    }

    /// The weights normalized to sum to 1: each source's share of the global sequence
    /// (of samples, or of documents).
    pub fn shares(&self) -> &[f64] {
        &self.settings().norm
    }

    /// The mixture's seed.
    pub fn seed(&self) -> u64 {
        self.settings().seed
    }

    /// This mixture's rank.
    pub fn rank(&self) -> u64 {
        self.settings().run.rank
    }

    /// Ranks the global sequence is sharded over (each step shared among).
    pub fn world_size(&self) -> u64 {
        self.settings().run.world
    }

    /// When the mixture ends.
    pub fn stop(&self) -> Stop {
        self.settings().stop
    }

    /// The step a run begins at, at the earliest (0 when not set).
    pub fn start_step(&self) -> u64 {
        self.settings().run.start_step
    }

    /// The skipped steps, as sorted, disjoint half-open `(start, end)` ranges.
    pub fn skip_steps(&self) -> &[(u64, u64)] {
        self.settings().run.skip.ranges()
    }

    /// Checks that this mixture can resume from `state`: the same state version, seed,
    /// stop rule and number of sources, each source's part checked as that source checks
    /// its checkpoints (a sampler's: dataset, window, stride, order and its own seed;
    /// documents': [`SourceError::DocumentsCheckpointMismatch`] naming the source, about
    /// its dataset, `bos`, order as given and seed, and the mixture's schedule and
    /// `max_docs`, with a cursor inside the source), a consistent weights' history, and
    /// the weights in force the same as this mixture's (else
    /// [`SourceError::MixtureMismatch`] saying so: [`reweight`](Self::reweight) switches
    /// to this mixture's weights at the saved point). Rank, world size and batch size may
    /// differ.
    ///
    /// [`SourceError::MixtureMismatch`]: crate::source::SourceError::MixtureMismatch
    /// [`SourceError::DocumentsCheckpointMismatch`]: crate::source::SourceError::DocumentsCheckpointMismatch
    pub fn check_state(&self, state: &MixtureState<S::Record>) -> Result<()> {
        self.inner.origin(Some(state)).map(|_| ())
    }

    /// `state` with this mixture's weights from its point on: the rule applies them to
    /// the positions (samples, or documents) after `state.consumed`, counting from there,
    /// and the new span joins
    /// the history, so that a later resume reproduces the run. Build the mixture with the
    /// new weights (`to_builder().weights(...)`), reweight the saved state, and resume
    /// from the result. The state as it is when its weights are this mixture's already.
    ///
    /// ```
    /// use pinring::source::{write_shard, Mixture, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-reweight-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 1000])?;
    /// let source = || TokenShards::open([dir.join("a.bin")]).unwrap().windows(9).build().unwrap();
    /// let mix = Mixture::builder([source(), source()]).weights([0.5, 0.5]).build()?;
    /// let saved = mix.checkpoint_after(None, 100)?;
    /// let heavier = mix.to_builder().weights([0.9, 0.1]).build()?;
    /// assert!(heavier.iter_from(&saved).is_err()); // other weights: refused...
    /// let state = heavier.reweight(&saved)?; // ...unless asked for
    /// assert_eq!(state.weights.len(), 2);
    /// assert_eq!((state.weights[1].from, &state.weights[1].counts[..]), (100, &[50, 50][..]));
    /// let next: Vec<u16> = heavier.iter_from(&state)?.take(10).map(|s| s.source()).collect();
    /// assert_eq!(next.iter().filter(|&&s| s == 1).count(), 1);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn reweight(&self, state: &MixtureState<S::Record>) -> Result<MixtureState<S::Record>> {
        let i = &*self.inner;
        let counts = i.check_run(state)?;
        let Some((history, skip)) = i.settings.reweighted(state, &counts) else {
            return Ok(state.clone());
        };
        let mut readers = i.readers(BuiltBy::Start);
        let at = (state.consumed, state.step);
        Ok(i.state(history, at, &counts, &skip, &mut readers)?)
    }
}

/// A row's source index picks the source, which places the row from its id there (and,
/// for a packed document, its length).
impl<S: Mixable> Locate for Mixture<S> {
    fn locate(&self, row: &Row) -> Option<Location> {
        self.inner.members.get(usize::from(row.source))?.locate(row)
    }
}
