//! The core loader a `pinring.Loader` forwards to, built from its arguments (checked by
//! the constructor): the run, the pipeline's sizes and the device; and why it did not
//! start, in the words of the Loader's arguments.

use std::time::Duration;

use pyo3::prelude::*;

use pinring::source::{AnySource, State};
use pinring::{CuStream, CudaOptions, Loader, LoaderBuilder};

use crate::device::{Device, DeviceRequest};
use crate::dispatch::AnyLoader;
use crate::errors::classes::config;
use crate::errors::from_core::to_py_with;
use crate::loader::steps::Steps;

/// Spans the trace ring holds when `trace=` is given (40 bytes each: 40 MiB).
pub(crate) const TRACE_SPANS: usize = 1 << 20;

/// The Loader's arguments, checked, that make its core loader.
#[derive(Debug)]
pub(crate) struct Opening {
    /// The source, without a run.
    pub(crate) source: AnySource,
    /// `rank` and `world_size` (the source's, or the topology's data-parallel ones).
    pub(crate) place: (u64, u64),
    /// `batch_size` (None for packed documents).
    pub(crate) batch_size: Option<u64>,
    /// `drop_last`.
    pub(crate) drop_last: bool,
    /// `epochs` (None: no cap).
    pub(crate) epochs: Option<u64>,
    /// `start_step` and `skip_steps`.
    pub(crate) steps: Steps,
    /// `state`, read (and merged).
    pub(crate) state: Option<State>,
    /// `host_slots`, `device_slots`.
    pub(crate) slots: (usize, usize),
    /// `decode_threads` (None: one per core).
    pub(crate) decode_threads: Option<usize>,
    /// `lease_timeout`.
    pub(crate) lease_timeout: Duration,
    /// `host_budget` and `device_budget` (bytes).
    pub(crate) budgets: (usize, usize),
    /// Spans of the trace ring (0: no trace).
    pub(crate) trace_spans: usize,
    /// `poison_released`.
    pub(crate) poison_released: bool,
    /// The device asked for.
    pub(crate) request: DeviceRequest,
    /// The raw `CUstream` of `stream=` (cuda only), declared to the core as the consumer
    /// stream; the Loader keeps its object alive.
    pub(crate) consumer_stream: Option<usize>,
}

/// Why a loader did not start: the core's error, with the device asked for as context.
#[derive(Debug)]
pub(crate) struct OpenError(pinring::Error, Option<String>);

impl Opening {
    /// The builder of the run, on the cpu backend.
    fn builder(&self) -> LoaderBuilder<AnySource> {
        let (rank, world_size) = self.place;
        let mut b = Loader::builder(self.source.clone())
            .rank(rank)
            .world_size(world_size)
            .drop_last(self.drop_last)
            .start_step(self.steps.start)
            .skip_steps(
                self.steps
                    .skip
                    .iter()
                    .map(|&(a, b)| a..b)
                    .collect::<Vec<_>>(),
            )
            .host_slots(self.slots.0)
            .device_slots(self.slots.1)
            .lease_timeout(self.lease_timeout)
            .host_budget(self.budgets.0)
            .device_budget(self.budgets.1)
            .trace(self.trace_spans)
            .poison_released(self.poison_released);
        if let Some(n) = self.batch_size {
            b = b.batch_size(n);
        }
        if let Some(e) = self.epochs {
            b = b.epochs(e);
        }
        if let Some(n) = self.decode_threads {
            b = b.decode_threads(n);
        }
        if let Some(state) = &self.state {
            b = b.resume(state);
        }
        b
    }

    /// Builds the core loader on the device asked for (call it without the GIL: it opens
    /// the device, walks to the start and starts threads).
    pub(crate) fn open(&self) -> Result<(AnyLoader, Device), OpenError> {
        match self.request {
            DeviceRequest::Cpu => {
                let loader = self.builder().build().map_err(|e| OpenError(e, None))?;
                Ok((AnyLoader::Cpu(loader), Device::Cpu))
            }
            DeviceRequest::Cuda(ordinal) => {
                let (options, asked) = match ordinal {
                    Some(n) => (CudaOptions::ordinal(n), format!("device=\"cuda:{n}\"")),
                    // The device whose context is current on this thread (as PyTorch
                    // leaves it after torch.cuda.set_device or any CUDA op), else 0.
                    None => (CudaOptions::current_or(0), "device=\"cuda\"".to_owned()),
                };
                let mut builder = self.builder().cuda(options);
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
