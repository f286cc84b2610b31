//! [`IndexAhead`]: the thread that indexes shards ahead of a sequential walk, so that no
//! step waits for a shard's index. The walk says which shard it is in
//! ([`IndexAhead::walk_at`]); the thread builds the next [`AHEAD`] shards' indexes in order
//! (wrapping to shard 0 for the next epoch) and then sleeps until the walk moves on. A
//! step that reaches a shard the thread has not indexed builds it inline (or waits for the
//! thread if it is at that very shard): never a deadlock, only a wait, which
//! [`IndexStats::on_walk`](super::index::IndexStats::on_walk) counts.
//!
//! A shard the thread fails to index (no `bos`, a read error) is left for the walk, which
//! builds it again and reports the error at that step. The thread ends when the source is
//! dropped (the handle closes it); it holds the index, not the source.

use std::sync::Arc;

use super::index::{BosIndex, BuiltBy};
use crate::error::Error;
use crate::sync::native::{Builder, Condvar, Mutex, MutexGuard};

/// Shards indexed ahead of the walk's: enough that the walk, which spends hundreds of
/// steps in a shard of 100M tokens, never reaches an unindexed one.
pub(super) const AHEAD: usize = 2;

/// What the walk and the thread share.
#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Signalled when `state` changes: the walk moved, the source closed, (in tests) the
    /// gate opened or a shard was built.
    changed: Condvar,
}

#[derive(Debug)]
struct State {
    /// The shard the walk is in, once it said.
    walk_at: Option<usize>,
    /// Shards the thread tried and failed to index: left to the walk.
    failed: Vec<bool>,
    /// The source was dropped: the thread ends.
    closed: bool,
    /// Tests only: shards the thread may still build (`None`: no gate), and how many it
    /// has built.
    #[cfg(test)]
    gate: Option<u64>,
    #[cfg(test)]
    built: u64,
}

/// The handle on the thread: held by the source, it closes the thread when dropped.
#[derive(Debug)]
pub(super) struct IndexAhead {
    shared: Arc<Shared>,
}

impl IndexAhead {
    /// Starts the thread over `index`. `gated` (tests): the thread builds nothing until
    /// [`open_gate`](Self::open_gate) lets it.
    pub(super) fn start(index: Arc<BosIndex>, #[allow(unused)] gated: bool) -> Result<Self, Error> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                walk_at: None,
                failed: vec![false; index.shards()],
                closed: false,
                #[cfg(test)]
                gate: gated.then_some(0),
                #[cfg(test)]
                built: 0,
            }),
            changed: Condvar::new(),
        });
        let thread = shared.clone();
        Builder::new()
            .name("pinring-index".into())
            .spawn(move || {
                crate::thread_policy::yield_at_wakeup(true);
                run(&thread, &index)
            })
            .map_err(|e| Error::Spawn {
                thread: "index thread",
                source: Box::new(e),
            })?;
        Ok(IndexAhead { shared })
    }

    /// The walk is in shard `shard`: index the next ones.
    pub(super) fn walk_at(&self, shard: usize) {
        let mut state = self.shared.lock();
        if state.walk_at != Some(shard) {
            state.walk_at = Some(shard);
            self.shared.changed.notify_all();
        }
    }

    /// Tests: lets the thread build `n` more shards.
    #[cfg(test)]
    pub(super) fn open_gate(&self, n: u64) {
        let mut state = self.shared.lock();
        if let Some(g) = &mut state.gate {
            *g += n;
        }
        self.shared.changed.notify_all();
    }

    /// Tests: waits until the thread has built `n` shards in all.
    #[cfg(test)]
    pub(super) fn wait_built(&self, n: u64) {
        let mut state = self.shared.lock();
        while state.built < n {
            state = self
                .shared
                .changed
                .wait(state)
                .unwrap_or_else(|e| e.into_inner());
        }
    }
}

impl Drop for IndexAhead {
    fn drop(&mut self) {
        self.shared.lock().closed = true;
        self.shared.changed.notify_all();
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The first of the [`AHEAD`] shards after the walk's that is neither indexed nor failed.
fn wanted(state: &State, index: &BosIndex) -> Option<usize> {
    let at = state.walk_at?;
    let n = index.shards();
    (1..=AHEAD.min(n - 1))
        .map(|i| (at + i) % n)
        .find(|&s| index.get(s).is_none() && !state.failed[s])
}

/// The thread: builds what the walk will want next, sleeps otherwise, ends when closed.
fn run(shared: &Shared, index: &BosIndex) {
    loop {
        let shard = {
            let mut state = shared.lock();
            loop {
                if state.closed {
                    return;
                }
                #[cfg(test)]
                let gate_open = state.gate != Some(0);
                #[cfg(not(test))]
                let gate_open = true;
                if let Some(s) = wanted(&state, index).filter(|_| gate_open) {
                    #[cfg(test)]
                    if let Some(g) = &mut state.gate {
                        *g -= 1;
                    }
                    break s;
                }
                state = shared
                    .changed
                    .wait(state)
                    .unwrap_or_else(|e| e.into_inner());
            }
        };
        let ok = index.ensure(shard, BuiltBy::Ahead).is_ok();
        let mut state = shared.lock();
        if !ok {
            state.failed[shard] = true;
        }
        #[cfg(test)]
        {
            state.built += 1;
            shared.changed.notify_all();
        }
    }
}
