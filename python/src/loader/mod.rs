//! `pinring.Loader`: one core [`pinring::Loader`] of either backend over a built-in
//! source, which it forwards to. Here: the class and its attributes; `open.rs` builds the
//! core loader from the arguments, `pop.rs` pops (the GIL held for a batch that is
//! ready, released in slices otherwise), `states.rs` saves, loads and reshards its run,
//! `epochs.rs` is `EpochIterator`, what `iter(loader)` returns, `steps.rs` reads
//! `start_step` and `skip_steps`.

pub(crate) mod epochs;
mod open;
mod pop;
mod states;
mod steps;

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::args;
use crate::batch::PyBatch;
use crate::device::Device;
use crate::dispatch::{AnyLoader, AnyStop};
use crate::errors::classes::{config, error, Kind};
use crate::errors::from_core::to_py;
use crate::fixed_views::BatchShape;
use crate::fixed_views::FixedViews;
use crate::gil::detached;
use crate::holder::PipelineHolder;
use crate::source::given::Given;
use crate::stats::stats_dict;
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};

/// Feeds batches of a source to a device: decode in Rust threads into a pinned host ring,
/// copy to device slots on a side stream, hand out `Batch`es in order.
///
/// `for batch in loader:` runs one epoch: each `iter(loader)` yields the batches from the
/// next one to the end of its epoch, and the next `iter(loader)` goes on with the next
/// epoch, so `for epoch in range(E): for batch in loader:` trains E epochs, over every
/// source that has epochs. `pop()` goes on across epochs. `batch.epoch` says which epoch a
/// batch belongs to.
///
/// Over a `Documents` source a batch is one training step of this rank (no batch_size):
/// `pop()` gives the next step, and `for batch in loader:` yields the steps of one epoch of
/// the walk, as for windows. How many steps an epoch holds is not known up front
/// (`len(loader)` raises TypeError): the loop ends where the next step is of the next
/// epoch, and that step, popped to see its epoch, is kept undelivered for the next loop (or
/// `pop()`): nothing is lost, and `state_dict()` does not count it.
///
/// Over a `Mixture`, the batches are the mixture's steps (`batch.sources` says each row's
/// source). A mixture has no epochs of its own (each source walks its own), so one
/// `for batch in loader:` is the mixture's whole run, to the end its `stop` rule sets
/// (endless with stop="never"); `batch.epoch` is 0, `len(loader)` raises TypeError and
/// `epochs` is refused.
///
/// Every batch has a step (`batch.step`): the k-th batch of this rank in an uninterrupted
/// run, counted across epochs, the same on every rank; a resumed run numbers on.
///
/// Args:
///     src: a TokenWindows, a FixedRecords, a Documents or a Mixture.
///     batch_size: samples per batch (an epoch's last batch may be short, see drop_last);
///         required for TokenWindows, FixedRecords and a Mixture of them, refused
///         (ConfigError) for Documents and a Mixture of them, whose batch is one step of
///         `tokens_per_batch` tokens.
///     device: None or "cpu": the cpu backend (device slots in host memory); "cuda:N", N
///         or torch.device("cuda", N): the primary context of device N, the one PyTorch
///         uses; "cuda" or torch.device("cuda"): the device whose context is current on
///         this thread (PyTorch's current device once it touched CUDA), else device 0.
///     host_slots: batches decode may run ahead in pinned host memory.
///     device_slots: batches you may hold at once (each a device slot).
///     decode_threads: the decode pool's threads (None: one per core, or with `topology=`
///         of several local ranks the node's share: the cores over local_world_size).
///     pop_timeout: seconds a pop() waits by default before PopTimeout (None: no limit).
///     drop_last: drop each epoch's short last batch (Documents: never short; True is a
///         ConfigError).
///     epochs: how many epochs to deliver, counted from epoch 0 also when resumed; None
///         (the default): no cap. Iterating past the cap raises StoppedError. For
///         Documents the run ends where the walk's epoch `epochs` would begin, also when
///         skip_steps run past it (the walk over skipped steps stops there too). A Mixture
///         has no epochs: end it with its `stop` instead (epochs is a ConfigError).
///     state: a state_dict() to resume from (of any rank of a run at any world size, or
///         a list of every rank's); for Documents, the walk goes on from the saved cursor
///         with this source's world size. A Mixture's state must have this mixture's
///         weights in force (to change them, use `load_state_dict(state, weights=...)`).
///     start_step: begin at this step: exactly where an uninterrupted run stands at step
///         `start_step`, with the same batches from there on (their `batch.step` from
///         `start_step`), found by arithmetic on the schedule (Documents: by walking the
///         shards' index, about a microsecond a step): nothing before it is read or
///         decoded. Resuming from a `state` before it begins at it too. A start_step at or
///         past the end of a run that ends (with `epochs`; a Mixture with a stop rule) is
///         a ConfigError saying how many steps the run has, raised here: for windows and
///         records by arithmetic, for Documents by the walk to the start step, which stops
///         at the end of the last epoch, for a Mixture by its walk to the start step,
///         which stops where the stop rule ends the run.
///     skip_steps: steps to leave out of the stream: a list of half-open ranges `(a, b)`
///         (steps a to b - 1, as `range(a, b)` and Rust's `a..b`; `range` objects are
///         taken too). The other batches keep their step numbers; the skipped ranges are
///         recorded in `state_dict()`, so a run resumed from it keeps skipping them (with
///         any its own skip_steps add). The "roll back and skip the bad data" recovery
///         after a loss spike. For Documents (alone or mixed), a skipped step's documents
///         are used up, not delivered: the other steps keep their documents too.
///     lease_timeout: seconds a pop() waits while you hold every device slot before it
///         raises AllSlotsLeased naming the batches never released (a pop can never
///         succeed then: without this it would hang).
///     host_budget: most bytes the pinned host ring may take (host_slots × batch bytes);
///         None: 16 GiB, or with `topology=` of several local ranks the node's share of it
///         (16 GiB / local_world_size), as decode_threads=None then takes the node's share
///         of the cores: the loaders of a node together take what one alone would.
///     device_budget: most bytes the device slots may take (device_slots × batch bytes).
///     trace: a path: record a timeline of every stage (the latest 2**20 spans) and write
///         it there as Chrome trace JSON at close() (open it in https://ui.perfetto.dev);
///         write_trace() writes it at any time.
///     poison_released: a debug mode: a released device slot is filled with a poison
///         pattern (ordered after its release fence), so a view read after its release
///         shows out-of-range values instead of the next batch's plausible data. The
///         environment variable PINRING_POISON_RELEASED=1 turns it on for every loader.
///     stream: (cuda) the stream your steps run on, declared once: a torch.cuda.Stream
///         (`.cuda_stream`), a cupy.cuda.Stream (`.ptr`), an object of the CUDA stream
///         protocol (`__cuda_stream__`) or a raw CUstream int (0: the default stream).
///         Every pop() makes it wait for its batch's copy, stream-side (the host never
///         blocks), and binds the batch to it; `batch.release()` with no argument fences
///         the slot on it. A loop then looks up no stream per step. Kept alive as long as
///         the loader or a batch of it exists. It must be of the loader's device (else
///         ConfigError). A stream object of its own (torch.cuda.Stream()) releases
///         cheapest: a release fenced on 0, 1 or 2 (the default streams, named relative
///         to the calling thread) is done with the GIL released. None (the default): no
///         stream is declared; cpu: only None.
///     topology: a `pinring.Topology`: this loader is its data-parallel rank `dp_rank` of
///         `dp_size` (ranks of one model-parallel group get the same batches), instead of
///         the source's rank and world_size; a source made with another rank or
///         world_size is a ConfigError. With several local ranks (`local_world_size`),
///         decode_threads and host_budget left None default to the node's share.
///     fixed_views: a DLPack consumer (`torch.from_dlpack`, `cupy.from_dlpack`,
///         `numpy.from_dlpack`, any callable taking a DLPack producer): the CUDA-graph
///         mode. It is called once per device slot (and field) when a batch first lands
///         in the slot, to view the whole slot (`(batch_size, cols)`; a field: as long
///         as it can be), and `batch.view()` returns that object every time the slot
///         comes round: the same object at the same address, so a graph captured over
///         `batch.view()` replays on every batch of `batch.slot`. cuda: needs `stream=`
///         (the views are read on it; each pop orders its batch there).
///
/// Raises:
///     ConfigError: an argument is out of range (`e.argument` names it), or a batch does
///         not fit its budget.
///     CudaError: no driver, no such device, or a failed driver call.
///     CheckpointError: `state` is not a state of this source.
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", frozen)]
#[derive(Debug)]
pub struct Loader {
    holder: Arc<PipelineHolder>,
    /// Stops the pipeline in `holder` without its lock (replaced with the pipeline by
    /// `load_state_dict` and `reshard`; `None` once the core loader closed).
    stop: Mutex<Option<AnyStop>>,
    closed: AtomicBool,
    /// The source as given: its rows' shape, its class, its step layout.
    given: Given,
    /// Samples per full batch (1 for packed documents: a batch is a step).
    batch_size: usize,
    drop_last: bool,
    device: Device,
    /// The raw `CUstream` of `stream=`, which every pop binds its batch to.
    consumer_stream: Option<usize>,
    pop_timeout: Option<Duration>,
    /// Where `close()` writes the trace.
    trace: Option<PathBuf>,
    /// What every batch shares; its field layout is read from the first batch popped.
    shape: OnceLock<BatchShape>,
    /// The views of `fixed_views=`, per slot, once made.
    fixed: Option<FixedViews>,
}

