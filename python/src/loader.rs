//! `pinring.Loader`: a pipeline of either backend over a built-in source, and
//! `pinring.EpochIterator`, what `iter(loader)` returns: one epoch's batches.

use std::fs::File;
use std::io::BufWriter;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use pinring::{Config, Stats};

use crate::args;
use crate::batch::{BatchShape, PyBatch};
use crate::declared_stream::{self, DeclaredStream};
use crate::device::{self, Device, DeviceRequest};
use crate::dispatch::{AnyBatch, AnyStop};
use crate::errors::classes::{config, error, Kind};
use crate::errors::from_core::to_py;
use crate::fixed_views::FixedViews;
use crate::gil::{detached, drop_detached, release_pending};
use crate::holder::{PipelineHolder, Running};
use crate::lease::StreamsBound;
use crate::position::{EpochPlace, Position};
use crate::settings::{OpenError, Settings, TRACE_SPANS};
use crate::source::dtype::Row;
use crate::source::given;
use crate::source::mixture::{build_error, Mixture};
use crate::source::spec::Spec;
use crate::source::steps::Steps;
use crate::source::weights::WeightsArg;
use crate::state::{self, SourceState, StateArg};
use crate::stats::stats_dict;
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};

/// A blocked `pop` waits in slices this long, checking for signals (Ctrl-C) in between.
const SLICE: Duration = Duration::from_millis(30);

/// The spec and row shape of a source object, or a TypeError.
fn spec_of(src: &Bound<'_, PyAny>) -> PyResult<(Spec, Row)> {
    if let Ok(m) = src.cast::<Mixture>() {
        return Ok(m.get().spec());
    }
    if let Some((spec, row, _)) = given::single(src) {
        return Ok((spec, row));
    }
    Err(pyo3::exceptions::PyTypeError::new_err(format!(
        "src must be a pinring.TokenWindows, pinring.FixedRecords, pinring.Documents or \
         pinring.Mixture, got {}",
        src.get_type().name()?
    )))
}

/// The ConfigError of a `start_step` at or past the end of a run that has `steps` steps
/// (from step 0): the end of epoch `epochs - 1`, or a mixture's stop rule. The run would
/// deliver nothing.
fn start_past_end(
    py: Python<'_>,
    spec: &Spec,
    start: u64,
    steps: u64,
    epochs: Option<u64>,
) -> PyErr {
    let held = match steps {
        0 => "no step".to_owned(),
        1 => "1 step (step 0".to_owned(),
        n => format!("{n} steps (0 to {}", n - 1),
    };
    let per_epoch = match spec.epoch_batches() {
        Some(b) => format!("; {b} batches an epoch)"),
        None if steps == 0 => String::new(),
        None => ")".to_owned(),
    };
    let (ender, fix) = match (spec.mixture().and_then(|m| m.stop_rule()), epochs) {
        (Some(stop), _) => (
            format!("its stop rule (stop=\"{stop}\")"),
            ", or stop=\"never\" (no end)".to_owned(),
        ),
        (None, Some(e)) => (
            format!("epochs={e}"),
            ", or more epochs (epochs=None: no cap)".to_owned(),
        ),
        (None, None) => ("its end".to_owned(), String::new()),
    };
    config(
        py,
        "start_step",
        format!(
            "start_step={start} is past the end of the run: {ender} gives it \
             {held}{per_epoch}, so it would deliver nothing: give a start_step below \
             {steps}{fix}"
        ),
    )
}

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
///     decode_threads: the decode pool's threads (None: one per core).
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
///     host_budget: most bytes the pinned host ring may take (host_slots × batch bytes).
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
    /// Stops the pipeline in `holder` (replaced with it by `load_state_dict`).
    stop: Mutex<AnyStop>,
    closed: AtomicBool,
    /// The last stats, taken when the pipeline was dropped by `close()`.
    final_stats: Mutex<Option<Stats>>,
    settings: Settings,
    /// `start_step` and `skip_steps`.
    steps: Steps,
    device: Device,
    pop_timeout: Option<Duration>,
    /// Where `close()` writes the trace.
    trace: Option<PathBuf>,
    /// What every batch shares; its field layout is read from the first batch popped.
    shape: OnceLock<BatchShape>,
    /// The views of `fixed_views=`, per slot, once made.
    fixed: Option<FixedViews>,
}

