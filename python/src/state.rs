//! A loader's state as plain Python data: the core's rank-agnostic [`Checkpoint`] (windows,
//! records), [`DocumentsCheckpoint`] (packed documents) or [`MixtureState`] (a mixture) as
//! a dict of ints, floats (a mixture's weights), strings and lists of them (what
//! `torch.save` and `json` hold), read back strictly, and the ranks' states merged into
//! one.
//!
//! A window state's keys are written out here ([`KEYS`], the names of the core's serde
//! record); a documents or mixture state is the core's serde record itself (through
//! [`crate::plain`]), so its dict and the Rust struct cannot drift.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use pinring::source::{
    Checkpoint, DocumentsCheckpoint, Fingerprint, MixtureState, CHECKPOINT_VERSION,
    DOCUMENTS_CHECKPOINT_VERSION, MIXTURE_STATE_VERSION,
};

use crate::errors::classes::{error, Kind};
use crate::errors::from_core::to_py;
use crate::plain;
use crate::source::taken_arg::{ShownAs, TakenArg};
use crate::stub_attrs::gen_stub_pyfunction;

/// A loader's state, of either kind of source.
#[derive(Debug, Clone)]
pub(crate) enum SourceState {
    /// Of a TokenWindows or FixedRecords loader.
    Windows(Checkpoint),
    /// Of a Documents loader.
    Documents(DocumentsCheckpoint),
    /// Of a loader over a Mixture of TokenWindows or FixedRecords.
    Mixture(MixtureState),
    /// Of a loader over a Mixture of Documents.
    DocumentMixture(MixtureState<DocumentsCheckpoint>),
}

impl SourceState {
    /// What kind of source it belongs to, for messages.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            SourceState::Windows(_) => "a TokenWindows or FixedRecords source",
            SourceState::Documents(_) => "a Documents source",
            SourceState::Mixture(_) => "a Mixture of TokenWindows or FixedRecords",
            SourceState::DocumentMixture(_) => "a Mixture of Documents",
        }
    }
}

/// Keys only a documents state has: a dict with one of them is read as one.
const DOCUMENTS_ONLY: [&str; 3] = ["bos", "schedule", "doc"];

/// Keys only a mixture state has: a dict with one of them is read as one.
const MIXTURE_ONLY: [&str; 3] = ["sources", "weights", "stop"];

/// The keys of a window state dict, in the order `state_dict()` writes them.
const KEYS: [&str; 17] = [
    "version",
    "format",
    "record_bytes",
    "files",
    "sizes",
    "contents",
    "window",
    "stride",
    "order",
    "seed",
    "windows",
    "epoch",
    "consumed",
    "world_size",
    "batch_size",
    "step",
    "skip",
];

fn bad(py: Python<'_>, why: impl Into<String>) -> PyErr {
    error(py, Kind::Checkpoint, why)
}

/// A state as a dict: a window state's keys in [`KEYS`] order, a documents or mixture
/// state's as its serde record has them.
pub(crate) fn to_dict<'py>(py: Python<'py>, state: &SourceState) -> PyResult<Bound<'py, PyDict>> {
    match state {
        SourceState::Windows(c) => windows_to_dict(py, c),
        SourceState::Documents(c) => record_to_dict(py, c, "documents"),
        SourceState::Mixture(c) => record_to_dict(py, c, "mixture"),
        SourceState::DocumentMixture(c) => record_to_dict(py, c, "mixture"),
    }
}

/// A serde record as a dict.
fn record_to_dict<'py, T: serde::Serialize>(
    py: Python<'py>,
    record: &T,
    what: &str,
) -> PyResult<Bound<'py, PyDict>> {
    let value = serde_json::to_value(record).map_err(|e| {
        bad(
            py,
            format!("the {what} state could not be written as plain data: {e}"),
        )
    })?;
    Ok(plain::to_py(py, &value)?.cast_into::<PyDict>()?)
}

/// A state dict of a serde record's kind (`kind`: "Documents", "Mixture"), read strictly
/// through the core's record.
fn record_from_dict<T: serde::de::DeserializeOwned>(
    d: &Bound<'_, PyDict>,
    kind: &str,
) -> PyResult<T> {
    let py = d.py();
    let value = plain::from_py(d.as_any(), "state").map_err(|e| bad(py, e.to_string()))?;
    serde_json::from_value::<T>(value).map_err(|e| bad(py, serde_words(&e, kind)))
}

