//! [`Loader`]: the run of a [`Source`] over a [`Pipeline`] — the batch size stated once,
//! rank and world size, epochs, a start step, skipped steps, one [`State`] — what a trainer
//! uses; [`LoaderBuilder`] (`builder.rs`) makes one, [`RunStates`] (`states.rs`) gives its
//! states at any step.
//!
//! The loader counts what it hands out: its [`state`](Loader::state) is the run once every
//! batch popped was consumed. A batch a loader pops ahead of an epoch's end (to see where
//! the epoch ends, for sources whose epochs' lengths are not known up front) is kept for
//! the next pop and not counted before.

pub(crate) mod builder;
pub(crate) mod states;

use std::time::Duration;

use crate::backend::contract::Backend;
use crate::backend::cpu::Cpu;
use crate::batch::Batch;
use crate::config::Config;
use crate::error::{Error, Result};
use crate::pipeline::{Pipeline, StopHandle, TryPop};
use crate::source::{AnySource, EpochPlace, Run, Source, State};
use crate::stats::Stats;
use states::RunStates;

/// The run of a source over a pipeline: batches in order, on every rank the same number,
/// with their step numbers, epochs, and a rank-agnostic [`State`] to resume from on any
/// world size.
///
/// ```
/// use pinring::source::{write_shard, TokenShards};
/// use pinring::{Fence, Loader};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-loader-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// write_shard(dir.join("train_000.bin"), &(0..8193u16).collect::<Vec<_>>())?;
/// let source = TokenShards::glob(dir.join("train_*.bin"))?.windows(129).build()?;
/// let mut loader = Loader::builder(source).batch_size(8).epochs(1).build()?;
/// assert_eq!(loader.epoch_batches(), Some(8)); // 64 windows of 129 tokens, 8 a batch
/// let mut steps = Vec::new();
/// while let Some(batch) = loader.pop()? {
///     steps.push(batch.step().unwrap());
///     batch.release(Fence::Sync).expect("a Sync fence always captures");
/// }
/// assert_eq!(steps, (0..8).collect::<Vec<_>>());
/// assert_eq!((loader.state().epoch(), loader.state().step()), (1, 8));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug)]
pub struct Loader<S: Source = AnySource, B: Backend = Cpu> {
    /// The source, set up for the run.
    source: S,
    run: Run,
    epochs: Option<u64>,
    /// The pipeline's config, for a restart ([`resume`](Self::resume)).
    config: Config<B>,
    /// `None` once a restart failed: the loader is stopped.
    pipeline: Option<Pipeline<B>>,
    states: RunStates<S>,
    /// The step of the next batch to hand out: the run's first, then one past the last
    /// handed out (a state at it is the first kept step from there).
    next_step: u64,
    /// Batches handed out.
    popped: u64,
    /// The epoch of the last batch handed out.
    last_epoch: Option<u64>,
    /// A batch popped ahead of an epoch's end, handed out by the next pop.
    kept: Option<Batch<B>>,
    /// Where the next batch stands in its epoch, at `next_step`, counted down per batch
    /// (sources whose epochs' lengths are known).
    place: Option<(u64, EpochPlace)>,
    /// The stats of a pipeline that a failed restart (or [`close`](Loader::close)) left
    /// behind.
    final_stats: Option<Stats>,
    /// Whether a pop found the run's end.
    ended: bool,
}

/// How long a pop may wait.
#[derive(Clone, Copy)]
enum Wait {
    /// Not at all: a batch that is ready, or [`TryPop::NotReady`].
    No,
    /// At most this long ([`Error::PopTimeout`] then).
    For(Duration),
    /// As the pipeline's `pop` waits (its `pop_timeout`).
    Pop,
}

impl<S: Source, B: Backend> Loader<S, B> {
    /// The loader of a built run (`builder.rs`).
    pub(crate) fn assembled(
        source: S,
        run: Run,
        epochs: Option<u64>,
        config: Config<B>,
        from: Option<State>,
    ) -> Result<Self> {
        let next_step = first_step(&run, from.as_ref());
        let pipeline = Pipeline::new(
            config.clone(),
            source.decoder(),
            source.samples(from.as_ref(), epochs)?,
        )?;
        Ok(Loader {
            states: RunStates::new(source.clone(), from),
            source,
            run,
            epochs,
            config,
            pipeline: Some(pipeline),
            next_step,
            popped: 0,
            last_epoch: None,
            kept: None,
            place: None,
            final_stats: None,
            ended: false,
        })
    }

