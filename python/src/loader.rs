//! `pinring.Loader`: a pipeline of either backend over a built-in source.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use pinring::source::{Checkpoint, RecordBytes, Sampler, Samples, Segmented};
use pinring::{
    Backend, Config, ConfigBuilder, Cpu, Cuda, CudaOptions, LastBatch, Pipeline, Stats, StopHandle,
    TryPop,
};

use crate::batch::{AnyBatch, PyBatch};
use crate::device::{self, Device, DeviceRequest};
use crate::errors::{self, Kind};
use crate::source::{self, Row, Spec};
use crate::state;

/// A blocked `pop` waits in slices this long, checking for signals (Ctrl-C) in between.
const SLICE: Duration = Duration::from_millis(30);

/// A pipeline of either backend.
#[derive(Debug)]
pub(crate) enum AnyPipeline {
    /// The cpu backend.
    Cpu(Pipeline<Cpu>),
    /// The cuda backend.
    Cuda(Pipeline<Cuda>),
}

impl AnyPipeline {
    fn pop_for(&mut self, timeout: Duration) -> pinring::Result<Option<AnyBatch>> {
        Ok(match self {
            AnyPipeline::Cpu(p) => p.pop_for(timeout)?.map(AnyBatch::Cpu),
            AnyPipeline::Cuda(p) => p.pop_for(timeout)?.map(AnyBatch::Cuda),
        })
    }

    /// `Ok(Err(()))` when no batch is ready.
    fn try_pop(&mut self) -> pinring::Result<Result<Option<AnyBatch>, ()>> {
        fn map<B: Backend>(
            t: TryPop<B>,
            f: impl FnOnce(pinring::Batch<B>) -> AnyBatch,
        ) -> Result<Option<AnyBatch>, ()> {
            match t {
                TryPop::Batch(b) => Ok(Some(f(b))),
                TryPop::End => Ok(None),
                TryPop::NotReady => Err(()),
            }
        }
        Ok(match self {
            AnyPipeline::Cpu(p) => map(p.try_pop()?, AnyBatch::Cpu),
            AnyPipeline::Cuda(p) => map(p.try_pop()?, AnyBatch::Cuda),
        })
    }

    fn stats(&self) -> Stats {
        match self {
            AnyPipeline::Cpu(p) => p.stats(),
            AnyPipeline::Cuda(p) => p.stats(),
        }
    }

    fn stop_handle(&self) -> AnyStop {
        match self {
            AnyPipeline::Cpu(p) => AnyStop::Cpu(p.stop_handle()),
            AnyPipeline::Cuda(p) => AnyStop::Cuda(p.stop_handle()),
        }
    }
}

/// Stops a pipeline of either backend from any thread.
#[derive(Debug)]
enum AnyStop {
    Cpu(StopHandle<Cpu>),
    Cuda(StopHandle<Cuda>),
}

impl AnyStop {
    fn stop(&self) {
        match self {
            AnyStop::Cpu(s) => s.stop(),
            AnyStop::Cuda(s) => s.stop(),
        }
    }
}

/// The pipeline, shared by the loader and by every batch popped from it (and every view of
/// those): it is dropped, its threads joined and its memory freed, when the last of them
/// goes; `close()` stops it at once and drops it then if nothing else holds it.
#[derive(Debug)]
pub(crate) struct PipelineHolder {
    pipeline: Mutex<Option<AnyPipeline>>,
}

impl PipelineHolder {
    fn lock(&self) -> MutexGuard<'_, Option<AnyPipeline>> {
        self.pipeline.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A non-negative, finite number of seconds.
fn seconds(py: Python<'_>, name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        errors::config(
            py,
            format!("{name} must be a non-negative number of seconds, got {value}"),
        )
    })
}

fn count(py: Python<'_>, name: &str, value: i128) -> PyResult<usize> {
    usize::try_from(value)
        .ok()
        .filter(|&v| v >= 1)
        .ok_or_else(|| errors::config(py, format!("{name} must be at least 1, got {value}")))
}