/// serde's complaint about a state dict of a `kind` source, in the words of a dict.
fn serde_words(e: &serde_json::Error, kind: &str) -> String {
    let text = e.to_string();
    let quoted = |rest: &str| rest.split('`').nth(1).unwrap_or_default().to_owned();
    if let Some(rest) = text.strip_prefix("unknown field ") {
        format!(
            "not a pinring loader state: unknown key {:?} (a {kind} state has the keys of \
             Loader.state_dict(), no others)",
            quoted(rest)
        )
    } else if let Some(rest) = text.strip_prefix("missing field ") {
        missing_key(&quoted(rest))
    } else {
        format!("not a pinring {kind} loader state: {text}")
    }
}

/// What a state dict without the key `key` is.
fn missing_key(key: &str) -> String {
    format!("not a pinring loader state: the key {key:?} is missing")
}

/// A window state as a dict (keys in [`KEYS`] order).
fn windows_to_dict<'py>(py: Python<'py>, c: &Checkpoint) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("version", c.version)?;
    d.set_item("format", &c.dataset.format)?;
    d.set_item("record_bytes", c.dataset.record_bytes)?;
    d.set_item("files", PyList::new(py, &c.dataset.files)?)?;
    d.set_item("sizes", PyList::new(py, &c.dataset.sizes)?)?;
    d.set_item("contents", PyList::new(py, &c.dataset.contents)?)?;
    d.set_item("window", c.window)?;
    d.set_item("stride", c.stride)?;
    d.set_item("order", &c.order)?;
    d.set_item("seed", c.seed)?;
    d.set_item("windows", c.windows)?;
    d.set_item("epoch", c.epoch)?;
    d.set_item("consumed", c.consumed)?;
    d.set_item("world_size", c.world_size)?;
    d.set_item("batch_size", c.batch_size)?;
    d.set_item("step", c.step)?;
    let skip = c
        .skip
        .iter()
        .map(|&(a, b)| PyList::new(py, [a, b]))
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("skip", PyList::new(py, skip)?)?;
    Ok(d)
}

/// Reads one state dict, of any kind.
fn from_dict(d: &Bound<'_, PyDict>) -> PyResult<SourceState> {
    let has = |keys: &[&str]| keys.iter().any(|k| d.contains(*k).unwrap_or(false));
    if has(&MIXTURE_ONLY) {
        // Its sources' states say what it mixes: Documents states have a `bos`.
        let of_documents = d
            .get_item("sources")?
            .and_then(|s| s.get_item(0).ok())
            .and_then(|first| first.cast_into::<PyDict>().ok())
            .is_some_and(|first| first.contains("bos").unwrap_or(false));
        let read = if of_documents {
            record_from_dict(d, "Mixture").map(SourceState::DocumentMixture)
        } else {
            record_from_dict(d, "Mixture").map(SourceState::Mixture)
        };
        read.map_err(|e| of_another_version(d, e, "a Mixture", MIXTURE_STATE_VERSION))
    } else if has(&DOCUMENTS_ONLY) {
        record_from_dict(d, "Documents")
            .map(SourceState::Documents)
            .map_err(|e| of_another_version(d, e, "a Documents", DOCUMENTS_CHECKPOINT_VERSION))
    } else {
        windows_from_dict(d).map(SourceState::Windows).map_err(|e| {
            of_another_version(d, e, "a TokenWindows or FixedRecords", CHECKPOINT_VERSION)
        })
    }
}

/// `e`, a state dict `d` of a `kind` source ("a Documents") that does not read, naming
/// `d`'s version when it is not this build's, `current` (an older state lacks keys this one
/// has: `contents` before version 3 of a windows or documents state and version 2 of a
/// mixture's, `skip` before version 2 of a documents state).
fn of_another_version(d: &Bound<'_, PyDict>, e: PyErr, kind: &str, current: u32) -> PyErr {
    let py = d.py();
    let version = d
        .get_item("version")
        .ok()
        .flatten()
        .and_then(|v| v.extract::<u64>().ok());
    match version {
        Some(v) if v != u64::from(current) => bad(
            py,
            format!(
                "{kind} state of version {v}, which this build (version {current}) cannot \
                 read: {}",
                e.value(py)
            ),
        ),
        _ => e,
    }
}