    fn pipeline(&mut self) -> Result<&mut Pipeline<B>> {
        self.pipeline.as_mut().ok_or(Error::Stopped)
    }

    /// Counts a batch handed out.
    fn hand_out(&mut self, batch: Batch<B>) -> Batch<B> {
        self.popped += 1;
        self.next_step = match batch.step() {
            Some(step) => step.saturating_add(1),
            None => self.next_step.saturating_add(1),
        };
        self.last_epoch = Some(batch.epoch());
        if let Some((at, place)) = &mut self.place {
            *at = self.next_step;
            place.left = place.left.saturating_sub(1);
        }
        batch
    }

    /// The pipeline's next batch, waiting as `wait` says; an end is noted.
    fn next_from_pipeline(&mut self, wait: Wait) -> Result<TryPop<B>> {
        let pipeline = self.pipeline()?;
        let popped = match wait {
            Wait::No => pipeline.try_pop()?,
            Wait::For(timeout) => pipeline
                .pop_for(timeout)?
                .map_or(TryPop::End, TryPop::Batch),
            Wait::Pop => pipeline.pop()?.map_or(TryPop::End, TryPop::Batch),
        };
        if matches!(popped, TryPop::End) {
            self.ended = true;
        }
        Ok(popped)
    }

    /// The next batch (of epoch `epoch`, when given: [`TryPop::End`] at that epoch's end),
    /// waiting as `wait` says: the one pop every public pop is.
    fn next(&mut self, epoch: Option<u64>, wait: Wait) -> Result<TryPop<B>> {
        if let Some(epoch) = epoch
            && let Some(place) = self.place()?
        {
            if place.epoch != epoch || place.left == 0 {
                return Ok(TryPop::End);
            }
            return self.next(None, wait);
        }
        let batch = match self.kept.take() {
            Some(batch) => batch,
            None => match self.next_from_pipeline(wait)? {
                TryPop::Batch(batch) => batch,
                other => return Ok(other),
            },
        };
        if epoch.is_some_and(|e| batch.epoch() != e) {
            self.kept = Some(batch);
            return Ok(TryPop::End);
        }
        Ok(TryPop::Batch(self.hand_out(batch)))
    }

    /// The next batch, in order, across epochs; `None` once the run ended (its `epochs`,
    /// or a mixture's stop rule). Waits as [`Pipeline::pop`] does (the pipeline's
    /// `pop_timeout`). Errors are the pipeline's: a sample that failed (after every batch
    /// before it), then [`Error::Stopped`].
    pub fn pop(&mut self) -> Result<Option<Batch<B>>> {
        self.next(None, Wait::Pop).map(waited)
    }

    /// As [`pop`](Self::pop), waiting at most `timeout` ([`Error::PopTimeout`] then).
    pub fn pop_for(&mut self, timeout: Duration) -> Result<Option<Batch<B>>> {
        self.next(None, Wait::For(timeout)).map(waited)
    }

    /// The next batch if one is ready, without waiting ([`TryPop::NotReady`] otherwise).
    pub fn try_pop(&mut self) -> Result<TryPop<B>> {
        self.next(None, Wait::No)
    }

    /// The next batch if it belongs to epoch `epoch`; `None` at that epoch's end (or the
    /// run's). Where the source's epochs' lengths are known this is arithmetic; otherwise
    /// the next batch is popped, and one of a later epoch is kept (not handed out, not
    /// counted) for the next pop.
    pub fn pop_in_epoch(&mut self, epoch: u64) -> Result<Option<Batch<B>>> {
        self.next(Some(epoch), Wait::Pop).map(waited)
    }

    /// As [`pop_in_epoch`](Self::pop_in_epoch), waiting at most `timeout`
    /// ([`Error::PopTimeout`] then): for a caller that waits in slices (to check for a
    /// signal between them, as the Python layer does).
    pub fn pop_in_epoch_for(&mut self, epoch: u64, timeout: Duration) -> Result<Option<Batch<B>>> {
        self.next(Some(epoch), Wait::For(timeout)).map(waited)
    }