/// What one wait slice of `pop` found.
enum Popped {
    Closed,
    Got(pinring::Result<Option<AnyBatch>>),
}

impl Loader {
    /// The Python batch of a batch just popped: with its slot's fixed views (made now, at
    /// the slot's first use), bound to the declared stream (the core's pop did that).
    fn wrap(&self, py: Python<'_>, batch: AnyBatch) -> PyResult<Py<PyBatch>> {
        let shape = self.shape.get_or_init(|| BatchShape {
            row: self.settings.row,
            batch_size: self.settings.batch_size,
            device: self.device,
            layout: batch.fields().map(Arc::new),
        });
        let views = match &self.fixed {
            None => None,
            Some(fixed) => {
                let (slot, ptr) = batch.slot_and_ptr();
                match fixed.of_slot(py, slot, &self.holder, || shape.fixed_views(ptr)) {
                    Ok(views) => Some(views),
                    Err(e) => {
                        // Released as a drop does, without the GIL (it may synchronize).
                        drop_detached(batch);
                        return Err(e);
                    }
                }
            }
        };
        let mut streams = StreamsBound::default();
        if let Some(raw) = self.settings.consumer_stream {
            streams.bind(raw);
        }
        Py::new(
            py,
            PyBatch::new(batch, streams, shape, self.holder.clone(), views),
        )
    }

    /// Delivers `batch`, popped under the lock of `running` (the pipeline's next one, or
    /// the one kept for this pop), counting it into the position (so `state_dict` and
    /// `load_state_dict` see every pop) — unless `epoch` is given and the batch is of
    /// another epoch: then it is kept for the next pop, uncounted, and `None` says the
    /// epoch ended. A run's end (`batch` `None`) is noted in the position.
    fn deliver(
        running: &mut Running,
        batch: Option<AnyBatch>,
        epoch: Option<u64>,
    ) -> Option<AnyBatch> {
        let Some(batch) = batch else {
            running.position.ended = true;
            return None;
        };
        if epoch.is_some_and(|e| batch.epoch() != e) {
            running.pending = Some(batch);
            return None;
        }
        running.position.samples += batch.samples() as u64;
        running.position.batches += 1;
        running.position.last_epoch = Some(batch.epoch());
        Some(batch)
    }

    /// A pop that never waits, with the GIL held: the ready batch (the common case, a
    /// pipeline ahead of its consumer), the end (or, with `epoch`, the end of that epoch),
    /// or an error; `None` when the caller must wait (no batch ready, or another thread
    /// holds the pipeline).
    fn pop_ready(
        &self,
        py: Python<'_>,
        epoch: Option<u64>,
    ) -> Option<PyResult<Option<Py<PyBatch>>>> {
        let popped = {
            let mut running = self.holder.try_lock()?;
            if self.closed.load(Ordering::Acquire) {
                return Some(Err(self.closed_error(py)));
            }
            let running = &mut *running;
            let popped = match running.pending.take() {
                Some(kept) => Ok(Some(Some(kept))),
                None => running.pipeline.as_mut()?.try_pop(),
            };
            popped.map(|p| p.map(|batch| Self::deliver(running, batch, epoch)))
        };
        // Wrapped without the lock (making a slot's fixed views calls Python).
        match popped {
            Ok(None) => None,
            Ok(Some(None)) => Some(Ok(None)),
            Ok(Some(Some(batch))) => Some(self.wrap(py, batch).map(Some)),
            Err(pinring::Error::Stopped) if self.closed.load(Ordering::Acquire) => {
                Some(Err(self.closed_error(py)))
            }
            Err(e) => Some(Err(to_py(py, e))),
        }
    }