/// `sampler`'s samples from `from` (the start of epoch 0 when `None`) to the end of epoch
/// `epochs - 1` (endless when `None`).
fn samples<S: Segmented>(
    sampler: &Sampler<S>,
    from: Option<&Checkpoint>,
    epochs: Option<u64>,
) -> pinring::Result<Samples<S>> {
    let samples = match from {
        None => sampler.iter(),
        Some(state) => sampler.iter_from_checkpoint(state)?,
    };
    Ok(match epochs {
        Some(end) => samples.until_epoch(end),
        None => samples,
    })
}

/// Starts `spec`'s source on a pipeline of backend `B`, from `from` for `epochs`.
fn start<B: Backend>(
    config: Config<B>,
    spec: &Spec,
    from: Option<&Checkpoint>,
    epochs: Option<u64>,
) -> pinring::Result<Pipeline<B>> {
    match spec {
        Spec::Tokens { sampler, decoder } => {
            Pipeline::new(config, *decoder, samples(sampler, from, epochs)?)
        }
        Spec::Records { sampler } => {
            Pipeline::new(config, RecordBytes, samples(sampler, from, epochs)?)
        }
    }
}

/// The Loader's arguments that shape its pipeline.
#[derive(Debug, Clone, Copy)]
struct Settings {
    row: Row,
    batch_size: usize,
    host_slots: usize,
    device_slots: usize,
    decode_threads: Option<usize>,
    drop_last: bool,
    epochs: Option<u64>,
}

impl Settings {
    fn config(&self) -> ConfigBuilder {
        let b: ConfigBuilder = Config::builder()
            .batch_size(self.batch_size)
            .bytes_per_sample(self.row.bytes())
            .host_slots(self.host_slots)
            .device_slots(self.device_slots)
            .last_batch(if self.drop_last {
                LastBatch::Drop
            } else {
                LastBatch::Partial
            });
        match self.decode_threads {
            Some(n) => b.decode_threads(n),
            None => b,
        }
    }

    /// Starts a pipeline on the requested device, from `from` (call without the GIL).
    fn open_detached(
        &self,
        spec: &Spec,
        request: DeviceRequest,
        from: Option<&Checkpoint>,
    ) -> Result<(AnyPipeline, Device), OpenError> {
        let epochs = self.epochs;
        match request {
            DeviceRequest::Cpu => {
                let config = self.config().build().map_err(OpenError::Config)?;
                let pipeline =
                    start(config, spec, from, epochs).map_err(|e| OpenError::Core(e, None))?;
                Ok((AnyPipeline::Cpu(pipeline), Device::Cpu))
            }
            DeviceRequest::Cuda(ordinal) => {
                let asked = match ordinal {
                    Some(n) => format!("device=\"cuda:{n}\""),
                    None => "device=\"cuda\"".to_owned(),
                };
                // Sizes are checked before any driver call.
                self.config().build().map_err(OpenError::Config)?;
                let opened = (|| -> pinring::Result<_> {
                    let options = match ordinal {
                        Some(n) => CudaOptions::ordinal(n),
                        None => current_cuda()?,
                    };
                    let config = self.config().cuda(options).build()?;
                    start(config, spec, from, epochs)
                })();
                let pipeline = opened.map_err(|e| OpenError::Core(e, Some(asked)))?;
                let ordinal = pipeline.backend().ordinal();
                Ok((AnyPipeline::Cuda(pipeline), Device::Cuda(ordinal)))
            }
        }
    }
}

/// Why a pipeline did not start.
enum OpenError {
    /// The Loader's sizes were refused.
    Config(pinring::ConfigError),
    /// Opening failed, with the device asked for as context.
    Core(pinring::Error, Option<String>),
}

