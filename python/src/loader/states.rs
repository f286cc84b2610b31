//! A `pinring.Loader`'s run as a state: `state_dict()` (the core's `State` as a dict),
//! `load_state_dict()` (a restart from one, before the first pop) and `reshard()` (the
//! same walk, sharded anew from the next pop).

use std::sync::atomic::Ordering;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::Loader;
use crate::args;
use crate::errors::from_core::to_py;
use crate::source::weights::WeightsArg;
use crate::state::{self, StateArg};
use crate::stub_attrs::gen_stub_pymethods;

#[gen_stub_pymethods]
#[pymethods]
impl Loader {
    /// The loader's position as plain data (ints, strings and lists of them, for
    /// `torch.save` or `json`): dataset fingerprint (format, file names, sizes, contents),
    /// window, order, seed, the epoch and how many of its windows all ranks together have
    /// consumed (popped; decoded or in-flight batches do not count). In a data-parallel
    /// run every rank returns the same state, as long as the ranks popped the same number
    /// of batches; `merge_states` checks that.
    ///
    /// For Documents, the core's `DocumentsCheckpoint` record: dataset fingerprint, bos,
    /// order, seed, schedule, max_docs, the walk's cursor (`epoch`, `shard`, `doc`), the
    /// steps popped (`step`), `world_size` and the skipped steps (`skip`); the same on
    /// every rank after the same number of steps, and resumable at any world size. (It walks the steps popped since the last
    /// state_dict(), about a microsecond each.)
    ///
    /// Every state is one record tagged by `kind` ("windows", "documents" or "mixture"),
    /// the core's `pinring::State` as a dict. Every state also holds `step` (the steps all ranks completed: the next batch's
    /// `batch.step`) and `skip` (the skipped step ranges in force, as `[start, end]`
    /// pairs), so that a resumed run numbers its steps on and keeps skipping.
    ///
    /// For a Mixture, the core's `MixtureState` record: `version`, `seed`, `stop`,
    /// `weights` (the weights' history: a list of `{"from", "weights", "counts"}`, the last
    /// in force), `consumed` (positions of the global sequence all ranks consumed),
    /// `step`, `skip`, `world_size`, `batch_size` and `sources` (each source's own state
    /// dict at its count, at world size 1). The same on every rank after the same number
    /// of batches; resumable at any world size and batch size.
    #[gen_stub(override_return_type(type_repr = "dict[str, typing.Any]", imports = ("typing",)))]
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let holder = &self.holder;
        let state = py.detach(|| holder.lock().state());
        state::to_dict(py, &state.map_err(|e| to_py(py, e))?)
    }

    /// Continues from `state`: across the consumed part of the saved run and this one,
    /// every window of the epoch is delivered once, and later epochs are those of an
    /// uninterrupted run at this loader's world size. A Mixture continues its global
    /// sequence: every position once across the runs.
    ///
    /// Args:
    ///     state: a `state_dict()` of any rank of a run at any world size, or a list of
    ///         every rank's (merged as `merge_states` does).
    ///     weights: (a Mixture) new weights, one per source, from the saved point on: the
    ///         rule applies them to the positions after the state's, counting from there
    ///         (so each source stays within 1 of its new share of what follows), and the
    ///         state records the change, so a later resume reproduces the run. None: the
    ///         state's weights in force, which must be this loader's Mixture's. After it,
    ///         `state_dict()` carries the new weights.
    ///
    /// Must come before the first pop (the pipeline restarts from `state`;
    /// `Loader(..., state=state)` avoids the restart). It is atomic with a `pop` in
    /// another thread: that pop gets a batch of the old run (and this call raises
    /// CheckpointError) or of the new one (and `state_dict()` counts it).
    ///
    /// Raises:
    ///     CheckpointError: a state of another dataset, seq_len, record size, order or
    ///         seed (Documents: bos, schedule or max_docs; Mixture: sources, seed, stop
    ///         rule, or other weights in force without `weights=`), of another kind of
    ///         source, of ranks that consumed unequal counts (popped unequal steps), an
    ///         empty list, or a loader that delivered a batch already.
    ///     ConfigError: `weights` for a loader that is not over a Mixture, or weights that
    ///         are negative, NaN, all 0 or not one per source (`e.argument` is "weights").
    #[pyo3(signature = (state, weights = None))]
    fn load_state_dict(
        &self,
        py: Python<'_>,
        state: StateArg<'_>,
        weights: Option<WeightsArg<'_>>,
    ) -> PyResult<()> {
        let state = state::read(state.object())?;
        let weights = weights
            .map(|w| w.read("one per source of the Mixture"))
            .transpose()?;
        let restarted = py.detach(|| {
            // One lock throughout: no pop slips in between the restart and the new state.
            let mut loader = self.holder.lock();
            if self.closed.load(Ordering::Acquire) || loader.is_closed() {
                return None;
            }
            // Nothing was popped (the core checks): its pipeline goes before the new one
            // takes as much.
            let resumed = loader.resume(&state, weights.as_deref());
            self.renew_stop(&loader);
            Some(resumed)
        });
        match restarted {
            None => Err(self.closed_error(py)),
            Some(resumed) => resumed.map_err(|e| to_py(py, e)),
        }
    }

    /// Reshards the run in place: from the next pop on, this loader is rank `rank` of
    /// `world_size` ranks of the same global walk, as a loader resumed from
    /// `state_dict()` on that world size would be: every sample (window, record, document,
    /// mixed position) exactly once across the change, those the ranks popped before it
    /// and the rest split anew. Every rank that stays calls it after the same number of
    /// pops (as for `merge_states`); a rank that leaves closes its loader. Batches still
    /// held stay valid; batches decoded ahead for the old sharding are dropped, never
    /// delivered. The pipeline restarts (its threads and memory made anew); the source, its
    /// index and the loader's other settings are kept.
    ///
    /// Args:
    ///     rank: this process's new data-parallel rank, below world_size.
    ///     world_size: the new number of data-parallel ranks.
    ///
    /// Raises:
    ///     ConfigError: a world_size of 0, a rank not below it, or a world size the
    ///         source cannot split (too few samples for every rank).
    ///     StoppedError: the loader is closed.
    #[pyo3(signature = (rank, world_size))]
    fn reshard(&self, py: Python<'_>, rank: i128, world_size: i128) -> PyResult<()> {
        let (rank, world_size) = args::rank_in_world(py, rank, world_size)?;
        let resharded = py.detach(|| {
            let mut loader = self.holder.lock();
            if self.closed.load(Ordering::Acquire) || loader.is_closed() {
                return None;
            }
            let done = loader.reshard(rank, world_size);
            self.renew_stop(&loader);
            Some(done)
        });
        match resharded {
            None => Err(self.closed_error(py)),
            Some(done) => done.map_err(|e| to_py(py, e)),
        }
    }
}