    /// Checks `stream=` and `fixed_views=` against the device: a cpu loader takes no
    /// stream; a cuda loader's fixed views need one (the stream they are read on, which
    /// each pop orders its batch on); fixed_views must be callable.
    fn check_stream_and_views(
        py: Python<'_>,
        request: DeviceRequest,
        declared: Option<&DeclaredStream>,
        fixed: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        if let Some(f) = fixed {
            if !f.is_callable() {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "fixed_views={} ({}) is not callable: pass a DLPack consumer, such as \
                     torch.from_dlpack",
                    f.repr()?,
                    f.get_type().name()?
                )));
            }
        }
        match (request, declared, fixed) {
            (DeviceRequest::Cpu, Some(d), _) => Err(config(
                py,
                "stream",
                format!(
                    "stream= is a {} but the loader runs on the cpu backend, which has no \
                     CUDA streams: pass stream=None (or device=\"cuda\")",
                    d.form
                ),
            )),
            (DeviceRequest::Cuda(_), None, Some(_)) => Err(config(
                py,
                "stream",
                "fixed_views on cuda needs stream=, the stream the views are read on (and \
                 graphs replayed on): every pop makes it wait for its batch's copy, and \
                 release() fences the slot on it. Pass stream=torch.cuda.current_stream() \
                 (or the stream your steps run on)",
            )),
            _ => Ok(()),
        }
    }

    fn stop(&self) {
        self.stop.lock().unwrap_or_else(|e| e.into_inner()).stop();
    }

    fn closed_error(&self, py: Python<'_>) -> PyErr {
        error(py, Kind::Stopped, "the loader is closed")
    }

    /// The epoch of the next batch and how many batches it has left; None for Documents
    /// and mixtures.
    fn place(&self, py: Python<'_>) -> PyResult<Option<EpochPlace>> {
        let mut running = self.holder.lock_attached(py);
        let running = &mut *running;
        running
            .spec
            .place(&mut running.position)
            .map_err(|e| to_py(py, e))
    }

    /// The source the pipeline runs (a clone: its parts are shared).
    fn spec(&self, py: Python<'_>) -> Spec {
        self.holder.lock_attached(py).spec.clone()
    }

    /// The TypeError of a question about epochs' lengths asked of a Documents or Mixture
    /// loader.
    fn no_epoch_length(&self, py: Python<'_>, what: &str) -> PyErr {
        let why = if self.spec(py).is_mixture() {
            "a Mixture: it has no epochs of its own (each source has its own), and its run \
             ends where its stop rule says"
        } else {
            "a Documents source: how many steps an epoch holds depends on where its \
             documents fall (batch.epoch says each step's epoch)"
        };
        pyo3::exceptions::PyTypeError::new_err(format!("{what} is not known up front for {why}"))
    }

    /// Writes the trace to `path` (without the GIL); `Ok(None)` when closed.
    fn write_trace_to(&self, py: Python<'_>, path: PathBuf) -> PyResult<Option<usize>> {
        let holder = &self.holder;
        let written = py.detach(|| {
            let running = holder.lock();
            let Some(pipeline) = running.pipeline.as_ref() else {
                return Ok(None);
            };
            let file = File::create(&path)?;
            pipeline.write_trace(BufWriter::new(file)).map(Some)
        });
        written.map_err(|e| {
            let message = format!("could not write the trace to {}: {e}", path.display());
            if e.kind() == std::io::ErrorKind::Unsupported {
                config(
                    py,
                    "trace",
                    "tracing is off: make the Loader with trace=PATH to record a timeline",
                )
            } else {
                pyo3::exceptions::PyOSError::new_err(message)
            }
        })
    }
}

