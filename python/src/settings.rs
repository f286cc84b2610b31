//! The Loader's arguments that shape its pipeline, the core config they make, and the
//! pipeline they start on the requested device; the core's config errors named by the
//! Loader argument they are about.

use std::time::Duration;

use pyo3::prelude::*;

use pinring::{ConfigBuilder, ConfigError, CuStream, CudaOptions, LastBatch};

use crate::device::{Device, DeviceRequest};
use crate::dispatch::AnyPipeline;
use crate::errors::classes::{config, error, Kind};
use crate::errors::from_core::to_py_with;
use crate::source::dtype::Row;
use crate::source::spec::Spec;
use crate::state::SourceState;

/// Spans the trace ring holds when `trace=` is given (40 bytes each: 40 MiB).
pub(crate) const TRACE_SPANS: usize = 1 << 20;

/// The Loader's arguments that shape its pipeline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Settings {
    /// One sample's shape and type (from the source).
    pub(crate) row: Row,
    /// `batch_size` (1 for Documents: a batch is a step).
    pub(crate) batch_size: usize,
    /// `host_slots`.
    pub(crate) host_slots: usize,
    /// `device_slots`.
    pub(crate) device_slots: usize,
    /// `decode_threads` (None: one per core).
    pub(crate) decode_threads: Option<usize>,
    /// `drop_last`.
    pub(crate) drop_last: bool,
    /// `epochs` (None: no cap).
    pub(crate) epochs: Option<u64>,
    /// `lease_timeout`.
    pub(crate) lease_timeout: Duration,
    /// `host_budget` (bytes).
    pub(crate) host_budget: usize,
    /// `device_budget` (bytes).
    pub(crate) device_budget: usize,
    /// Spans of the trace ring (0: no trace).
    pub(crate) trace_spans: usize,
    /// `poison_released`.
    pub(crate) poison_released: bool,
    /// The raw `CUstream` of `stream=` (cuda only), declared to the core as the consumer
    /// stream; the Loader keeps its object alive.
    pub(crate) consumer_stream: Option<usize>,
}

/// Why a pipeline did not start.
#[derive(Debug)]
pub(crate) enum OpenError {
    /// The Loader's sizes were refused.
    Config(ConfigError),
    /// Opening failed, with the device asked for as context.
    Core(pinring::Error, Option<String>),
}

impl Settings {
    fn config(&self, spec: &Spec) -> ConfigBuilder {
        let b: ConfigBuilder = spec
            .config_base(self.batch_size, self.row.bytes())
            .host_slots(self.host_slots)
            .device_slots(self.device_slots)
            .last_batch(if self.drop_last {
                LastBatch::Drop
            } else {
                LastBatch::Partial
            })
            .lease_timeout(self.lease_timeout)
            .host_budget(self.host_budget)
            .device_budget(self.device_budget)
            .trace(self.trace_spans)
            .poison_released(self.poison_released);
        match self.decode_threads {
            Some(n) => b.decode_threads(n),
            None => b,
        }
    }

    /// Starts a pipeline over `spec` on the requested device, from `from` (call it
    /// without the GIL: it opens the device and starts threads).
    pub(crate) fn open(
        &self,
        spec: &Spec,
        request: DeviceRequest,
        from: Option<&SourceState>,
    ) -> Result<(AnyPipeline, Device), OpenError> {
        // Sizes are checked before any driver call.
        let cpu = self.config(spec).build().map_err(OpenError::Config)?;
        match request {
            DeviceRequest::Cpu => {
                let pipeline = spec
                    .start(cpu, from, self.epochs)
                    .map_err(|e| OpenError::Core(e, None))?;
                Ok((AnyPipeline::Cpu(pipeline), Device::Cpu))
            }
            DeviceRequest::Cuda(ordinal) => {
                let (options, asked) = match ordinal {
                    Some(n) => (CudaOptions::ordinal(n), format!("device=\"cuda:{n}\"")),
                    // The device whose context is current on this thread (as PyTorch
                    // leaves it after torch.cuda.set_device or any CUDA op), else 0.
                    None => (CudaOptions::current_or(0), "device=\"cuda\"".to_owned()),
                };
                let mut builder = self.config(spec).cuda(options);
                if let Some(raw) = self.consumer_stream {
                    // SAFETY: `raw` is the handle read from the Loader's `stream=` object,
                    // which the pipeline's holder keeps alive for as long as the pipeline
                    // and every batch bound to it exist (`PipelineHolder`); 0, 1 and 2
                    // name the default streams, valid in every context.
                    let stream = unsafe { CuStream::from_raw(raw as *mut _) };
                    builder = builder.consumer_stream(stream);
                }
                let pipeline = builder
                    .build()
                    .map_err(pinring::Error::from)
                    .and_then(|config| spec.start(config, from, self.epochs))
                    .map_err(|e| OpenError::Core(e, Some(asked)))?;
                let ordinal = pipeline.backend().ordinal();
                Ok((AnyPipeline::Cuda(pipeline), Device::Cuda(ordinal)))
            }
        }
    }
}

/// The Loader argument a core setting is about, and how to change it.
fn argument(field: &str) -> (&'static str, &'static str) {
    match field {
        "batch_size" => ("batch_size", "use a smaller batch_size"),
        "bytes_per_sample" | "batch_bytes" => (
            "src",
            "use a shorter seq_len (or smaller records), a narrower dtype or a smaller batch_size",
        ),
        "host_slots" => ("host_slots", "use fewer host_slots"),
        "device_slots" => ("device_slots", "use fewer device_slots"),
        "decode_threads" => ("decode_threads", "use fewer decode_threads"),
        "host_budget" => (
            "host_budget",
            "raise host_budget, or use a smaller batch_size or fewer host_slots",
        ),
        "device_budget" => (
            "device_budget",
            "raise device_budget, or use a smaller batch_size or fewer device_slots",
        ),
        "trace" => ("trace", "turn tracing off"),
        _ => ("", ""),
    }
}

/// A core config error as a `pinring.ConfigError` naming the Loader argument.
fn config_error(py: Python<'_>, e: &ConfigError) -> PyErr {
    let (arg, fix) = argument(e.field());
    let text = match e {
        ConfigError::Zero(_) => format!("{arg} must be at least 1"),
        ConfigError::Overflow(_) => format!(
            "a batch's size overflows: batch_size × bytes per sample is past what this machine \
             can address; {fix}"
        ),
        ConfigError::TooMany { n, max, .. } => {
            format!("{arg}={n} is over the most a loader supports ({max}); {fix}")
        }
        ConfigError::OverBudget {
            what,
            bytes,
            budget,
            ..
        } => format!("{what} would take {bytes} bytes, over the {arg} of {budget} bytes: {fix}"),
        other => other.to_string(),
    };
    let message = format!("invalid Loader arguments: {text}");
    if arg.is_empty() {
        error(py, Kind::Config, message)
    } else {
        config(py, arg, message)
    }
}

impl OpenError {
    /// The Python exception.
    pub(crate) fn into_py_err(self, py: Python<'_>) -> PyErr {
        match self {
            OpenError::Config(e) => config_error(py, &e),
            OpenError::Core(pinring::Error::Config(e), _) => config_error(py, &e),
            // The one fence a pipeline checks when it starts: the declared stream's.
            OpenError::Core(pinring::Error::Fence(why), _) => config(
                py,
                "stream",
                format!("stream= cannot be the loader's consumer stream: {why}"),
            ),
            OpenError::Core(e, context) => to_py_with(py, e, context.as_deref().unwrap_or("")),
        }
    }
}
