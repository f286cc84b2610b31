//! `Loader(stream=...)`: the consumer's stream, declared once, duck-typed from what the
//! caller passes (torch and cupy are never imported): a raw `CUstream` int, a
//! `torch.cuda.Stream`, a `cupy.cuda.Stream`, or any object of the CUDA stream protocol
//! (`__cuda_stream__`). It becomes the core's consumer stream
//! ([`pinring::ConfigBuilder::consumer_stream`]): every `pop` makes it wait for its batch
//! (stream-side) and binds the batch to it, and `release()` with no argument fences on it.

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyTuple};

use crate::args::int_handle;
use crate::release_forms::looks_like_stream;

const ACCEPTED: &str = "stream= accepts None, an int (a raw CUstream), a torch.cuda.Stream \
    (.cuda_stream), a cupy.cuda.Stream (.ptr) or an object of the CUDA stream protocol \
    (__cuda_stream__)";

/// The stream a Loader declares, with the object that keeps it alive.
#[derive(Debug)]
pub(crate) struct DeclaredStream {
    /// The raw `CUstream`.
    pub(crate) raw: usize,
    /// What the caller passed, for messages.
    pub(crate) form: &'static str,
    /// The object passed: kept as long as the pipeline may wait or record on its stream
    /// (a cupy stream is destroyed with its object).
    pub(crate) owner: Py<PyAny>,
}

/// An int handle of `what`, 0 or more.
fn raw_handle(value: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    int_handle(value, what, ACCEPTED, || {
        format!("{what} = {value} is not a valid CUstream handle (0 or more). {ACCEPTED}")
    })
}

/// Reads the stream of `stream=`: its raw handle and form, by attributes only (checked in
/// this order: an int; `.cuda_stream` (torch); `__cuda_stream__()` (the protocol, a
/// `(version, handle)` pair); `.ptr` on an object that looks like a stream (cupy)). An
/// event (`.cuda_event`, or a cupy Event) is refused with a TypeError saying so.
pub(crate) fn parse(stream: &Bound<'_, PyAny>) -> PyResult<DeclaredStream> {
    let declared = |raw: usize, form: &'static str| DeclaredStream {
        raw,
        form,
        owner: stream.clone().unbind(),
    };
    if stream.is_instance_of::<PyInt>() && !stream.is_instance_of::<PyBool>() {
        return Ok(declared(
            raw_handle(stream, "stream")?,
            "raw CUstream (an int)",
        ));
    }
    if stream.hasattr("cuda_event")? {
        return Err(PyTypeError::new_err(format!(
            "stream={} is an event: stream= takes the stream your steps run on (an event \
             fences one release: batch.release(event=...)). {ACCEPTED}",
            stream.repr()?
        )));
    }
    if stream.hasattr("cuda_stream")? {
        let raw = raw_handle(&stream.getattr("cuda_stream")?, "stream.cuda_stream")?;
        return Ok(declared(raw, "torch.cuda.Stream"));
    }
    if stream.hasattr("__cuda_stream__")? {
        // A method in the protocol's current form (an attribute in its first).
        let pair = stream.getattr("__cuda_stream__")?;
        let pair = if pair.is_callable() {
            pair.call0()?
        } else {
            pair
        };
        let handle = pair
            .cast::<PyTuple>()
            .ok()
            .filter(|t| t.len() == 2)
            .map(|t| t.get_item(1))
            .transpose()?
            .ok_or_else(|| {
                PyTypeError::new_err(format!(
                    "stream.__cuda_stream__() returned {}, not a (version, handle) pair",
                    pair.repr().map(|r| r.to_string()).unwrap_or_default()
                ))
            })?;
        let raw = raw_handle(&handle, "stream.__cuda_stream__()[1]")?;
        return Ok(declared(raw, "CUDA stream protocol (__cuda_stream__)"));
    }
    if stream.hasattr("ptr")? && stream.hasattr("record")? {
        if !looks_like_stream(stream)? {
            return Err(PyTypeError::new_err(format!(
                "stream={} ({}) is an event: stream= takes the stream your steps run on. \
                 {ACCEPTED}",
                stream.repr()?,
                stream.get_type().name()?
            )));
        }
        let raw = raw_handle(&stream.getattr("ptr")?, "stream.ptr")?;
        return Ok(declared(raw, "cupy.cuda.Stream"));
    }
    Err(PyTypeError::new_err(format!(
        "stream={} ({}) is not a stream. {ACCEPTED}",
        stream.repr()?,
        stream.get_type().name()?
    )))
}
