//! The release forms `Batch.release(event=...)` accepts, duck-typed from what the caller
//! passes (torch and cupy are never imported): None, a raw `CUevent` int, a
//! `torch.cuda.Event`, a `torch.cuda.Stream`, a `cupy.cuda.Stream`, a `cupy.cuda.Event`;
//! and the core release each one makes.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

use pinring::{Batch, CuEvent, CuStream, Cuda, Fence, ReleaseError};

use crate::args::int_handle;

/// A release fence as given to `release(event=...)`, with the raw handle read out.
#[derive(Debug, Clone, Copy)]
pub(crate) enum FenceArg {
    /// `None`.
    Default,
    /// A `CUevent`: reuse waits for it as it stands now.
    Event { raw: usize, form: &'static str },
    /// A `CUstream`: an event is recorded on it now; reuse waits for that.
    Stream { raw: usize, form: &'static str },
}

impl FenceArg {
    /// What the caller passed, for messages.
    pub(crate) fn form(&self) -> &'static str {
        match self {
            FenceArg::Default => "the streams the batch is bound to",
            FenceArg::Event { form, .. } | FenceArg::Stream { form, .. } => form,
        }
    }
}

const ACCEPTED: &str = "release(event=...) accepts None, an int (a raw CUevent), a \
    torch.cuda.Event (.cuda_event), a torch.cuda.Stream (.cuda_stream / .record_event()), a \
    cupy.cuda.Stream (.record()) or a cupy.cuda.Event (.ptr)";

/// An int handle of `what`, 0 or more.
fn handle(value: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    int_handle(value, what, ACCEPTED, || {
        format!("{what} = {value} is not a valid handle (0 or more)")
    })
}

fn nonzero_event(raw: usize, what: &str) -> PyResult<usize> {
    if raw == 0 {
        Err(PyValueError::new_err(format!(
            "{what} is 0: the event was never created or recorded; record it on your stream \
             first, or release with the stream itself"
        )))
    } else {
        Ok(raw)
    }
}

/// Whether an object with `.record` and `.ptr` is a stream (cupy.cuda.Stream) rather than
/// an event (cupy.cuda.Event, which has `.record(stream=None)` too).
pub(crate) fn looks_like_stream(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    if obj.hasattr("wait_event")? || obj.hasattr("__cuda_stream__")? {
        return Ok(true);
    }
    let name = obj.get_type().name()?.to_string();
    if name.contains("Event") {
        return Ok(false);
    }
    // Neither marker: `.record` is taken as the stream form, as documented.
    Ok(true)
}

/// The form of a `release(event=...)` argument, found by inspecting attributes only.
#[derive(Debug)]
pub(crate) enum Form<'py> {
    /// `None`.
    Default,
    /// An int: a raw `CUevent`.
    RawEvent(Bound<'py, PyAny>),
    /// Has `.cuda_event` (torch.cuda.Event).
    TorchEvent(Bound<'py, PyAny>),
    /// Has `.record_event()` (torch.cuda.Stream).
    TorchStream(Bound<'py, PyAny>),
    /// Has `.record()` and looks like a stream (cupy.cuda.Stream).
    CupyStream(Bound<'py, PyAny>),
    /// Has `.ptr` (cupy.cuda.Event).
    CupyEvent(Bound<'py, PyAny>),
}

impl Form<'_> {
    pub(crate) fn name(&self) -> &'static str {
        match self {
            Form::Default => "None",
            Form::RawEvent(_) => "raw CUevent (an int)",
            Form::TorchEvent(_) => "torch.cuda.Event",
            Form::TorchStream(_) => "torch.cuda.Stream",
            Form::CupyStream(_) => "cupy.cuda.Stream",
            Form::CupyEvent(_) => "cupy.cuda.Event",
        }
    }
}

/// Which form `event` has. Checked in this order, since the objects share attributes: a
/// torch Stream (`.cuda_stream` or `.record_event`), a torch Event (`.cuda_event`; it also
/// has `.record()`), then a cupy Stream or Event: a cupy Event has `.record()` and `.ptr`
/// like a cupy Stream (a stream is told apart by `.wait_event` / `__cuda_stream__`, or
/// failing those, by its class name not naming an event).
pub(crate) fn inspect<'py>(event: Option<&Bound<'py, PyAny>>) -> PyResult<Form<'py>> {
    let Some(obj) = event.filter(|e| !e.is_none()) else {
        return Ok(Form::Default);
    };
    let obj = obj.clone();
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        return Ok(Form::RawEvent(obj));
    }
    // First the common form on the hot path, `release(event=torch_stream)`: a lookup that
    // finds its attribute is cheap; one that misses raises (and drops) an AttributeError.
    if obj.hasattr("cuda_stream")? || obj.hasattr("record_event")? {
        return Ok(Form::TorchStream(obj));
    }
    if obj.hasattr("cuda_event")? {
        return Ok(Form::TorchEvent(obj));
    }
    if obj.hasattr("record")? && looks_like_stream(&obj)? {
        return Ok(Form::CupyStream(obj));
    }
    if obj.hasattr("ptr")? {
        return Ok(Form::CupyEvent(obj));
    }
    Err(PyTypeError::new_err(format!(
        "event={} ({}) is not a fence. {ACCEPTED}",
        obj.repr()?,
        obj.get_type().name()?
    )))
}