/// `state["skip"]`: a list of `[start, end]` pairs of ints.
fn skip_from(py: Python<'_>, v: &Bound<'_, PyAny>) -> PyResult<Vec<(u64, u64)>> {
    let wrong = || {
        bad(
            py,
            format!(
                "state[\"skip\"] must be a list of [start, end] step ranges, got {}",
                v.repr().map(|r| r.to_string()).unwrap_or_default()
            ),
        )
    };
    if !(v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>()) {
        return Err(wrong());
    }
    v.try_iter()?
        .map(|item| {
            let pair: Vec<u64> = item.and_then(|i| i.extract()).map_err(|_| wrong())?;
            match pair[..] {
                [a, b] => Ok((a, b)),
                _ => Err(wrong()),
            }
        })
        .collect()
}

/// `state[key]` of a window state dict, or a CheckpointError saying it is missing.
fn item<'py>(d: &Bound<'py, PyDict>, key: &str) -> PyResult<Bound<'py, PyAny>> {
    d.get_item(key)?
        .ok_or_else(|| bad(d.py(), missing_key(key)))
}

/// `state[key]` of a window state dict as a `T`, or a CheckpointError saying it must be
/// `what` ("a str").
fn typed<'py, T: FromPyObjectOwned<'py>>(
    d: &Bound<'py, PyDict>,
    key: &str,
    what: &str,
) -> PyResult<T> {
    let v = item(d, key)?;
    v.extract::<T>()
        .map_err(|_| bad(d.py(), format!("state[{key:?}] must be {what}, got {v:?}")))
}

/// Reads one window state dict: every key of [`KEYS`], nothing else, each of its type.
fn windows_from_dict(d: &Bound<'_, PyDict>) -> PyResult<Checkpoint> {
    let py = d.py();
    for key in d.keys() {
        let name = key.str()?.to_string();
        if !KEYS.contains(&name.as_str()) {
            return Err(bad(
                py,
                format!("not a pinring loader state: unknown key {name:?}"),
            ));
        }
    }
    let int = |key: &str| -> PyResult<u64> { typed(d, key, "an int in 0..2**64") };
    let text = |key: &str| -> PyResult<String> { typed(d, key, "a str") };
    let version = int("version")?;
    let version = u32::try_from(version)
        .map_err(|_| bad(py, format!("state[\"version\"] {version} is not a version")))?;
    let files: Vec<String> = typed(d, "files", "a list of str")?;
    let sizes: Vec<u64> = typed(d, "sizes", "a list of int")?;
    if files.len() != sizes.len() {
        return Err(bad(
            py,
            format!(
                "state[\"files\"] names {} files but state[\"sizes\"] gives {} sizes",
                files.len(),
                sizes.len()
            ),
        ));
    }
    let contents: Vec<u64> = typed(d, "contents", "a list of int in 0..2**64")?;
    if !contents.is_empty() && contents.len() != files.len() {
        return Err(bad(
            py,
            format!(
                "state[\"files\"] names {} files but state[\"contents\"] gives {} content \
                 fingerprints",
                files.len(),
                contents.len()
            ),
        ));
    }
    let mut dataset = Fingerprint::new(text("format")?, int("record_bytes")?);
    dataset.files = files;
    dataset.sizes = sizes;
    dataset.contents = contents;
    let state = Checkpoint {
        version,
        dataset,
        window: int("window")?,
        stride: int("stride")?,
        order: text("order")?,
        seed: int("seed")?,
        windows: int("windows")?,
        epoch: int("epoch")?,
        consumed: int("consumed")?,
        world_size: int("world_size")?,
        batch_size: int("batch_size")?,
        step: int("step")?,
        skip: skip_from(py, &item(d, "skip")?)?,
    };
    state.order().map_err(|e| to_py(py, e))?;
    Ok(state)
}