impl Loader {
    /// The data-parallel rank and world size of the run.
    pub(crate) fn place(&self, py: Python<'_>) -> (u64, u64) {
        let loader = self.holder.lock_attached(py);
        (loader.run().rank, loader.run().world_size)
    }

    /// Batches handed out so far.
    pub(crate) fn popped(&self, py: Python<'_>) -> u64 {
        self.holder.lock_attached(py).popped()
    }

    /// `guard`'s record of this loader now, and the pops so far (the loader's lock let go
    /// before the guard's collective runs).
    pub(crate) fn guard_record(
        &self,
        py: Python<'_>,
        guard: &mut pinring::RankGuard,
    ) -> PyResult<(pinring::RankRecord, u64)> {
        let loader = self.holder.lock_attached(py);
        loader.guard_record(guard).map_err(|e| to_py(py, e))
    }

    fn stop(&self) {
        if let Some(stop) = &*self.stop.lock().unwrap_or_else(|e| e.into_inner()) {
            stop.stop();
        }
    }

    /// Takes the stop handle of the loader's pipeline now (after a restart).
    fn renew_stop(&self, loader: &AnyLoader) {
        *self.stop.lock().unwrap_or_else(|e| e.into_inner()) = loader.stop_handle();
    }

    fn closed_error(&self, py: Python<'_>) -> PyErr {
        error(py, Kind::Stopped, "the loader is closed")
    }

