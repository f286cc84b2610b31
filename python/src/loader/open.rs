//! The core loader a `pinring.Loader` forwards to, built from its arguments (checked by
//! the constructor): the run, the pipeline's sizes and the device; and why it did not
//! start, in the words of the Loader's arguments.

use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex, OnceLock};

use pyo3::prelude::*;

use pinring::source::{AnySource, Source};
use pinring::{Config, CuStream, CudaOptions, LoaderBuilder};

use super::steps::Steps;
use super::Loader;
use crate::args;
use crate::declared_stream::{self, DeclaredStream};
use crate::device::{self, Device, DeviceRequest};
use crate::dispatch::AnyLoader;
use crate::errors::classes::config;
use crate::errors::from_core::to_py_with;
use crate::fixed_views::FixedViews;
use crate::gil::release_pending;
use crate::holder::PipelineHolder;
use crate::source::given::{agreed, Given};
use crate::source::mixture::Mixture;
use crate::source::read;
use crate::state::{self, StateArg};
use crate::stub_attrs::gen_stub_pymethods;
use crate::topology::PyTopology;

/// Spans the trace ring holds when `trace=` is given (40 bytes each: 40 MiB).
pub(crate) const TRACE_SPANS: usize = 1 << 20;

/// The Loader's arguments, checked: the core loader's builder (the run and the pipeline's
/// settings, on the cpu backend), the device asked for, and the raw `CUstream` of
/// `stream=` (cuda only), declared to the core as the consumer stream (the Loader keeps its
/// object alive).
#[derive(Debug)]
pub(crate) struct Opening {
    builder: LoaderBuilder<AnySource>,
    request: DeviceRequest,
    consumer_stream: Option<usize>,
}

/// Why a loader did not start: the core's error, with the device asked for as context.
#[derive(Debug)]
pub(crate) struct OpenError(pinring::Error, Option<String>);

impl Opening {
    /// Builds the core loader on the device asked for (call it without the GIL: it opens
    /// the device, walks to the start and starts threads).
    pub(crate) fn open(self) -> Result<(AnyLoader, Device), OpenError> {
        match self.request {
            DeviceRequest::Cpu => {
                let loader = self.builder.build().map_err(|e| OpenError(e, None))?;
                Ok((AnyLoader::Cpu(loader), Device::Cpu))
            }
            DeviceRequest::Cuda(ordinal) => {
                let (options, asked) = match ordinal {
                    Some(n) => (CudaOptions::ordinal(n), format!("device=\"cuda:{n}\"")),
                    // The device whose context is current on this thread (as PyTorch
                    // leaves it after torch.cuda.set_device or any CUDA op), else 0.
                    None => (CudaOptions::current_or(0), "device=\"cuda\"".to_owned()),
                };
                let mut builder = self.builder.cuda(options);
                if let Some(raw) = self.consumer_stream {
                    // SAFETY: `raw` is the handle read from the Loader's `stream=` object,
                    // which the loader's holder keeps alive for as long as the pipeline
                    // and every batch bound to it exist (`PipelineHolder`); 0, 1 and 2
                    // name the default streams, valid in every context.
                    let stream = unsafe { CuStream::from_raw(raw as *mut _) };
                    builder = builder.consumer_stream(stream);
                }
                let loader = builder.build().map_err(|e| OpenError(e, Some(asked)))?;
                let ordinal = loader.backend().map_or(0, |b| b.ordinal());
                Ok((AnyLoader::Cuda(loader), Device::Cuda(ordinal)))
            }
        }
    }
}

