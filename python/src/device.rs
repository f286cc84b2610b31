//! `device=`: which backend a loader runs on, parsed from what PyTorch users write.

use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyString};

use crate::errors::classes::config;

/// The device a loader asked for, before it is opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeviceRequest {
    /// `"cpu"`: the cpu backend (device slots in host memory, DLPack kDLCPU).
    Cpu,
    /// `"cuda"` / `"cuda:N"` / `N` / `torch.device("cuda", N)`: the primary context of
    /// device `N`; `None` for the thread's current device (device 0 when no CUDA context is
    /// current on the calling thread).
    Cuda(Option<usize>),
}

/// The device a loader runs on, once opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Device {
    /// The cpu backend.
    Cpu,
    /// The cuda backend, on the device with this ordinal.
    Cuda(usize),
}

impl Device {
    /// As PyTorch writes it: `"cpu"`, `"cuda:0"`.
    pub(crate) fn name(self) -> String {
        match self {
            Device::Cpu => "cpu".into(),
            Device::Cuda(n) => format!("cuda:{n}"),
        }
    }

    /// The DLPack `(device_type, device_id)`: kDLCPU = 1, kDLCUDA = 2.
    pub(crate) fn dlpack(self) -> (u32, i32) {
        match self {
            Device::Cpu => (1, 0),
            Device::Cuda(n) => (2, i32::try_from(n).unwrap_or(i32::MAX)),
        }
    }
}

const FORMS: &str = "\"cpu\", \"cuda\", \"cuda:N\", an int N, or a torch.device";

/// Parses `"cpu"`, `"cuda"`, `"cuda:N"` (case-insensitive, spaces allowed around).
fn parse_str(py: Python<'_>, text: &str) -> PyResult<DeviceRequest> {
    let t = text.trim().to_ascii_lowercase();
    if t == "cpu" {
        return Ok(DeviceRequest::Cpu);
    }
    if t == "cuda" {
        return Ok(DeviceRequest::Cuda(None));
    }
    if let Some(n) = t.strip_prefix("cuda:") {
        if let Ok(n) = n.trim().parse::<usize>() {
            return Ok(DeviceRequest::Cuda(Some(n)));
        }
    }
    Err(config(
        py,
        "device",
        format!("device {text:?} is not one of {FORMS}"),
    ))
}

/// Parses the `device` argument: a string, an int, or anything with `.type` and `.index`
/// (a `torch.device`, duck-typed: torch is never imported).
pub(crate) fn parse(device: &Bound<'_, PyAny>) -> PyResult<DeviceRequest> {
    let py = device.py();
    if let Ok(s) = device.cast::<PyString>() {
        return parse_str(py, &s.to_cow()?);
    }
    if device.is_instance_of::<PyBool>() {
        return Err(config(
            py,
            "device",
            format!("device={} is a bool; give {FORMS}", device.repr()?),
        ));
    }
    if let Ok(i) = device.cast::<PyInt>() {
        return match i.extract::<usize>() {
            Ok(n) => Ok(DeviceRequest::Cuda(Some(n))),
            Err(_) => Err(config(
                py,
                "device",
                format!("device={i} is not a CUDA device ordinal (0 or more)"),
            )),
        };
    }
    if device.hasattr("type")? && device.hasattr("index")? {
        let kind: String = device.getattr("type")?.str()?.to_cow()?.into_owned();
        let index = device.getattr("index")?;
        let index = if index.is_none() {
            None
        } else {
            Some(index.extract::<usize>().map_err(|_| {
                config(
                    py,
                    "device",
                    format!("device index {index} is not an ordinal"),
                )
            })?)
        };
        return match (kind.as_str(), index) {
            ("cpu", _) => Ok(DeviceRequest::Cpu),
            ("cuda", n) => Ok(DeviceRequest::Cuda(n)),
            (other, _) => Err(config(
                py,
                "device",
                format!(
                    "device type {other:?} is not supported: pinring runs on \"cpu\" or \"cuda\""
                ),
            )),
        };
    }
    Err(config(
        py,
        "device",
        format!(
            "device={} ({}) is not one of {FORMS}",
            device.repr()?,
            device.get_type().name()?
        ),
    ))
}