    /// The TypeError of a question about epochs' lengths asked of a Documents or Mixture
    /// loader.
    fn no_epoch_length(&self, what: &str) -> PyErr {
        let why = if self.given.class == "Mixture" {
            "a Mixture: it has no epochs of its own (each source has its own), and its run \
             ends where its stop rule says"
        } else {
            "a Documents source: how many steps an epoch holds depends on where its \
             documents fall (batch.epoch says each step's epoch)"
        };
        pyo3::exceptions::PyTypeError::new_err(format!("{what} is not known up front for {why}"))
    }

    /// Batches an epoch, or the TypeError of `what` where that is not known up front.
    fn epoch_batches_or(&self, py: Python<'_>, what: &str) -> PyResult<u64> {
        self.holder
            .lock_attached(py)
            .epoch_batches()
            .ok_or_else(|| self.no_epoch_length(what))
    }

    /// Writes the trace to `path` (without the GIL); `Ok(None)` when closed.
    fn write_trace_to(&self, py: Python<'_>, path: PathBuf) -> PyResult<Option<usize>> {
        let holder = &self.holder;
        let written = py.detach(|| {
            let loader = holder.lock();
            if loader.is_closed() {
                return Ok(None);
            }
            let file = File::create(&path)?;
            loader.write_trace(BufWriter::new(file)).map(Some)
        });
        written.map_err(|e| {
            if e.kind() == std::io::ErrorKind::Unsupported {
                config(
                    py,
                    "trace",
                    "tracing is off: make the Loader with trace=PATH to record a timeline",
                )
            } else {
                let message = format!("could not write the trace to {}: {e}", path.display());
                pyo3::exceptions::PyOSError::new_err(message)
            }
        })
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl Loader {
    /// The next batch, in order, across epochs; None once every batch of `epochs` was
    /// delivered (never with epochs=None).
    ///
    /// A batch that is ready is taken at once, with the GIL held (with `stream=`, the
    /// declared stream is made to wait for it, one stream-side wait). Otherwise it waits
    /// with the GIL released, in slices of 30 ms with a signal check between them (Ctrl-C
    /// raises KeyboardInterrupt at once).
    ///
    /// Args:
    ///     timeout: seconds to wait (default: the loader's `pop_timeout`, else no limit);
    ///         0 never waits.
    ///
    /// Raises:
    ///     PopTimeout: no batch within `timeout`; `e.behind` names the stage behind.
    ///     AllSlotsLeased: you held every device slot for `lease_timeout` seconds.
    ///     DecodeError, SourceError: a sample failed, raised once, after every batch
    ///         before it; then StoppedError. For Documents, a step that needs more
    ///         documents than max_docs allows is a ConfigError (argument "max_docs") and
    ///         one that fits nowhere in an epoch (a schedule grown past the data) a
    ///         SourceError, each naming the step, after the steps before it.
    ///     StoppedError: the loader is closed or stopped after an error.
    #[pyo3(signature = (timeout = None))]
    fn pop(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyBatch>>> {
        let limit = match timeout {
            Some(t) => Some(args::seconds(py, "timeout", t)?),
            None => self.pop_timeout,
        };
        self.pop_within(py, limit, None)
    }

    /// A snapshot of the pipeline's counters (seconds for times), slot states, and the
    /// bottleneck verdict: `bottleneck` ("consumer", "source", "decode", "copy",
    /// "device_slots", "cpu", "hand_off" or "not_yet") and `verdict`, a sentence with the
    /// figures that say so.
    ///
    /// Over a Mixture, `sources` lists each source's part, by index: `samples` (decoded:
    /// those popped and the few batches in flight), `share` (of all samples decoded),
    /// `decode` (seconds its decodes took, summed over the decode threads) and
    /// `per_sample`; `slowest_source` is the index of a source that decodes at least 1.5
    /// times slower per sample than the others (else None), and a decode-bound verdict
    /// names it. (`sources` is empty and `slowest_source` None for a single source.)
    ///
    /// `node_share`: the share of its node the loader took, `local_ranks` (the node's
    /// processes it shares with: `topology=`'s local_world_size, else 1), `decode_threads`
    /// and `host_budget` (bytes).
    #[gen_stub(override_return_type(type_repr = "dict[str, typing.Any]", imports = ("typing",)))]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let stats = self.holder.lock_attached(py).stats();
        let d = stats_dict(py, &stats)?;
        d.set_item("closed", self.closed.load(Ordering::Acquire))?;
        Ok(d)
    }

    /// Writes the timeline recorded so far as Chrome trace JSON (open it in
    /// https://ui.perfetto.dev or chrome://tracing) and returns how many spans it holds.
    ///
    /// Args:
    ///     path: where to write it (default: the Loader's `trace` path).
    ///
    /// Raises:
    ///     ConfigError: the Loader was made without `trace=`.
    ///     StoppedError: the loader is closed (close() wrote the trace already).
    ///     OSError: the file could not be written.
    #[pyo3(signature = (path = None))]
    fn write_trace(&self, py: Python<'_>, path: Option<PathBuf>) -> PyResult<usize> {
        let Some(path) = path.or_else(|| self.trace.clone()) else {
            return Err(config(
                py,
                "trace",
                "tracing is off: make the Loader with trace=PATH to record a timeline",
            ));
        };
        if self.closed.load(Ordering::Acquire) {
            return Err(self.closed_error(py));
        }
        self.write_trace_to(py, path)?
            .ok_or_else(|| self.closed_error(py))
    }

    /// Stops the pipeline: a pop blocked in another thread raises StoppedError, and so do
    /// later pops. Writes the trace (with `trace=`). Batches still held stay valid and can
    /// be released. The pipeline's threads are joined and its memory freed now, or, while
    /// batches (or views of them) are alive, when the last goes. Idempotent.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let first = !self.closed.swap(true, Ordering::AcqRel);
        self.stop();
        // The fixed views keep the pipeline's memory: let it go with the last batch.
        if let Some(fixed) = &self.fixed {
            fixed.clear(py);
        }
        let written = match (&self.trace, first) {
            (Some(path), true) => self.write_trace_to(py, path.clone()).map(|_| ()),
            _ => Ok(()),
        };
        let holder = &self.holder;
        py.detach(|| {
            // Only this loader holds the pipeline: close it now (joins its threads, frees
            // its memory; a batch kept for the next pop goes back). Otherwise the last
            // batch or view holding it drops it.
            if Arc::strong_count(holder) == 1 {
                holder.lock().close();
            }
        });
        written
    }

    /// Whether close() was called.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Samples per full batch (1 for Documents: a batch is one step).
    #[getter]
    fn batch_size(&self) -> usize {
        self.batch_size
    }

    /// The step the run begins at (`start_step`; 0 from the start).
    #[getter]
    fn start_step(&self, py: Python<'_>) -> u64 {
        self.holder.lock_attached(py).run().start_step
    }

    /// The step ranges given as `skip_steps`, as `(start, end)` pairs (half-open). A state
    /// resumed from may add its own: `state_dict()["skip"]` holds every range in force.
    #[getter]
    fn skip_steps(&self, py: Python<'_>) -> Vec<(u64, u64)> {
        self.holder.lock_attached(py).run().skip_pairs()
    }

    /// "cpu" or "cuda:N".
    #[getter]
    fn device(&self) -> String {
        self.device.name()
    }

    /// The batches' element type.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.given.row.dtype.name()
    }

