//! The exception classes of `pinring` and the mapping of [`pinring::Error`] onto them.
//!
//! The classes are made once, at module initialization, with `type(name, bases, dict)` so
//! that each can subclass both `pinring.Error` and the builtin that fits (which
//! `create_exception!` cannot do). Messages are the Rust errors' `Display` texts, which
//! name the file, batch and sample; the fields a caller may want to match on are set as
//! attributes (`seq`, `sample`, `path`, `call`, `code`, `waited`, `behind`).

use pyo3::exceptions::{PyException, PyOSError, PyRuntimeError, PyTimeoutError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyTuple, PyType};
use pyo3::BoundObject;

use pinring::source::SourceError;

/// Which `pinring` exception class.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `pinring.Error`, the base of all.
    Base,
    /// `pinring.ConfigError` (also `ValueError`).
    Config,
    /// `pinring.SourceError` (also `OSError`).
    Source,
    /// `pinring.DecodeError` (also `ValueError`).
    Decode,
    /// `pinring.PopTimeout` (also `TimeoutError`).
    PopTimeout,
    /// `pinring.StoppedError` (also `RuntimeError`).
    Stopped,
    /// `pinring.CudaError` (also `RuntimeError`).
    Cuda,
    /// `pinring.CheckpointError` (also `ValueError`).
    Checkpoint,
}

/// The classes, in [`Kind`] order after `Base`.
struct Classes {
    base: Py<PyType>,
    config: Py<PyType>,
    source: Py<PyType>,
    decode: Py<PyType>,
    pop_timeout: Py<PyType>,
    stopped: Py<PyType>,
    cuda: Py<PyType>,
    checkpoint: Py<PyType>,
}

static CLASSES: PyOnceLock<Classes> = PyOnceLock::new();

/// (name, Python builtin base, docstring) of each subclass.
const DOC_BASE: &str = "Base class of every error pinring raises.";
const DOC_CONFIG: &str = "A Loader or source argument was rejected (a size of 0, an unknown \
    dtype, order or device string, ...). Also a ValueError.";
const DOC_SOURCE: &str = "A data source could not be opened or sampled: a missing file, a \
    directory, bad magic, a truncated shard, a window longer than any shard. The message names \
    the file. Also an OSError.";
const DOC_DECODE: &str = "Decoding a sample failed; `seq` and `sample` name the batch and the \
    sample within it. Also a ValueError.";
const DOC_POP_TIMEOUT: &str = "pop() waited for its timeout and no batch came; `waited` \
    (seconds) and `behind` (the stage that holds up the next batch) say more. Also a \
    TimeoutError.";
const DOC_STOPPED: &str = "The loader has stopped (closed, or after an error reported \
    earlier) and delivers nothing more. Also a RuntimeError.";
const DOC_CUDA: &str = "A CUDA driver call failed, no driver or no such device was found, or a \
    release fence was rejected; `call` and `code` name the driver call and its CUresult. Also a \
    RuntimeError.";
const DOC_CHECKPOINT: &str = "A loader state was refused: it is not a state dict, it belongs to \
    another dataset (file names and sizes), seq_len, record size, order or seed, the ranks it was \
    merged from consumed unequal counts, or the loader already delivered a batch. Also a \
    ValueError.";

fn new_class<'py>(
    py: Python<'py>,
    name: &str,
    bases: Bound<'py, PyTuple>,
    doc: &str,
) -> PyResult<Py<PyType>> {
    let dict = PyDict::new(py);
    dict.set_item("__doc__", doc)?;
    dict.set_item("__module__", "pinring")?;
    let class = py
        .get_type::<PyType>()
        .call1((name, bases, dict))?
        .cast_into::<PyType>()?;
    Ok(class.unbind())
}

fn make(py: Python<'_>) -> PyResult<Classes> {
    let base = new_class(
        py,
        "Error",
        PyTuple::new(py, [py.get_type::<PyException>()])?,
        DOC_BASE,
    )?;
    let with = |builtin: Bound<'_, PyType>, name: &str, doc: &str| {
        new_class(
            py,
            name,
            PyTuple::new(py, [base.bind(py).clone(), builtin])?,
            doc,
        )
    };
    Ok(Classes {
        config: with(py.get_type::<PyValueError>(), "ConfigError", DOC_CONFIG)?,
        source: with(py.get_type::<PyOSError>(), "SourceError", DOC_SOURCE)?,
        decode: with(py.get_type::<PyValueError>(), "DecodeError", DOC_DECODE)?,
        pop_timeout: with(
            py.get_type::<PyTimeoutError>(),
            "PopTimeout",
            DOC_POP_TIMEOUT,
        )?,
        stopped: with(py.get_type::<PyRuntimeError>(), "StoppedError", DOC_STOPPED)?,
        cuda: with(py.get_type::<PyRuntimeError>(), "CudaError", DOC_CUDA)?,
        checkpoint: with(
            py.get_type::<PyValueError>(),
            "CheckpointError",
            DOC_CHECKPOINT,
        )?,
        base,
    })
}

fn classes(py: Python<'_>) -> PyResult<&Classes> {
    CLASSES.get_or_try_init(py, || make(py))
}