impl Loader {
    /// `pop` waiting at most `limit` (`None`: no limit); with `epoch`, a batch of another
    /// epoch is kept for the next pop and `None` says that epoch ended.
    fn pop_within(
        &self,
        py: Python<'_>,
        limit: Option<Duration>,
        epoch: Option<u64>,
    ) -> PyResult<Option<Py<PyBatch>>> {
        // A ready batch is taken with the GIL held: no release and reacquire of it.
        if let Some(popped) = self.pop_ready(py, epoch) {
            return popped;
        }
        let start = Instant::now();
        loop {
            let slice = limit.map_or(SLICE, |l| l.saturating_sub(start.elapsed()).min(SLICE));
            let popped = py.detach(|| {
                let mut running = self.holder.lock();
                if self.closed.load(Ordering::Acquire) {
                    return Popped::Closed;
                }
                let running = &mut *running;
                if let Some(kept) = running.pending.take() {
                    return Popped::Got(Ok(Self::deliver(running, Some(kept), epoch)));
                }
                let Some(pipeline) = running.pipeline.as_mut() else {
                    return Popped::Closed;
                };
                let popped = pipeline.pop_for(slice);
                Popped::Got(popped.map(|batch| Self::deliver(running, batch, epoch)))
            });
            match popped {
                Popped::Closed => return Err(self.closed_error(py)),
                Popped::Got(Ok(Some(batch))) => return self.wrap(py, batch).map(Some),
                Popped::Got(Ok(None)) => return Ok(None),
                Popped::Got(Err(pinring::Error::PopTimeout { behind, .. })) => {
                    let waited = start.elapsed();
                    if limit.is_some_and(|l| waited >= l) {
                        return Err(to_py(py, pinring::Error::PopTimeout { waited, behind }));
                    }
                }
                Popped::Got(Err(pinring::Error::Stopped))
                    if self.closed.load(Ordering::Acquire) =>
                {
                    return Err(self.closed_error(py))
                }
                Popped::Got(Err(e)) => return Err(to_py(py, e)),
            }
            py.check_signals()?;
        }
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl Loader {
    #[new]
    #[pyo3(signature = (src, batch_size = None, device = None, host_slots = 4, device_slots = 2, decode_threads = None, pop_timeout = None, drop_last = false, epochs = None, state = None, *, start_step = 0, skip_steps = None, lease_timeout = 30.0, host_budget = 17179869184, device_budget = 17179869184, trace = None, poison_released = false, stream = None, fixed_views = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        #[gen_stub(override_type(
            type_repr = "TokenWindows | FixedRecords | Documents | Mixture"
        ))]
        src: &Bound<'_, PyAny>,
        batch_size: Option<i128>,
        #[gen_stub(override_type(type_repr = "str | int | typing.Any | None", imports = ("typing",)))]
        device: Option<&Bound<'_, PyAny>>,
        host_slots: i128,
        device_slots: i128,
        decode_threads: Option<i128>,
        pop_timeout: Option<f64>,
        drop_last: bool,
        epochs: Option<i128>,
        state: Option<StateArg<'_>>,
        start_step: i128,
        #[gen_stub(override_type(
            type_repr = "typing.Sequence[tuple[int, int] | range] | None",
            imports = ("typing",)
        ))]
        skip_steps: Option<&Bound<'_, PyAny>>,
        lease_timeout: f64,
        host_budget: i128,
        device_budget: i128,
        trace: Option<PathBuf>,
        poison_released: bool,
        #[gen_stub(override_type(type_repr = "typing.Any | None", imports = ("typing",)))]
        stream: Option<&Bound<'_, PyAny>>,
        #[gen_stub(override_type(
            type_repr = "typing.Callable[[typing.Any], typing.Any] | None",
            imports = ("typing",)
        ))]
        fixed_views: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        // References a loader's last holder left where the GIL was let go go now.
        release_pending(py);
        let (spec, row) = spec_of(src)?;
        let batch_size = match (spec.packs_documents(), batch_size) {
            (false, Some(n)) => args::count(py, "batch_size", n)?,
            (false, None) => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "Loader() needs batch_size for a {} source: Loader(src, batch_size=...)",
                    src.get_type().name()?
                )))
            }
            (true, None) => 1,
            (true, Some(n)) => {
                return Err(config(
                    py,
                    "batch_size",
                    format!(
                        "batch_size={n}: a Documents source (or a Mixture of them) has no \
                         batch_size: each batch is one step of this rank, of the source's \
                         tokens_per_batch tokens (set the step's size there, or its schedule)"
                    ),
                ))
            }
        };
        if spec.packs_documents() && drop_last {
            return Err(config(
                py,
                "drop_last",
                "drop_last=True: a Documents source has no short batch to drop (every step \
                 holds tokens_per_batch + 1 tokens; the walk drops partial steps itself)",
            ));
        }
        if let (true, Some(e)) = (spec.is_mixture(), epochs) {
            return Err(config(
                py,
                "epochs",
                format!(
                    "epochs={e}: a Mixture has no epochs of its own (each source walks its own \
                     epochs): end its run with Mixture(..., stop=\"first\") or \"all\", or \
                     stop popping"
                ),
            ));
        }
        let steps = Steps::parse(py, start_step, skip_steps)?;
        let settings = Settings {
            row,
            batch_size,
            host_slots: args::count(py, "host_slots", host_slots)?,
            device_slots: args::count(py, "device_slots", device_slots)?,
            decode_threads: decode_threads
                .map(|n| args::count(py, "decode_threads", n))
                .transpose()?,
            drop_last,
            epochs: epochs
                .map(|e| args::at_least_one(py, "epochs", e))
                .transpose()?,
            lease_timeout: args::seconds(py, "lease_timeout", lease_timeout)?,
            host_budget: args::bytes(py, "host_budget", host_budget)?,
            device_budget: args::bytes(py, "device_budget", device_budget)?,
            trace_spans: if trace.is_some() { TRACE_SPANS } else { 0 },
            poison_released,
            consumer_stream: None,
        };
        const { assert!(TRACE_SPANS <= Config::MAX_TRACE_SPANS) };
        let pop_timeout = pop_timeout
            .map(|t| args::seconds(py, "pop_timeout", t))
            .transpose()?;
        let request = match device {
            None => DeviceRequest::Cpu,
            Some(d) => device::parse(d)?,
        };
        let declared = stream
            .filter(|s| !s.is_none())
            .map(declared_stream::parse)
            .transpose()?;
        let fixed = fixed_views.filter(|f| !f.is_none());
        Self::check_stream_and_views(py, request, declared.as_ref(), fixed)?;
        let settings = Settings {
            consumer_stream: declared.as_ref().map(|d| d.raw),
            ..settings
        };
        if let Some(path) = &trace {
            // An unwritable path fails now, not after the run.
            File::create(path).map_err(|e| {
                config(
                    py,
                    "trace",
                    format!("trace={}: cannot write there: {e}", path.display()),
                )
            })?;
        }
        // Every rank gets the same number of batches per epoch.
        let spec = spec
            .batched(
                settings.batch_size as u64,
                drop_last,
                &steps,
                settings.epochs,
            )
            .map_err(|e| to_py(py, e))?;
        let from = state.map(|s| state::read(s.object())).transpose()?;
        if let Some(from) = &from {
            spec.check(from).map_err(|e| to_py(py, e))?;
        }
        let from = py.detach(|| spec.begin(from)).map_err(|e| to_py(py, e))?;
        let past_end = spec
            .steps_if_past_end(steps.start, from.as_ref(), settings.epochs)
            .map_err(|e| to_py(py, e))?;
        if let Some(steps_in_run) = past_end {
            return Err(start_past_end(
                py,
                &spec,
                steps.start,
                steps_in_run,
                settings.epochs,
            ));
        }
        let (pipeline, device) = py
            .detach(|| settings.open(&spec, request, from.as_ref()))
            .map_err(|e| e.into_py_err(py))?;
        let stop = pipeline.stop_handle();
        let fixed = fixed.map(|f| FixedViews::new(f.clone().unbind(), settings.device_slots));
        Ok(Loader {
            holder: Arc::new(PipelineHolder::new(
                pipeline,
                spec,
                from,
                declared.map(|d| d.owner),
            )),
            stop: Mutex::new(stop),
            closed: AtomicBool::new(false),
            final_stats: Mutex::new(None),
            settings,
            steps,
            device,
            pop_timeout,
            trace,
            shape: OnceLock::new(),
            fixed,
        })
    }

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
    /// Every state also holds `step` (the steps all ranks completed: the next batch's
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
        let state = py.detach(|| {
            let mut running = holder.lock();
            let running = &mut *running;
            running.spec.checkpoint(&mut running.position)
        });
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
        let spec = self.spec(py);
        let (spec, state) = match weights {
            None => (spec, state),
            Some(weights) => {
                let weights = weights.read("one per source of the Mixture")?;
                let Some(mix) = spec.mixture() else {
                    return Err(config(
                        py,
                        "weights",
                        "weights= is for a loader over a pinring.Mixture: this loader's \
                         source has no weights",
                    ));
                };
                if !matches!(
                    state,
                    SourceState::Mixture(_) | SourceState::DocumentMixture(_)
                ) {
                    return Err(error(
                        py,
                        Kind::Checkpoint,
                        format!(
                            "the state is of {}, not of a Mixture: it has no weights to change",
                            state.kind()
                        ),
                    ));
                }
                let mix = mix.with_weights(&weights).map_err(|e| build_error(py, e))?;
                let state = mix.reweight(&state).map_err(|e| to_py(py, e))?;
                (Spec::Mixed(mix), state)
            }
        };
        spec.check(&state).map_err(|e| to_py(py, e))?;
        let Some(state) = py
            .detach(|| spec.begin(Some(state)))
            .map_err(|e| to_py(py, e))?
        else {
            return Err(error(py, Kind::Checkpoint, "no state given"));
        };
        let past_end = spec
            .steps_if_past_end(self.steps.start, Some(&state), self.settings.epochs)
            .map_err(|e| to_py(py, e))?;
        if let Some(steps_in_run) = past_end {
            let epochs = self.settings.epochs;
            return Err(start_past_end(
                py,
                &spec,
                self.steps.start,
                steps_in_run,
                epochs,
            ));
        }
        let request = match self.device {
            Device::Cpu => DeviceRequest::Cpu,
            Device::Cuda(n) => DeviceRequest::Cuda(Some(n)),
        };
        enum Restart {
            Closed,
            Popped,
            Failed(OpenError),
            Done,
        }
        let restarted = py.detach(|| {
            // One lock throughout: no pop slips in between the restart and the new
            // position, and the position changes with the pipeline.
            let mut running = self.holder.lock();
            if self.closed.load(Ordering::Acquire) || running.pipeline.is_none() {
                return Restart::Closed;
            }
            if running.position.batches > 0 {
                return Restart::Popped;
            }
            self.stop();
            // Nothing was popped: the loader alone holds the pipeline. Join it and free
            // its memory before the new one takes the same amount.
            drop(running.pipeline.take());
            match self.settings.open(&spec, request, Some(&state)) {
                Ok((pipeline, _)) => {
                    *self.stop.lock().unwrap_or_else(|e| e.into_inner()) = pipeline.stop_handle();
                    running.pipeline = Some(pipeline);
                    running.spec = spec;
                    running.position = Position {
                        from: Some(state),
                        ..Position::default()
                    };
                    Restart::Done
                }
                Err(e) => {
                    self.closed.store(true, Ordering::Release);
                    Restart::Failed(e)
                }
            }
        });
        match restarted {
            Restart::Closed => Err(self.closed_error(py)),
            Restart::Popped => Err(error(
                py,
                Kind::Checkpoint,
                "load_state_dict must come before the first pop: this loader delivered \
                 batches already (make a new Loader, or pass state= to it)",
            )),
            Restart::Failed(e) => Err(e.into_py_err(py)),
            Restart::Done => Ok(()),
        }
    }

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
    #[gen_stub(override_return_type(type_repr = "dict[str, typing.Any]", imports = ("typing",)))]
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let live = self
            .holder
            .lock_attached(py)
            .pipeline
            .as_ref()
            .map(|p| p.stats());
        let stats = match live {
            Some(s) => s,
            None => match self
                .final_stats
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone()
            {
                Some(s) => s,
                None => return Err(self.closed_error(py)),
            },
        };
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
        let stats = py.detach(|| {
            let mut running = holder.lock();
            // A batch kept for the next pop goes back now: nobody can pop it any more.
            drop(running.pending.take());
            let stats = running.pipeline.as_ref().map(|p| p.stats());
            // Only this loader holds the pipeline: drop it now (joins its threads).
            // Otherwise the last batch or view holding it drops it.
            if Arc::strong_count(holder) == 1 {
                drop(running.pipeline.take());
            }
            stats
        });
        if let Some(stats) = stats {
            *self.final_stats.lock().unwrap_or_else(|e| e.into_inner()) = Some(stats);
        }
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
        self.settings.batch_size
    }

    /// The step the run begins at (`start_step`; 0 from the start).
    #[getter]
    fn start_step(&self) -> u64 {
        self.steps.start
    }

    /// The step ranges given as `skip_steps`, as `(start, end)` pairs (half-open). A state
    /// resumed from may add its own: `state_dict()["skip"]` holds every range in force.
    #[getter]
    fn skip_steps(&self) -> Vec<(u64, u64)> {
        self.steps.skip.clone()
    }

    /// "cpu" or "cuda:N".
    #[getter]
    fn device(&self) -> String {
        self.device.name()
    }

    /// The batches' element type.
    #[getter]
    fn dtype(&self) -> &'static str {
        self.settings.row.dtype.name()
    }

    /// `(batch_size, cols)`: a full batch's shape (Documents: `(1, slot bytes)`; its
    /// fields have their own shapes).
    #[getter]
    #[gen_stub(override_return_type(type_repr = "tuple[int, int]"))]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, [self.settings.batch_size, self.settings.row.cols])
    }

    /// Host slots in the pinned ring.
    #[getter]
    fn host_slots(&self) -> usize {
        self.settings.host_slots
    }

    /// Device slots: how many batches you can hold at once.
    #[getter]
    fn device_slots(&self) -> usize {
        self.settings.device_slots
    }

    /// Whether a short last batch is dropped.
    #[getter]
    fn drop_last(&self) -> bool {
        self.settings.drop_last
    }

    /// Epochs the run delivers, counted from epoch 0 also when resumed (None: no cap).
    #[getter]
    fn epochs(&self) -> Option<u64> {
        self.settings.epochs
    }

    /// The epoch of the next batch (from 0). For Documents, whose epochs' ends are not
    /// known before the walk gets there: the epoch of the next step once it was seen (an
    /// epoch's loop that ended on it keeps it for the next pop), else of the last step
    /// popped (before any, the epoch of the state it resumed from, else 0).
    #[getter]
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        if let Some(place) = self.place(py)? {
            return Ok(place.epoch);
        }
        let running = self.holder.lock_attached(py);
        if let Some(kept) = &running.pending {
            return Ok(kept.epoch());
        }
        let position = &running.position;
        Ok(position.last_epoch.unwrap_or(match &position.from {
            Some(crate::state::SourceState::Documents(c)) => c.epoch,
            _ => 0,
        }))
    }

    /// Samples per epoch for this rank: the same on every rank (the epoch's tail that
    /// would not split evenly is dropped: fewer than world_size × batch_size windows with
    /// drop_last, fewer than world_size without).
    ///
    /// Raises:
    ///     TypeError: for Documents (not known up front) and a Mixture (no epochs).
    #[getter]
    fn epoch_len(&self, py: Python<'_>) -> PyResult<u64> {
        self.spec(py)
            .epoch_len()
            .ok_or_else(|| self.no_epoch_length(py, "epoch_len"))
    }

    /// Batches per epoch for this rank: the same on every rank (as `len(loader)`).
    ///
    /// Raises:
    ///     TypeError: for Documents (not known up front) and a Mixture (no epochs).
    #[getter]
    fn epoch_batches(&self, py: Python<'_>) -> PyResult<u64> {
        self.spec(py)
            .epoch_batches()
            .ok_or_else(|| self.no_epoch_length(py, "epoch_batches"))
    }

    /// Batches this loader delivers in all, from its start (its `start_step`) or the
    /// state it resumed from, the skipped steps left out; None with epochs=None, and for
    /// Documents (not known up front) and a Mixture.
    #[getter]
    fn total_batches(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        let Some(epochs) = self.settings.epochs else {
            return Ok(None);
        };
        let (spec, from) = {
            let running = self.holder.lock_attached(py);
            (running.spec.clone(), running.position.from.clone())
        };
        spec.total_batches(from.as_ref(), epochs)
            .map_err(|e| to_py(py, e))
    }

    /// Batches per epoch for this rank (`epoch_batches`), as a DataLoader's len() is.
    ///
    /// Raises:
    ///     TypeError: for Documents (steps per epoch are not known up front) and a
    ///         Mixture (no epochs).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let batches = self
            .spec(py)
            .epoch_batches()
            .ok_or_else(|| self.no_epoch_length(py, "len(loader)"))?;
        Ok(usize::try_from(batches).unwrap_or(usize::MAX))
    }

    /// Always True (a loader is not falsy when an epoch is empty, nor an error for
    /// Documents, which has no len()).
    fn __bool__(&self) -> bool {
        true
    }

    /// The batches from the next one to the end of its epoch; the next `iter()` goes on
    /// with the next epoch. For Documents, an epoch of the walk: it ends where the next
    /// step is of another epoch (that step is kept, undelivered, for the next `iter()` or
    /// `pop()`: nothing is lost). For a Mixture: the mixture's run to its stop.
    ///
    /// Raises:
    ///     StoppedError: every epoch of `epochs` was delivered.
    fn __iter__(slf: Bound<'_, Self>) -> PyResult<EpochIterator> {
        let py = slf.py();
        let loader = slf.get();
        let delivered_all = |epochs: u64| {
            error(
                py,
                Kind::Stopped,
                format!(
                    "this loader delivered all {epochs} epoch(s) it was made for \
                     (epochs={epochs}): iterating it again yields nothing; make it with \
                     epochs=None (the default, no cap) or a larger epochs"
                ),
            )
        };
        let Some(place) = loader.place(py)? else {
            // Documents (and mixtures): the epoch is the first batch's.
            let ended = loader.holder.lock_attached(py).position.ended;
            if let (true, Some(epochs)) = (ended, loader.settings.epochs) {
                return Err(delivered_all(epochs));
            }
            return Ok(EpochIterator {
                loader: slf.unbind(),
                epoch: OnceLock::new(),
                by_place: false,
            });
        };
        if let Some(epochs) = loader.settings.epochs {
            if place.epoch >= epochs {
                return Err(delivered_all(epochs));
            }
        }
        Ok(EpochIterator {
            loader: slf.unbind(),
            epoch: OnceLock::from(place.epoch),
            by_place: true,
        })
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
            .settings
            .epochs
            .map_or_else(|| "None".to_owned(), |e| e.to_string());
        let closed = if self.closed() { " closed" } else { "" };
        let device = self.device.name();
        let spec = self.spec(py);
        let Some((fields, schedule)) = spec.step_layout() else {
            return format!(
                "<pinring.Loader batch_size={} shape=({}, {}) dtype={} device={device} \
                 epochs={epochs}{closed}>",
                self.settings.batch_size,
                self.settings.batch_size,
                self.settings.row.cols,
                self.settings.row.dtype.name(),
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
            if spec.is_mixture() {
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
                let running = holder.lock();
                if let (Some(pipeline), Ok(file)) = (running.pipeline.as_ref(), File::create(path))
                {
                    let _ = pipeline.write_trace(BufWriter::new(file));
                }
            });
        }
        // Nobody can pop any more: stop the threads; the pipeline itself goes with the
        // last batch or view that holds it (with the GIL released, see PipelineHolder).
        self.stop();
    }
}

