//! [`Mixture`]: several sources of one kind mixed by weight into one global sequence,
//! sharded over ranks; its runs, states and resumes.

use std::fmt;
use std::sync::Arc;

use super::mixable::Mixable;
use super::run_origin::RunOrigin;
use super::samples::MixedSamples;
use super::settings::{MixSettings, MixShared};
use super::state::{MixtureState, WeightSpan};
use super::stop::Stop;
use crate::error::Result;
use crate::source::sampling::checkpoint::Checkpoint;
use crate::source::sampling::sampler::Sampler;
use crate::source::sampling::segmented::Segmented;
use crate::source::sampling::skip::SkipSteps;

/// Samples from several sources of one kind — samplers of token windows, or of records —
/// mixed by weight into one global sequence that every rank shards, resumable on any
/// world size. (`Mixture<Documents>` mixes sources of packed documents document by
/// document and packs them into steps: built by
/// [`Mixture::documents`](crate::source::Mixture::documents); what follows is
/// `Mixture<S>` over samplers of segments `S`.)
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
    pub(crate) inner: Arc<S::Shared>,
}

impl<S: Mixable> Clone for Mixture<S> {
    fn clone(&self) -> Self {
        Mixture {
            inner: self.inner.clone(),
        }
    }
}

impl<S: Segmented> fmt::Debug for Mixture<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = &self.inner.settings;
        f.debug_struct("Mixture")
            .field("sources", &self.len())
            .field("weights", &i.weights)
            .field("seed", &i.seed)
            .field("rank", &i.run.rank)
            .field("world_size", &i.run.world)
            .field("batch_size", &i.run.batch)
            .field("stop", &i.stop)
            .field("start_step", &i.run.start_step)
            .field("skip_steps", &i.run.skip.ranges())
            .finish()
    }
}

impl<S: Mixable> Mixture<S> {
    /// The settings both kinds hold.
    pub(crate) fn settings(&self) -> &MixSettings {
        self.inner.settings()
    }

    /// The origin of a fresh run.
    pub(crate) fn fresh(&self) -> RunOrigin {
        self.settings().fresh(self.len())
    }

    /// The origin of a run resumed from `state`, checked.
    pub(crate) fn origin(
        &self,
        state: &MixtureState<<S::Shared as MixShared>::Part>,
    ) -> Result<RunOrigin> {
        let counts = self.inner.check_run(state)?;
        self.settings().resumed(state, counts)
    }

    /// The origin of a run resumed from `from` (checked), or of a fresh run.
    pub(crate) fn origin_or_fresh(
        &self,
        from: Option<&MixtureState<<S::Shared as MixShared>::Part>>,
    ) -> Result<RunOrigin> {
        match from {
            Some(state) => self.origin(state),
            None => Ok(self.fresh()),
        }
    }

    /// How many sources it mixes.
    pub fn len(&self) -> usize {
        self.inner.sources()
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
}

impl<S: Segmented> Mixture<S> {
    /// The sources, as given.
    pub fn sources(&self) -> impl ExactSizeIterator<Item = &Sampler<S>> {
        self.inner.members.iter().map(|m| &m.given)
    }

    /// The batch size, if set.
    pub fn batch_size(&self) -> Option<u64> {
        self.settings().run.batch
    }

    /// Each source's epoch length (its samples per epoch of its own walk).
    pub fn epoch_lens(&self) -> Vec<u64> {
        self.inner.members.iter().map(|m| m.epoch_len).collect()
    }

    /// The run from the start (or from [`start_step`](crate::source::MixtureBuilder::start_step)),
    /// this rank's samples, leaving out the skipped steps: endless with [`Stop::Never`].
    pub fn iter(&self) -> MixedSamples<S> {
        MixedSamples::new(self.inner.clone(), self.fresh())
    }

    /// The run resumed from `state` on this mixture's rank, world size and batch size
    /// (which may differ from the saved run's), after checking it as
    /// [`check_state`](Self::check_state) does. Positions `state.consumed..` are split
    /// as a fresh run's are, so every position is delivered exactly once across the two
    /// runs; the steps go on from `state.step`, skipping the state's skipped steps and
    /// this mixture's.
    pub fn iter_from(&self, state: &MixtureState) -> Result<MixedSamples<S>> {
        Ok(MixedSamples::new(self.inner.clone(), self.origin(state)?))
    }