    /// As [`pop_in_epoch`](Self::pop_in_epoch) without waiting: the batch if it is ready,
    /// [`TryPop::End`] at the epoch's end (or the run's), [`TryPop::NotReady`] otherwise.
    pub fn try_pop_in_epoch(&mut self, epoch: u64) -> Result<TryPop<B>> {
        self.next(Some(epoch), Wait::No)
    }

    /// Whether a pop found the end of the run (every batch of its `epochs` delivered, or
    /// a mixture's stop rule reached). A batch kept ahead is not the end.
    pub fn ended(&self) -> bool {
        self.ended && self.kept.is_none()
    }

    /// The batches left in the epoch of the next batch, as an iterator (each item a
    /// [`pop_in_epoch`](Self::pop_in_epoch)); the next call goes on with the next epoch.
    /// For a mixture (no epochs of its own), every batch to the run's end.
    pub fn epoch_iter(&mut self) -> EpochIter<'_, S, B> {
        let epoch = self.epoch();
        EpochIter {
            loader: self,
            epoch,
            done: false,
        }
    }

    /// The state of the run once every batch handed out was consumed: save it with the
    /// trainer's weights; [`LoaderBuilder::resume`](crate::LoaderBuilder::resume) continues from it, on any world size.
    /// The same on every rank after the same number of pops ([`State::merge`] checks).
    /// Arithmetic on what was popped (packed documents walk the steps popped since the
    /// last state on their index, about a microsecond a step).
    ///
    /// # Panics
    ///
    /// Never for a state a source can compute; where a walk over an index the run already
    /// walked fails (which would be a bug in pinring), it panics saying so. Use
    /// [`state_at`](Self::state_at) for a `Result`.
    pub fn state(&self) -> State {
        self.state_at(self.next_step).unwrap_or_else(|e| {
            panic!("pinring: the state after the batches handed out could not be made: {e}")
        })
    }

    /// The state of the run once every batch before `step` was consumed (see
    /// [`RunStates::at`]): for a trainer that consumed less than the loader popped (a
    /// prefetch thread, a queue), `state_at(last_step_consumed + 1)`.
    pub fn state_at(&self, step: u64) -> Result<State> {
        self.states.at(step)
    }

    /// The states of this run at any step, for another thread to checkpoint with while
    /// this one (or a prefetch thread owning the loader) pops: clone it, send it, call
    /// [`RunStates::at`] with the next step the trainer will consume. [`resume`](Self::resume)
    /// and [`reshard`](Self::reshard) begin a new run: a clone taken before either gives the
    /// old run's states, so take it again after them.
    pub fn run_states(&self) -> RunStates<S> {
        self.states.clone()
    }

    /// Where the next batch stands in its epoch, where the source's epochs' lengths are
    /// known up front (`None` otherwise); counted down per batch, computed once an epoch.
    fn place(&mut self) -> Result<Option<EpochPlace>> {
        if self.source.epoch_batches().is_none() {
            return Ok(None);
        }
        if let Some((at, place)) = self.place
            && at == self.next_step
            && place.left > 0
        {
            return Ok(Some(place));
        }
        let place = self.source.place(self.states.from(), self.next_step)?;
        self.place = place.map(|p| (self.next_step, p));
        Ok(place)
    }

    /// The epoch of the next batch (from 0). Where epochs' lengths are not known up front
    /// (packed documents), the epoch of a batch kept ahead, else of the last one handed
    /// out (before any, of the state the run resumed from; else 0). A mixture: 0.
    pub fn epoch(&mut self) -> u64 {
        if let Some(batch) = &self.kept {
            return batch.epoch();
        }
        if let Ok(Some(place)) = self.place() {
            return place.epoch;
        }
        self.last_epoch
            .unwrap_or_else(|| self.states.from().map_or(0, State::epoch))
    }

    /// Batches an epoch on this rank, the same on every rank, where known up front (token
    /// windows and records; `None` for packed documents and mixtures).
    pub fn epoch_batches(&self) -> Option<u64> {
        self.source.epoch_batches()
    }

    /// Samples an epoch on this rank, where known up front.
    pub fn epoch_len(&self) -> Option<u64> {
        self.source.epoch_len()
    }

    /// Batches this run delivers in all, from where it began, the skipped steps left out:
    /// `None` without an epoch cap, and where epochs' lengths are not known up front.
    pub fn total_batches(&self) -> Result<Option<u64>> {
        match self.epochs {
            Some(epochs) => self.source.total_batches(self.states.from(), epochs),
            None => Ok(None),
        }
    }

    /// The step at which this run ends, if it ends before step `next_step() + horizon`
    /// (`None`: it delivers every step up to there, or never ends). Token windows and
    /// records with an epoch cap: arithmetic. Packed documents with a cap, and mixtures
    /// with a stop rule: a walk of the run's states up to `horizon` steps ahead (about a
    /// microsecond a step, nothing read but the index), which the states the trainer
    /// saves do not walk again. A loader that ended or was closed ends at its next step.
    /// What a [`RankGuard`](crate::RankGuard) compares across ranks.
    pub fn ends_within(&self, horizon: u64) -> Result<Option<u64>> {
        if self.ended() || self.is_closed() {
            return Ok(Some(self.next_step));
        }
        let target = self.next_step.saturating_add(horizon);
        let end = match (self.epochs, self.source.stop_rule()) {
            (None, None) => return Ok(None),
            (Some(epochs), _) if self.source.epoch_batches().is_some() => {
                self.source.end_step(self.states.from(), epochs)?
            }
            _ => {
                let at = self.states.peek(target)?;
                (at.step() < target).then_some(at.step())
            }
        };
        Ok(end.filter(|&end| end < target))
    }

    /// Batches handed out so far.
    pub fn popped(&self) -> u64 {
        self.popped
    }

    /// The step of the next batch (at or before it: a skipped range moves it on).
    pub fn next_step(&self) -> u64 {
        self.next_step
    }

    /// The run: rank, world size, batch size, start step, skipped steps.
    pub fn run(&self) -> &Run {
        &self.run
    }

    /// The epochs the run delivers (`None`: no cap).
    pub fn epochs(&self) -> Option<u64> {
        self.epochs
    }

    /// The source, set up for the run.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The pipeline's config.
    pub fn config(&self) -> &Config<B> {
        &self.config
    }

    /// A snapshot of the pipeline's counters and its bottleneck verdict (after a restart
    /// that failed, the last pipeline's).
    pub fn stats(&self) -> Stats {
        match (&self.pipeline, &self.final_stats) {
            (Some(p), _) => p.stats(),
            (None, Some(stats)) => stats.clone(),
            (None, None) => unreachable!("a loader without a pipeline kept its last stats"),
        }
    }

    /// Writes the timeline recorded so far as Chrome trace JSON ([`Pipeline::write_trace`]).
    pub fn write_trace(&self, out: impl std::io::Write) -> std::io::Result<usize> {
        match &self.pipeline {
            Some(p) => p.write_trace(out),
            None => Err(std::io::Error::other("the loader is stopped")),
        }
    }

    /// The slot cycle of the current pipeline's batches, from its trace
    /// ([`Pipeline::slot_timeline`](crate::Pipeline::slot_timeline)): `None` with tracing
    /// off or the loader stopped.
    pub fn slot_timeline(&self) -> Option<crate::trace::cycle::SlotTimeline> {
        self.pipeline.as_ref()?.slot_timeline()
    }

    /// Stops the run and frees its pipeline now (its threads joined, its memory freed once
    /// the batches still held are dropped): later pops are [`Error::Stopped`]; the state,
    /// the stats (the last pipeline's) and the run's settings stay readable. A batch kept
    /// ahead is dropped (it was never handed out: the state does not count it).
    pub fn close(&mut self) {
        self.kept = None;
        if let Some(pipeline) = self.pipeline.take() {
            self.final_stats = Some(pipeline.stats());
        }
    }

    /// Whether the loader is stopped: [`close`](Self::close)d, or a restart failed.
    pub fn is_closed(&self) -> bool {
        self.pipeline.is_none()
    }

    /// A handle that stops the pipeline from another thread ([`Pipeline::stop_handle`]).
    pub fn stop_handle(&self) -> Option<StopHandle<B>> {
        self.pipeline.as_ref().map(Pipeline::stop_handle)
    }

    /// The backend the pipeline runs on.
    pub fn backend(&self) -> Option<&B> {
        self.pipeline.as_ref().map(Pipeline::backend)
    }

    /// Reshards the run in place: from the next pop on, this loader is `rank` of
    /// `world_size` ranks of the same global walk, as a run resumed from
    /// [`state`](Self::state) on that world size would be (every sample exactly once across
    /// the change: those the ranks consumed before it, and the rest split anew). Every
    /// rank that stays calls it after the same number of pops (as for
    /// [`State::merge`]); a rank that leaves drops its loader. Batches still held stay
    /// valid; batches decoded ahead for the old sharding are dropped, never handed out.
    /// The pipeline restarts from the state (its threads and memory made anew); the
    /// source, its index and the run's settings are kept.
    pub fn reshard(&mut self, rank: u64, world_size: u64) -> Result<()> {
        let state = self.state_at(self.next_step)?;
        let run = Run {
            rank,
            world_size,
            ..self.run.clone()
        };
        let source = self.source.with_run(&run)?;
        let samples = source.samples(Some(&state), self.epochs)?;
        self.kept = None;
        self.final_stats = self.pipeline.as_ref().map(Pipeline::stats);
        drop(self.pipeline.take());
        let pipeline = Pipeline::new(self.config.clone(), source.decoder(), samples)?;
        self.next_step = first_step(&run, Some(&state));
        self.states = RunStates::new(source.clone(), Some(state));
        self.source = source;
        self.run = run;
        self.pipeline = Some(pipeline);
        self.place = None;
        self.ended = false;
        Ok(())
    }

    /// Continues from `state` instead (the pipeline restarts; before the first pop only):
    /// `weights`, for a mixture, applies new weights from the state on (see
    /// [`Mixture::reweight`](crate::source::Mixture::reweight)). A state this source
    /// cannot resume from is refused and the loader goes on as it was.
    pub fn resume(&mut self, state: &State, weights: Option<&[f64]>) -> Result<()> {
        if self.popped > 0 || self.kept.is_some() {
            return Err(crate::error::ConfigError::Run {
                field: "resume",
                why: "a loader resumes before its first pop: this one handed out batches \
                      already (build a new one with .resume(state))"
                    .to_owned(),
            }
            .into());
        }
        let (source, state) = match weights {
            Some(w) => self.source.reweighted(w, state)?,
            None => (self.source.clone(), state.clone()),
        };
        source.check(&state)?;
        let samples = source.samples(Some(&state), self.epochs)?;
        // The old pipeline's threads and memory go before the new one takes as much.
        self.final_stats = self.pipeline.as_ref().map(Pipeline::stats);
        drop(self.pipeline.take());
        let pipeline = Pipeline::new(self.config.clone(), source.decoder(), samples)?;
        self.next_step = first_step(&self.run, Some(&state));
        self.states = RunStates::new(source.clone(), Some(state));
        self.source = source;
        self.pipeline = Some(pipeline);
        self.place = None;
        self.ended = false;
        Ok(())
    }
}

/// The batch a pop that waits got (`None`: the end; a pop that waits is never `NotReady`).
fn waited<B: Backend>(popped: TryPop<B>) -> Option<Batch<B>> {
    match popped {
        TryPop::Batch(batch) => Some(batch),
        TryPop::End | TryPop::NotReady => None,
    }
}

/// The step a run from `from` begins at (at or before its first kept step).
fn first_step(run: &Run, from: Option<&State>) -> u64 {
    run.start_step.max(from.map_or(0, State::step))
}

/// One epoch's batches: what [`Loader::epoch_iter`] returns.
#[derive(Debug)]
pub struct EpochIter<'a, S: Source, B: Backend> {
    loader: &'a mut Loader<S, B>,
    epoch: u64,
    done: bool,
}

impl<S: Source, B: Backend> EpochIter<'_, S, B> {
    /// The epoch it yields.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }
}

impl<S: Source, B: Backend> Iterator for EpochIter<'_, S, B> {
    type Item = Result<Batch<B>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let next = if self.loader.source.has_epochs() {
            self.loader.pop_in_epoch(self.epoch)
        } else {
            self.loader.pop()
        };
        match next {
            Ok(Some(batch)) => Some(Ok(batch)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}