    /// `(batch_size, cols)`: a full batch's shape (Documents: `(1, slot bytes)`; its
    /// fields have their own shapes).
    #[getter]
    #[gen_stub(override_return_type(type_repr = "tuple[int, int]"))]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, [self.batch_size, self.given.row.cols])
    }

    /// Host slots in the pinned ring.
    #[getter]
    fn host_slots(&self, py: Python<'_>) -> usize {
        self.holder.lock_attached(py).slots().0
    }

    /// Device slots: how many batches you can hold at once.
    #[getter]
    fn device_slots(&self, py: Python<'_>) -> usize {
        self.holder.lock_attached(py).slots().1
    }

    /// Whether a short last batch is dropped.
    #[getter]
    fn drop_last(&self) -> bool {
        self.drop_last
    }

    /// Epochs the run delivers, counted from epoch 0 also when resumed (None: no cap).
    #[getter]
    fn epochs(&self, py: Python<'_>) -> Option<u64> {
        self.holder.lock_attached(py).epochs()
    }

    /// The epoch of the next batch (from 0). For Documents, whose epochs' ends are not
    /// known before the walk gets there: the epoch of the next step once it was seen (an
    /// epoch's loop that ended on it keeps it for the next pop), else of the last step
    /// popped (before any, the epoch of the state it resumed from, else 0).
    #[getter]
    pub(crate) fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        Ok(self.holder.lock_attached(py).epoch())
    }

    /// Samples per epoch for this rank: the same on every rank (the epoch's tail that
    /// would not split evenly is dropped: fewer than world_size × batch_size windows with
    /// drop_last, fewer than world_size without).
    ///
    /// Raises:
    ///     TypeError: for Documents (not known up front) and a Mixture (no epochs).
    #[getter]
    fn epoch_len(&self, py: Python<'_>) -> PyResult<u64> {
        self.holder
            .lock_attached(py)
            .epoch_len()
            .ok_or_else(|| self.no_epoch_length("epoch_len"))
    }

    /// Batches per epoch for this rank: the same on every rank (as `len(loader)`).
    ///
    /// Raises:
    ///     TypeError: for Documents (not known up front) and a Mixture (no epochs).
    #[getter]
    fn epoch_batches(&self, py: Python<'_>) -> PyResult<u64> {
        self.epoch_batches_or(py, "epoch_batches")
    }

    /// Batches this loader delivers in all, from its start (its `start_step`) or the
    /// state it resumed from, the skipped steps left out; None with epochs=None, and for
    /// Documents (not known up front) and a Mixture.
    #[getter]
    fn total_batches(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        let total = self.holder.lock_attached(py).total_batches();
        total.map_err(|e| to_py(py, e))
    }

    /// Batches per epoch for this rank (`epoch_batches`), as a DataLoader's len() is.
    ///
    /// Raises:
    ///     TypeError: for Documents (steps per epoch are not known up front) and a
    ///         Mixture (no epochs).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let batches = self.epoch_batches_or(py, "len(loader)")?;
        Ok(usize::try_from(batches).unwrap_or(usize::MAX))
    }

    /// Always True (a loader is not falsy when an epoch is empty, nor an error for
    /// Documents, which has no len()).
    fn __bool__(&self) -> bool {
        true
    }

    /// Returns the loader itself; leaving the block closes it.
    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Closes the loader.
    #[pyo3(signature = (*_args))]
    fn __exit__(
        &self,
        py: Python<'_>,
        #[gen_stub(override_type(type_repr = "typing.Any", imports = ("typing",)))] _args: &Bound<
            '_,
            PyTuple,
        >,
    ) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// Windows and records: `batch_size`, `shape` and `dtype`. Documents (and a Mixture
    /// of them), whose batch is one step of named fields: the step's size (its
    /// tokens_per_batch and max_seq_len, and how many schedule changes follow) and the
    /// fields.
    fn __repr__(&self, py: Python<'_>) -> String {
        let epochs = self
            .epochs(py)
            .map_or_else(|| "None".to_owned(), |e| e.to_string());
        let closed = if self.closed() { " closed" } else { "" };
        let device = self.device.name();
        let Some((fields, schedule)) = &self.given.layout else {
            return format!(
                "<pinring.Loader batch_size={} shape=({}, {}) dtype={} device={device} \
                 epochs={epochs}{closed}>",
                self.batch_size,
                self.batch_size,
                self.given.row.cols,
                self.given.row.dtype.name(),
            );
        };
        let first = schedule.at(0);
        let changes = match schedule.entries().len() - 1 {
            0 => String::new(),
            n => format!(" ({n} schedule change(s) later)"),
        };
        let names: Vec<&str> = fields.iter().map(|f| f.name.as_str()).collect();
        format!(
            "<pinring.Loader of {}: a batch is one step of tokens_per_batch={} \
             max_seq_len={}{changes}, fields=({}) device={device} epochs={epochs}{closed}>",
            if self.given.class == "Mixture" {
                "a Mixture of Documents"
            } else {
                "Documents"
            },
            first.tokens,
            first.max_seq_len,
            names.join(", "),
        )
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        // Never closed: write the trace now, as close() would have.
        if let (Some(path), false) = (&self.trace, *self.closed.get_mut()) {
            let holder = &self.holder;
            detached(move || {
                let loader = holder.lock();
                if let (false, Ok(file)) = (loader.is_closed(), File::create(path)) {
                    let _ = loader.write_trace(BufWriter::new(file));
                }
            });
        }
        // Nobody can pop any more: stop the threads; the pipeline itself goes with the
        // last batch or view that holds it (with the GIL released, see PipelineHolder).
        self.stop();
    }
}