/// One epoch of a Loader: what `iter(loader)` returns. Yields the batches from the
/// loader's next one to the end of that batch's epoch (over a Documents source, an epoch of
/// the walk: it ends where the next step is of another epoch, and that step is kept for the
/// next iteration; over a Mixture, the mixture's run to its stop).
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", frozen)]
#[derive(Debug)]
pub struct EpochIterator {
    loader: Py<Loader>,
    /// The epoch it yields: known up front where the loader knows where its epochs end
    /// (windows, records), else the first batch's.
    epoch: OnceLock<u64>,
    /// Whether the epoch's end is known from the loader's place (windows, records), rather
    /// than seen in the next batch (Documents, mixtures).
    by_place: bool,
}

#[gen_stub_pymethods]
#[pymethods]
impl EpochIterator {
    /// The epoch this iterator yields (Documents: that of its first step; before it is
    /// popped, the loader's `epoch`).
    #[getter]
    fn epoch(&self, py: Python<'_>) -> PyResult<u64> {
        match self.epoch.get() {
            Some(&e) => Ok(e),
            None => self.loader.get().epoch(py),
        }
    }

    /// Returns the iterator itself.
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// The next batch of this epoch; StopIteration at its end.
    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyBatch>>> {
        let loader = self.loader.get();
        let limit = loader.pop_timeout;
        if self.by_place {
            let epoch = self.epoch.get().copied();
            if loader.place(py)?.is_some_and(|p| Some(p.epoch) != epoch) {
                return Ok(None);
            }
            return loader.pop_within(py, limit, None);
        }
        let batch = loader.pop_within(py, limit, self.epoch.get().copied())?;
        if let Some(batch) = &batch {
            let _ = self.epoch.set(batch.get().epoch());
        }
        Ok(batch)
    }
}