    /// The state of a run from `from` (the start when `None`) after this rank popped
    /// `consumed` samples since: the global count (`consumed` whole steps of `W·B`, with
    /// the steps the run skipped or began after counted in), each source's place there,
    /// the weights' history, the step and the skipped steps. It walks the blend rule over
    /// the positions since `from` (arithmetic only). `from` is checked as `iter_from`
    /// checks it. Where a stop rule ends the run first (a skipped range or a start step
    /// past its end), the state at its end, after its last whole step: its `step` is the
    /// run's step count, and a resume from it delivers nothing.
    ///
    /// ```
    /// use pinring::source::{write_shard, Mixture, MixtureState, Order, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-mixstate-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 1000])?;
    /// write_shard(dir.join("b.bin"), &[0; 500])?;
    /// let source = |f: &str| TokenShards::open([dir.join(f)]).unwrap().windows(9)
    ///     .order(Order::Shuffled { seed: 3 }).build().unwrap();
    /// let on = |rank, world, batch| Mixture::builder([source("a.bin"), source("b.bin")])
    ///     .weights([2.0, 1.0]).shard(rank, world).batch_size(batch).build();
    /// // Two ranks popped 5 batches of 4: 40 positions of the global sequence.
    /// let states = [on(0, 2, 4)?.checkpoint_after(None, 20)?, on(1, 2, 4)?.checkpoint_after(None, 20)?];
    /// let state = MixtureState::merge(&states)?;
    /// assert_eq!((state.consumed, state.step), (40, 5));
    /// assert_eq!(state.sources[0].consumed + state.sources[1].consumed, 40);
    /// // Three ranks with batches of 2 go on from there.
    /// let mut ids = std::collections::BTreeSet::new();
    /// for rank in 0..3 {
    ///     for s in on(rank, 3, 2)?.iter_from(&state)?.take(6) {
    ///         assert_eq!(s.step(), Some(5 + ids.len() as u64 % 6 / 2));
    ///         assert!(ids.insert((s.source(), s.item().id())));
    ///     }
    /// }
    /// assert_eq!(MixtureState::<pinring::source::Checkpoint>::from_text(&state.to_text())?, state);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn checkpoint_after(
        &self,
        from: Option<&MixtureState>,
        consumed: u64,
    ) -> Result<MixtureState> {
        let run = &self.settings().run;
        let batch = run.batch;
        let origin = self.origin_or_fresh(from)?;
        let b = batch.unwrap_or(1);
        let (full, rem) = (consumed / b, consumed % b);
        let step = match batch {
            Some(_) => origin
                .skip
                .after_kept(run.start_step.max(origin.step), full),
            None => origin.step.saturating_add(full),
        };
        let chunk = u128::from(run.world) * u128::from(b);
        let walked =
            u128::from(step - origin.step) * chunk + u128::from(rem) * u128::from(run.world);
        let walked = u64::try_from(walked).unwrap_or(u64::MAX);
        let mut walk = self.inner.walk(&origin);
        let mut step = if batch.is_some() { step } else { origin.step };
        if self.stop() == Stop::Never {
            walk.skip(walked);
        } else {
            let done = walk.clone().skip_within(walked);
            if done < walked {
                // The stop rule ends the run inside those positions: its last whole step.
                let chunk = u64::try_from(chunk).unwrap_or(u64::MAX);
                let whole = done / chunk;
                walk.skip(whole * chunk);
                if batch.is_some() {
                    step = origin.step + whole;
                }
            } else {
                walk.skip(walked);
            }
        }
        Ok(self.state_at(
            origin.history,
            walk.position(),
            step,
            &walk.counts(),
            &origin.skip,
        ))
    }

    /// Checks that this mixture can resume from `state`: the same state version, seed,
    /// stop rule and number of sources, each source's part checked as that source checks
    /// its checkpoints (dataset, window, stride, order and its own seed), a consistent
    /// weights' history, and the weights in force the same as this mixture's (else
    /// [`SourceError::MixtureMismatch`] saying so: [`reweight`](Self::reweight) switches
    /// to this mixture's weights at the saved point). Rank, world size and batch size may
    /// differ.
    ///
    /// [`SourceError::MixtureMismatch`]: crate::source::SourceError::MixtureMismatch
    pub fn check_state(&self, state: &MixtureState) -> Result<()> {
        self.origin(state).map(|_| ())
    }

    /// `state` with this mixture's weights from its point on: the rule applies them to
    /// the positions after `state.consumed`, counting from there, and the new span joins
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
    pub fn reweight(&self, state: &MixtureState) -> Result<MixtureState> {
        let counts = self.inner.check_run(state)?;
        let Some((history, skip)) = self.settings().reweighted(state, &counts) else {
            return Ok(state.clone());
        };
        Ok(self.state_at(history, state.consumed, state.step, &counts, &skip))
    }

    /// The state at global position `at`, step `step`, where each source's count is
    /// `counts`.
    fn state_at(
        &self,
        history: Vec<WeightSpan>,
        at: u64,
        step: u64,
        counts: &[u64],
        skip: &SkipSteps,
    ) -> MixtureState {
        let i = &*self.inner;
        let sources = i
            .members
            .iter()
            .zip(counts)
            .map(|(m, &c)| source_state(&m.given, c))
            .collect();
        i.settings.state(history, (at, step), skip, sources)
    }
}

/// A source's own state after `n` of its samples: its checkpoint at world size 1.
fn source_state<S: Segmented>(sampler: &Sampler<S>, n: u64) -> Checkpoint {
    sampler.checkpoint(0, n)
}