/// Adds the classes to the module.
pub(crate) fn register(module: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = module.py();
    let c = classes(py)?;
    for (name, class) in [
        ("Error", &c.base),
        ("ConfigError", &c.config),
        ("SourceError", &c.source),
        ("DecodeError", &c.decode),
        ("PopTimeout", &c.pop_timeout),
        ("StoppedError", &c.stopped),
        ("CudaError", &c.cuda),
        ("CheckpointError", &c.checkpoint),
    ] {
        module.add(name, class.bind(py))?;
    }
    Ok(())
}

/// An exception of class `kind` with `message` and the attributes in `attrs`.
fn build<'py>(
    py: Python<'py>,
    kind: Kind,
    message: String,
    attrs: &[(&str, Bound<'py, PyAny>)],
) -> PyErr {
    let made = (|| -> PyResult<PyErr> {
        let c = classes(py)?;
        let class = match kind {
            Kind::Base => &c.base,
            Kind::Config => &c.config,
            Kind::Source => &c.source,
            Kind::Decode => &c.decode,
            Kind::PopTimeout => &c.pop_timeout,
            Kind::Stopped => &c.stopped,
            Kind::Cuda => &c.cuda,
            Kind::Checkpoint => &c.checkpoint,
        };
        let exc = class.bind(py).call1((message.as_str(),))?;
        for (name, value) in attrs {
            exc.setattr(*name, value)?;
        }
        Ok(PyErr::from_value(exc))
    })();
    // Making the exception can only fail if Python itself is failing: report that.
    made.unwrap_or_else(|e| e)
}

/// A `pinring` exception of class `kind` with `message`.
pub(crate) fn error(py: Python<'_>, kind: Kind, message: impl Into<String>) -> PyErr {
    build(py, kind, message.into(), &[])
}

/// A `pinring.ConfigError` with `message`.
pub(crate) fn config(py: Python<'_>, message: impl Into<String>) -> PyErr {
    error(py, Kind::Config, message)
}

/// The class a core error maps to.
pub(crate) fn kind_of(e: &pinring::Error) -> Kind {
    use pinring::Error as E;
    match e {
        E::Config(_) => Kind::Config,
        E::Decode { .. } | E::DecoderPanic { .. } => Kind::Decode,
        E::Source(
            SourceError::CheckpointMismatch { .. }
            | SourceError::CheckpointPastEpoch { .. }
            | SourceError::UnequalRanks { .. }
            | SourceError::BadCheckpointText { .. },
        ) => Kind::Checkpoint,
        E::SourcePanic { .. } | E::Source(_) => Kind::Source,
        E::Backend { .. } | E::Fence(_) => Kind::Cuda,
        E::PopTimeout { .. } => Kind::PopTimeout,
        E::Stopped => Kind::Stopped,
        _ => Kind::Base,
    }
}

/// `value` as a Python object (`None` if the conversion fails, which it does not for the
/// plain values used here).
fn obj<'py, T>(py: Python<'py>, value: T) -> Bound<'py, PyAny>
where
    T: IntoPyObject<'py>,
{
    value
        .into_pyobject(py)
        .map(|v| v.into_any().into_bound())
        .unwrap_or_else(|_| py.None().into_bound(py))
}

/// Maps a core error to its Python exception, with `context` (if not empty) before the
/// core's message.
pub(crate) fn to_py_with(py: Python<'_>, e: pinring::Error, context: &str) -> PyErr {
    use pinring::Error as E;
    let kind = kind_of(&e);
    let message = if context.is_empty() {
        e.to_string()
    } else {
        format!("{context}: {e}")
    };
    let attrs: Vec<(&str, Bound<'_, PyAny>)> = match &e {
        E::Decode { seq, sample, .. }
        | E::DecoderPanic { seq, sample, .. }
        | E::SourcePanic { seq, sample, .. } => {
            vec![("seq", obj(py, *seq)), ("sample", obj(py, *sample))]
        }
        E::Backend { call, .. } => {
            // The driver's CUresult when a CUDA call failed; 0 for other backend errors.
            let code = e.driver_error().map_or(0, |d| d.0 as i32);
            vec![("call", obj(py, *call)), ("code", obj(py, code))]
        }
        E::PopTimeout { waited, behind } => vec![
            ("waited", obj(py, waited.as_secs_f64())),
            ("behind", obj(py, stage_name(*behind))),
        ],
        E::Source(SourceError::File { path, .. }) => {
            vec![("path", obj(py, path.to_string_lossy().into_owned()))]
        }
        _ => Vec::new(),
    };
    build(py, kind, message, &attrs)
}

/// Maps a core error to its Python exception.
pub(crate) fn to_py(py: Python<'_>, e: pinring::Error) -> PyErr {
    to_py_with(py, e, "")
}

/// A short name of a pipeline stage, for `PopTimeout.behind` and `stats()`.
pub(crate) fn stage_name(stage: pinring::Stage) -> &'static str {
    match stage {
        pinring::Stage::Source => "source",
        pinring::Stage::Decode => "decode",
        pinring::Stage::Copy => "copy",
        pinring::Stage::Consumer => "consumer",
    }
}
