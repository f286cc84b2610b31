//! [`RunStates`]: the states of one run at any of its steps, computed from the state it
//! began at, shared by the loader and whoever checkpoints (a trainer whose prefetch thread
//! owns the loader): cheap to clone, any thread.

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::Result;
use crate::source::{Source, State};

/// The states of a [`Loader`](crate::Loader)'s run, at any step: what
/// [`Loader::run_states`](crate::Loader::run_states) hands out. [`at(step)`](Self::at) is
/// the state once every batch before `step` was consumed — the state a trainer saves with
/// its weights after it consumed the batch of `step - 1`, whatever the loader (or a
/// prefetch thread that owns it) popped beyond.
///
/// It holds the run's source and the state the run began at, and remembers the latest
/// state it computed, so that a source that walks to its states (packed documents) walks
/// only the steps since.
#[derive(Clone)]
pub struct RunStates<S: Source> {
    shared: Arc<Shared<S>>,
}

struct Shared<S> {
    source: S,
    /// Where the run began: the state it resumed from (`None`: step 0 of a fresh run).
    from: Option<State>,
    /// The latest state computed (a state of this run at some step).
    near: Mutex<Option<State>>,
}

impl<S: Source> fmt::Debug for RunStates<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunStates")
            .field("from_step", &self.shared.from.as_ref().map(State::step))
            .field("near_step", &self.near().as_ref().map(State::step))
            .finish_non_exhaustive()
    }
}

impl<S: Source> RunStates<S> {
    pub(crate) fn new(source: S, from: Option<State>) -> Self {
        RunStates {
            shared: Arc::new(Shared {
                source,
                from,
                near: Mutex::new(None),
            }),
        }
    }

    fn near(&self) -> MutexGuard<'_, Option<State>> {
        self.shared.near.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The state of the run once every batch before `step` was consumed: the next batch
    /// is the first step at or after `step` that the run delivers. A step before the run's
    /// first is its first. Packed documents and mixtures walk to it from the nearest state
    /// known (documents over their index, about a microsecond a step; a mixture its blend
    /// rule, and its sources' indexes for documents); the other sources compute it.
    pub fn at(&self, step: u64) -> Result<State> {
        let near = self.near().clone().filter(|n| n.step() <= step);
        let state = self
            .shared
            .source
            .state_at(self.shared.from.as_ref(), near.as_ref(), step)?;
        let mut near = self.near();
        if near.as_ref().is_none_or(|n| n.step() <= state.step()) {
            *near = Some(state.clone());
        }
        Ok(state)
    }

    /// As [`at`](Self::at), without keeping what it computed as the nearest state known: for
    /// a look ahead of the run (a [`RankGuard`](crate::RankGuard)'s), so that the states
    /// the trainer saves go on walking from the last one.
    pub(crate) fn peek(&self, step: u64) -> Result<State> {
        let near = self.near().clone().filter(|n| n.step() <= step);
        self.shared
            .source
            .state_at(self.shared.from.as_ref(), near.as_ref(), step)
    }

    /// The state the run began at (`None`: a fresh run).
    pub fn from(&self) -> Option<&State> {
        self.shared.from.as_ref()
    }

    /// The run's source (set up for the run).
    pub fn source(&self) -> &S {
        &self.shared.source
    }
}