/// Every rank's states, in rank order, merged into one: they must be of one kind and one
/// run, at the same position.
fn merge(py: Python<'_>, states: Vec<SourceState>) -> PyResult<SourceState> {
    let mut windows = Vec::new();
    let mut documents = Vec::new();
    let mut mixtures = Vec::new();
    let mut document_mixtures = Vec::new();
    let first = states.first().map_or("", SourceState::kind);
    for state in states {
        if state.kind() != first {
            return Err(bad(
                py,
                format!(
                    "the states are of different kinds of source ({} state beside {} one): \
                     they are not of one run",
                    state.kind(),
                    first
                ),
            ));
        }
        match state {
            SourceState::Windows(c) => windows.push(c),
            SourceState::Documents(c) => documents.push(c),
            SourceState::Mixture(c) => mixtures.push(c),
            SourceState::DocumentMixture(c) => document_mixtures.push(c),
        }
    }
    let merged = if !windows.is_empty() {
        Checkpoint::merge(&windows).map(SourceState::Windows)
    } else if !documents.is_empty() {
        DocumentsCheckpoint::merge(&documents).map(SourceState::Documents)
    } else if !mixtures.is_empty() {
        MixtureState::merge(&mixtures).map(SourceState::Mixture)
    } else {
        MixtureState::merge(&document_mixtures).map(SourceState::DocumentMixture)
    };
    merged.map_err(|e| to_py(py, e))
}

/// How the stubs show a `state` argument ([`StateArg`]).
pub(crate) enum States {}

impl ShownAs for States {
    const TYPE: &'static str = "dict[str, typing.Any] | typing.Sequence[dict[str, typing.Any]]";
    const IMPORTS: &'static [&'static str] = &["typing"];
}

/// A `state` argument (of `Loader(...)` and `Loader.load_state_dict`) as given: [`read`]
/// reads it.
pub(crate) type StateArg<'py> = TakenArg<'py, States>;

/// A state dict, or a list (tuple) of every rank's state dicts in rank order, merged:
/// ranks that consumed unequal counts, or states of different runs, are refused.
pub(crate) fn read(state: &Bound<'_, PyAny>) -> PyResult<SourceState> {
    let py = state.py();
    if let Ok(d) = state.cast::<PyDict>() {
        return from_dict(d);
    }
    if state.is_instance_of::<PyList>() || state.is_instance_of::<PyTuple>() {
        let states = state
            .try_iter()?
            .map(|s| {
                let s = s?;
                let d = s.cast::<PyDict>().map_err(|_| {
                    bad(
                        py,
                        format!(
                            "a list of states must hold dicts, got {}",
                            s.get_type()
                                .name()
                                .map(|n| n.to_string())
                                .unwrap_or_default()
                        ),
                    )
                })?;
                from_dict(d)
            })
            .collect::<PyResult<Vec<_>>>()?;
        if states.is_empty() {
            return Err(bad(
                py,
                "no state given: an empty list holds no rank's state dict (pass every rank's \
                 Loader.state_dict(), in rank order, or None to start from the beginning)",
            ));
        }
        return merge(py, states);
    }
    Err(bad(
        py,
        format!(
            "a loader state is a dict from Loader.state_dict() (or a list of every rank's), got {}",
            state.get_type().name()?
        ),
    ))
}

/// Every rank's `Loader.state_dict()`, in rank order, as the one state they share.
///
/// Args:
///     states: a list (or tuple) of every rank's state dict, in rank order.
///
/// Returns:
///     The merged state dict, for `Loader(..., state=...)` or `Loader.load_state_dict`.
///
/// Raises:
///     CheckpointError: the list is empty, an item is not a state dict, the ranks
///         consumed unequal counts (they would not resume exactly), or the states belong
///         to different runs.
#[gen_stub_pyfunction(module = "pinring._pinring")]
#[pyfunction]
#[pyo3(signature = (states))]
#[gen_stub(override_return_type(type_repr = "dict[str, typing.Any]", imports = ("typing",)))]
pub(crate) fn merge_states<'py>(
    py: Python<'py>,
    #[gen_stub(override_type(type_repr = "typing.Sequence[dict[str, typing.Any]]", imports = ("typing",)))]
    states: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    if states.cast::<PyDict>().is_ok() {
        return Err(bad(
            py,
            "merge_states takes a list of every rank's state dict, got one dict",
        ));
    }
    to_dict(py, &read(states)?)
}