impl OpenError {
    fn into_py_err(self, py: Python<'_>) -> PyErr {
        match self {
            OpenError::Config(e) => {
                // The core names its own settings; say which Loader arguments they are.
                let text = e
                    .to_string()
                    .replace("bytes_per_sample", "bytes per sample")
                    .replace(
                        "(raise it with `host_budget`)",
                        "(use a smaller batch_size or fewer host_slots)",
                    )
                    .replace(
                        "(raise it with `device_budget`)",
                        "(use a smaller batch_size or fewer device_slots)",
                    );
                errors::config(py, format!("invalid Loader arguments: {text}"))
            }
            OpenError::Core(e, context) => {
                errors::to_py_with(py, e, context.as_deref().unwrap_or(""))
            }
        }
    }
}

/// The CUDA device a bare `"cuda"` means: the one whose context is current on this thread
/// (as PyTorch leaves it after `torch.cuda.set_device` or any CUDA op), else device 0.
fn current_cuda() -> pinring::Result<CudaOptions> {
    // Loads the driver (a clear error without one) and runs cuInit.
    Cuda::device_count()?;
    let mut ctx = std::ptr::null_mut();
    // SAFETY: the driver library is loaded and initialized (device_count succeeded);
    // cuCtxGetCurrent writes one handle into `ctx`.
    let result = unsafe { pinring::cudarc::driver::sys::cuCtxGetCurrent(&mut ctx) };
    Ok(
        if result == pinring::cudarc::driver::sys::CUresult::CUDA_SUCCESS && !ctx.is_null() {
            CudaOptions::current()
        } else {
            CudaOptions::ordinal(0)
        },
    )
}

/// Feeds batches from a source to the device: decode in Rust threads into a pinned host
/// ring, copy to device slots on a side stream, hand out `Batch`es in order.
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
    /// The source, its epochs cut into `batch_size` batches on every rank.
    spec: Spec,
    device: Device,
    pop_timeout: Option<Duration>,
    /// The state the pipeline started from; `None`: the start of epoch 0.
    from: Mutex<Option<Checkpoint>>,
    /// Samples popped since `from` (a batch holds at least one: 0 means nothing was
    /// popped). Written under the holder's lock, by `pop`; `load_state_dict` reads it
    /// under the same lock.
    consumed: AtomicU64,
}

enum Popped {
    Closed,
    Got(pinring::Result<Option<AnyBatch>>),
    NotReady,
}

impl Loader {
    fn wrap(&self, py: Python<'_>, batch: AnyBatch) -> PyResult<Py<PyBatch>> {
        Py::new(
            py,
            PyBatch::new(batch, self.settings.row, self.device, self.holder.clone()),
        )
    }

    fn stop(&self) {
        self.stop.lock().unwrap_or_else(|e| e.into_inner()).stop();
    }

    /// The state after the batches popped so far.
    fn checkpoint(&self) -> pinring::Result<Checkpoint> {
        let from = self.from.lock().unwrap_or_else(|e| e.into_inner()).clone();
        self.spec
            .checkpoint(from.as_ref(), self.consumed.load(Ordering::Acquire))
    }

    fn closed_error(&self, py: Python<'_>) -> PyErr {
        errors::error(py, Kind::Stopped, "the loader is closed")
    }
}

fn stats_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("batches", s.batches)?;
    d.set_item("bytes", s.bytes)?;
    for (name, t) in [("source", s.source), ("decode", s.decode), ("copy", s.copy)] {
        let stage = PyDict::new(py);
        stage.set_item("busy", t.busy.as_secs_f64())?;
        stage.set_item("waited", t.waited.as_secs_f64())?;
        d.set_item(name, stage)?;
    }
    d.set_item("consumer_stalls", s.consumer_stalls)?;
    d.set_item("consumer_stall_time", s.consumer_stall_time.as_secs_f64())?;
    let slots = |v: Vec<(u64, String)>| -> PyResult<Bound<'py, PyList>> {
        PyList::new(
            py,
            v.into_iter()
                .map(|(seq, state)| {
                    PyTuple::new(
                        py,
                        [
                            seq.into_pyobject(py)?.into_any(),
                            state.into_pyobject(py)?.into_any(),
                        ],
                    )
                })
                .collect::<PyResult<Vec<_>>>()?,
        )
    };
    let name = |state: &dyn std::fmt::Debug| format!("{state:?}").to_ascii_lowercase();
    d.set_item(
        "host_slots",
        slots(s.host_slots.iter().map(|(q, st)| (*q, name(st))).collect())?,
    )?;
    d.set_item(
        "device_slots",
        slots(
            s.device_slots
                .iter()
                .map(|(q, st)| (*q, name(st)))
                .collect(),
        )?,
    )?;
    Ok(d)
}