impl OpenError {
    /// The Python exception.
    pub(crate) fn into_py_err(self, py: Python<'_>) -> PyErr {
        match self {
            // The one fence a pipeline checks when it starts: the declared stream's.
            OpenError(pinring::Error::Fence(why), _) => config(
                py,
                "stream",
                format!("stream= cannot be the loader's consumer stream: {why}"),
            ),
            OpenError(e, context) => to_py_with(py, e, context.as_deref().unwrap_or("")),
        }
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl Loader {
    #[new]
    #[pyo3(signature = (src, batch_size = None, device = None, host_slots = 4, device_slots = 2, decode_threads = None, pop_timeout = None, drop_last = false, epochs = None, state = None, *, start_step = 0, skip_steps = None, lease_timeout = 30.0, host_budget = None, device_budget = 17179869184, trace = None, poison_released = false, stream = None, fixed_views = None, topology = None))]
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
        host_budget: Option<i128>,
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
        topology: Option<PyRef<'_, PyTopology>>,
    ) -> PyResult<Self> {
        // References a loader's last holder left where the GIL was let go go now.
        release_pending(py);
        let Some(given) = read::single(src).or_else(|| mixture(src)) else {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "src must be a pinring.TokenWindows, pinring.FixedRecords, pinring.Documents or \
                 pinring.Mixture, got {}",
                src.get_type().name()?
            )));
        };
        let packs_steps = given.source.packs_steps();
        let batch_size = match (packs_steps, batch_size) {
            (false, None) => {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "Loader() needs batch_size for a {} source: Loader(src, batch_size=...)",
                    given.class
                )))
            }
            (_, Some(n)) => Some(args::at_least_one(py, "batch_size", n)?),
            (true, None) => None,
        };
        let place = match &topology {
            Some(t) => agreed(py, given.place, t.data_parallel_place())?,
            None => given.place,
        };
        let steps = Steps::parse(py, start_step, skip_steps)?;
        let host_slots = args::count(py, "host_slots", host_slots)?;
        let device_slots = args::count(py, "device_slots", device_slots)?;
        let decode_threads = decode_threads
            .map(|n| args::count(py, "decode_threads", n))
            .transpose()?;
        let epochs = epochs
            .map(|e| args::at_least_one(py, "epochs", e))
            .transpose()?;
        let lease_timeout = args::seconds(py, "lease_timeout", lease_timeout)?;
        let host_budget = host_budget
            .map(|b| args::bytes(py, "host_budget", b))
            .transpose()?;
        let device_budget = args::bytes(py, "device_budget", device_budget)?;
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
        let state = state.map(|s| state::read(s.object())).transpose()?;
        let (rank, world_size) = place;
        let mut builder = pinring::Loader::builder(given.source.clone())
            .rank(rank)
            .world_size(world_size)
            .drop_last(drop_last)
            .start_step(steps.start)
            .skip_steps(steps.skip)
            .host_slots(host_slots)
            .device_slots(device_slots)
            .lease_timeout(lease_timeout)
            .node_share(topology.as_ref().map_or(1, |t| {
                usize::try_from(t.local_world_size_of()).unwrap_or(usize::MAX)
            }))
            .device_budget(device_budget)
            .trace(if trace.is_some() { TRACE_SPANS } else { 0 })
            .poison_released(poison_released)
            // `batch.host(name)` works for every field: their host bytes are kept.
            .host_fields(
                given
                    .layout
                    .as_ref()
                    .map(|(fields, _)| fields.iter().map(|f| f.name.clone()).collect())
                    .unwrap_or_default(),
            );
        if let Some(n) = batch_size {
            builder = builder.batch_size(n);
        }
        if let Some(e) = epochs {
            builder = builder.epochs(e);
        }
        if let Some(n) = decode_threads {
            builder = builder.decode_threads(n);
        }
        if let Some(bytes) = host_budget {
            builder = builder.host_budget(bytes);
        }
        if let Some(state) = &state {
            builder = builder.resume(state);
        }
        let consumer_stream = declared.as_ref().map(|d| d.raw);
        let opening = Opening {
            builder,
            request,
            consumer_stream,
        };
        let (loader, device) = py
            .detach(|| opening.open())
            .map_err(|e| e.into_py_err(py))?;
        let stop = loader.stop_handle();
        let fixed = fixed.map(|f| FixedViews::new(f.clone().unbind(), device_slots));
        let batch_size = batch_size.map_or(1, |n| usize::try_from(n).unwrap_or(usize::MAX));
        Ok(Loader {
            holder: Arc::new(PipelineHolder::new(loader, declared.map(|d| d.owner))),
            stop: Mutex::new(stop),
            closed: AtomicBool::new(false),
            given,
            batch_size,
            drop_last,
            device,
            consumer_stream,
            pop_timeout,
            trace,
            shape: OnceLock::new(),
            fixed,
        })
    }
}

impl Loader {
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
}

/// The `Mixture` `src` as a loader takes it.
fn mixture(src: &Bound<'_, PyAny>) -> Option<Given> {
    src.cast::<Mixture>()
        .ok()
        .and_then(|m| read::given(m.as_any()))
}