/// Reads the raw handle a form stands for, calling `record_event()` / `record()` where the
/// object has no handle of its own. `keep` receives objects that must stay alive until the
/// release is done.
pub(crate) fn resolve<'py>(
    form: &Form<'py>,
    keep: &mut Vec<Bound<'py, PyAny>>,
) -> PyResult<FenceArg> {
    let name = form.name();
    let event = |raw: usize, what: &str| -> PyResult<FenceArg> {
        Ok(FenceArg::Event {
            raw: nonzero_event(raw, what)?,
            form: name,
        })
    };
    match form {
        Form::Default => Ok(FenceArg::Default),
        Form::RawEvent(obj) => event(handle(obj, "event")?, "event"),
        Form::TorchEvent(obj) => event(
            handle(&obj.getattr("cuda_event")?, "event.cuda_event")?,
            "event.cuda_event",
        ),
        Form::TorchStream(obj) => {
            if let Ok(raw) = obj.getattr("cuda_stream") {
                let raw = handle(&raw, "stream.cuda_stream")?;
                return Ok(FenceArg::Stream { raw, form: name });
            }
            let recorded = obj.call_method0("record_event")?;
            let raw = handle(
                &recorded.getattr("cuda_event")?,
                "record_event().cuda_event",
            )?;
            keep.push(recorded);
            event(raw, "record_event().cuda_event")
        }
        Form::CupyStream(obj) => {
            if obj.hasattr("ptr")? {
                let raw = handle(&obj.getattr("ptr")?, "stream.ptr")?;
                return Ok(FenceArg::Stream { raw, form: name });
            }
            let recorded = obj.call_method0("record")?;
            let raw = handle(&recorded.getattr("ptr")?, "stream.record().ptr")?;
            keep.push(recorded);
            event(raw, "stream.record().ptr")
        }
        Form::CupyEvent(obj) => event(handle(&obj.getattr("ptr")?, "event.ptr")?, "event.ptr"),
    }
}

impl FenceArg {
    /// Releases `batch` with this fence (not [`FenceArg::Default`], which drops the batch:
    /// the core then fences on every stream the batch was bound to); on failure the batch
    /// is handed back, still leased.
    pub(crate) fn release(self, batch: Batch<Cuda>) -> Result<(), Box<ReleaseError<Cuda>>> {
        let result = match self {
            FenceArg::Default => {
                drop(batch);
                return Ok(());
            }
            FenceArg::Event { raw, .. } => {
                // SAFETY: `raw` is the caller's live CUevent (read from the object passed to
                // release(), which the caller keeps alive for the call, or given as an int,
                // whose liveness the caller promises per the docs); the `CuEvent` lives only
                // for this call, and the capture waits on the event's current record at once.
                let event = unsafe { CuEvent::from_raw(raw as *mut _) };
                batch.release(Fence::Event(&event))
            }
            FenceArg::Stream { raw, .. } => {
                // SAFETY: `raw` is the caller's live CUstream (read from the stream object
                // passed to release(), alive for the call); the `CuStream` lives only for
                // this call, in which the fence event is recorded on it.
                let stream = unsafe { CuStream::from_raw(raw as *mut _) };
                batch.release(Fence::Stream(&stream))
            }
        };
        result.map_err(Box::new)
    }
}