#[pymethods]
impl Loader {
    #[new]
    #[pyo3(signature = (src, batch_size, device = None, host_slots = 4, device_slots = 2, decode_threads = None, pop_timeout = None, drop_last = false, epochs = Some(1), state = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        src: &Bound<'_, PyAny>,
        batch_size: i128,
        device: Option<&Bound<'_, PyAny>>,
        host_slots: i128,
        device_slots: i128,
        decode_threads: Option<i128>,
        pop_timeout: Option<f64>,
        drop_last: bool,
        epochs: Option<i128>,
        state: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let (spec, row) = source::spec_of(src)?;
        let settings = Settings {
            row,
            batch_size: count(py, "batch_size", batch_size)?,
            host_slots: count(py, "host_slots", host_slots)?,
            device_slots: count(py, "device_slots", device_slots)?,
            decode_threads: decode_threads
                .map(|n| count(py, "decode_threads", n))
                .transpose()?,
            drop_last,
            epochs: epochs
                .map(|e| count(py, "epochs", e).map(|e| e as u64))
                .transpose()?,
        };
        let pop_timeout = pop_timeout
            .map(|t| seconds(py, "pop_timeout", t))
            .transpose()?;
        let request = match device {
            None => DeviceRequest::Cpu,
            Some(d) => device::parse(d)?,
        };
        // Every rank gets the same number of batches per epoch.
        let spec = spec
            .batched(settings.batch_size as u64, drop_last)
            .map_err(|e| errors::to_py(py, e))?;
        let from = state.map(state::read).transpose()?;
        if let Some(from) = &from {
            spec.check(from).map_err(|e| errors::to_py(py, e))?;
        }
        let (pipeline, device) = py
            .detach(|| settings.open_detached(&spec, request, from.as_ref()))
            .map_err(|e| e.into_py_err(py))?;
        let stop = pipeline.stop_handle();
        Ok(Loader {
            holder: Arc::new(PipelineHolder {
                pipeline: Mutex::new(Some(pipeline)),
            }),
            stop: Mutex::new(stop),
            closed: AtomicBool::new(false),
            final_stats: Mutex::new(None),
            settings,
            spec,
            device,
            pop_timeout,
            from: Mutex::new(from),
            consumed: AtomicU64::new(0),
        })
    }

    /// The loader's position as plain data (ints, strings and lists of them, for
    /// `torch.save` or `json`): dataset fingerprint (format, file names and sizes),
    /// window, order, seed, the epoch and how many of its windows all ranks together have
    /// consumed (popped; decoded or in-flight batches do not count). In a data-parallel
    /// run every rank returns the same state, as long as the ranks popped the same number
    /// of batches; `merge_states` checks that.
    fn state_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let state = self.checkpoint().map_err(|e| errors::to_py(py, e))?;
        state::to_dict(py, &state)
    }

    /// Continues from `state` (a `state_dict()` of any rank of a run at any world size,
    /// or a list of every rank's): across the consumed part of the saved run and this
    /// one, every window of the epoch is delivered once, and later epochs are those of an
    /// uninterrupted run at this loader's world size. Must come before the first pop
    /// (the pipeline restarts from `state`; `Loader(..., state=state)` avoids the
    /// restart). A state of another dataset, seq_len, record size, order or seed, or of
    /// ranks that consumed unequal counts, raises CheckpointError.
    fn load_state_dict(&self, py: Python<'_>, state: &Bound<'_, PyAny>) -> PyResult<()> {
        let state = state::read(state)?;
        self.spec.check(&state).map_err(|e| errors::to_py(py, e))?;
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
            // Hold the pipeline's lock throughout, so that no pop slips in.
            let mut guard = self.holder.lock();
            if self.closed.load(Ordering::Acquire) || guard.is_none() {
                return Restart::Closed;
            }
            if self.consumed.load(Ordering::Acquire) > 0 {
                return Restart::Popped;
            }
            self.stop();
            // Nothing was popped: the loader alone holds the pipeline. Join it and free
            // its memory before the new one takes the same amount.
            drop(guard.take());
            match self
                .settings
                .open_detached(&self.spec, request, Some(&state))
            {
                Ok((pipeline, _)) => {
                    *self.stop.lock().unwrap_or_else(|e| e.into_inner()) = pipeline.stop_handle();
                    *guard = Some(pipeline);
                    Restart::Done
                }
                Err(e) => {
                    self.closed.store(true, Ordering::Release);
                    Restart::Failed(e)
                }
            }
        });
        match restarted {
            Restart::Closed => return Err(self.closed_error(py)),
            Restart::Popped => {
                return Err(errors::error(
                    py,
                    Kind::Checkpoint,
                    "load_state_dict must come before the first pop: this loader delivered \
                     batches already (make a new Loader, or pass state= to it)",
                ))
            }
            Restart::Failed(e) => return Err(e.into_py_err(py)),
            Restart::Done => {}
        }
        *self.from.lock().unwrap_or_else(|e| e.into_inner()) = Some(state);
        self.consumed.store(0, Ordering::Release);
        Ok(())
    }

    /// The next batch, in order; None once every batch was delivered.
    ///
    /// Waits with the GIL released, in slices of 30 ms with a signal check between them
    /// (Ctrl-C raises KeyboardInterrupt at once). `timeout` (seconds; default: the
    /// loader's `pop_timeout`, else no limit) bounds the wait: past it PopTimeout names the
    /// stage that is behind. `timeout=0` never waits. A decode or source failure is raised
    /// once, after every batch before it; then, and after close(), StoppedError.
    #[pyo3(signature = (timeout = None))]
    fn pop(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<Option<Py<PyBatch>>> {
        let limit = match timeout {
            Some(t) => Some(seconds(py, "timeout", t)?),
            None => self.pop_timeout,
        };
        let start = Instant::now();
        loop {
            let slice = limit.map_or(SLICE, |l| l.saturating_sub(start.elapsed()).min(SLICE));
            let popped = py.detach(|| {
                let mut guard = self.holder.lock();
                match guard.as_mut() {
                    _ if self.closed.load(Ordering::Acquire) => Popped::Closed,
                    None => Popped::Closed,
                    Some(p) => {
                        let popped = if slice.is_zero() {
                            match p.try_pop() {
                                Ok(Ok(b)) => Popped::Got(Ok(b)),
                                Ok(Err(())) => Popped::NotReady,
                                Err(e) => Popped::Got(Err(e)),
                            }
                        } else {
                            Popped::Got(p.pop_for(slice))
                        };
                        if let Popped::Got(Ok(Some(b))) = &popped {
                            // Under the lock: load_state_dict sees every pop.
                            self.consumed
                                .fetch_add(b.samples() as u64, Ordering::AcqRel);
                        }
                        popped
                    }
                }
            });
            let behind = match popped {
                Popped::Closed => return Err(self.closed_error(py)),
                Popped::Got(Ok(Some(batch))) => return self.wrap(py, batch).map(Some),
                Popped::Got(Ok(None)) => return Ok(None),
                Popped::Got(Err(pinring::Error::PopTimeout { behind, .. })) => Some(behind),
                Popped::NotReady => None,
                Popped::Got(Err(pinring::Error::Stopped))
                    if self.closed.load(Ordering::Acquire) =>
                {
                    return Err(self.closed_error(py))
                }
                Popped::Got(Err(e)) => return Err(errors::to_py(py, e)),
            };
            py.check_signals()?;
            if let Some(limit) = limit {
                let waited = start.elapsed();
                if waited >= limit {
                    let behind = behind.unwrap_or(pinring::Stage::Source);
                    return Err(errors::to_py(
                        py,
                        pinring::Error::PopTimeout { waited, behind },
                    ));
                }
            }
        }
    }

    /// A snapshot of the pipeline's counters (seconds for times) and slot states.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        // A pop in another thread holds the lock for up to one slice: wait without the GIL.
        let holder = &self.holder;
        let live = py.detach(|| holder.lock().as_ref().map(AnyPipeline::stats));
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

    /// Stops the pipeline: a pop blocked in another thread raises StoppedError, and so do
    /// later pops. Batches still held stay valid and can be released. The pipeline's
    /// threads are joined and its memory freed now, or, while batches (or views of them)
    /// are alive, when the last goes. Idempotent.
    fn close(&self, py: Python<'_>) {
        self.closed.store(true, Ordering::Release);
        self.stop();
        let holder = &self.holder;
        let stats = py.detach(|| {
            let mut guard = holder.lock();
            let stats = guard.as_ref().map(AnyPipeline::stats);
            // Only this loader holds the pipeline: drop it now (joins its threads).
            // Otherwise the last batch or view holding it drops it.
            if Arc::strong_count(holder) == 1 {
                drop(guard.take());
            }
            stats
        });
        if let Some(stats) = stats {
            *self.final_stats.lock().unwrap_or_else(|e| e.into_inner()) = Some(stats);
        }
    }

    /// Whether close() was called.
    #[getter]
    fn closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Samples per full batch.
    #[getter]
    fn batch_size(&self) -> usize {
        self.settings.batch_size
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

    /// `(batch_size, cols)`: a full batch's shape.
    #[getter]
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

    /// Epochs the run delivers, counted from epoch 0 also when resumed (None: endless).
    #[getter]
    fn epochs(&self) -> Option<u64> {
        self.settings.epochs
    }

    /// Samples per epoch for this rank: the same on every rank (the epoch's tail that
    /// would not split evenly is dropped: fewer than world_size × batch_size windows with
    /// drop_last, fewer than world_size without).
    #[getter]
    fn epoch_len(&self) -> u64 {
        self.spec.epoch_len()
    }

    /// Batches per epoch for this rank: the same on every rank.
    #[getter]
    fn epoch_batches(&self) -> u64 {
        self.spec.epoch_batches().unwrap_or(0)
    }

    /// Batches this loader delivers in all, from its start or the state it resumed from
    /// (TypeError when endless).
    fn __len__(&self, py: Python<'_>) -> PyResult<usize> {
        let from = self.from.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let n = self
            .spec
            .batches_until(from.as_ref(), self.settings.epochs)
            .map_err(|e| errors::to_py(py, e))?
            .ok_or_else(|| PyTypeError::new_err("an endless loader (epochs=None) has no len()"))?;
        Ok(usize::try_from(n).unwrap_or(usize::MAX))
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<Py<PyBatch>>> {
        self.pop(py, None)
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Closes the loader.
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "<pinring.Loader batch_size={} shape=({}, {}) dtype={} device={} epochs={}{}>",
            self.settings.batch_size,
            self.settings.batch_size,
            self.settings.row.cols,
            self.settings.row.dtype.name(),
            self.device.name(),
            self.settings
                .epochs
                .map_or_else(|| "None".to_owned(), |e| e.to_string()),
            if self.closed() { " closed" } else { "" }
        )
    }
}

impl Drop for Loader {
    fn drop(&mut self) {
        // Nobody can pop any more: stop the threads; the pipeline itself goes with the
        // last batch or view that holds it.
        self.stop();
    }
}
