//! A loader's state as plain Python data: the core's rank-agnostic [`State`] — its serde
//! record, tagged by `"kind"` — as a dict of ints, floats (a mixture's weights), strings
//! and lists of them (what `torch.save` and `json` hold), through one serde conversion
//! ([`crate::plain`]), read back by [`State::from_value`], and the ranks' states merged by
//! [`State::merge`].

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use pinring::State;

use crate::errors::classes::{error, Kind};
use crate::errors::from_core::to_py;
use crate::plain;
use crate::source::taken_arg::{ShownAs, TakenArg};
use crate::stub_attrs::gen_stub_pyfunction;

fn bad(py: Python<'_>, why: impl Into<String>) -> PyErr {
    error(py, Kind::Checkpoint, why)
}

/// A state as a dict: its serde record.
pub(crate) fn to_dict<'py>(py: Python<'py>, state: &State) -> PyResult<Bound<'py, PyDict>> {
    Ok(plain::to_py(py, &state.to_value())?.cast_into::<PyDict>()?)
}

/// One state dict.
fn from_dict(d: &Bound<'_, PyDict>) -> PyResult<State> {
    let py = d.py();
    let value =
        plain::from_py(d.as_any(), "state").map_err(|e| bad(py, e.value(py).to_string()))?;
    State::from_value(value).map_err(|e| to_py(py, e))
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
pub(crate) fn read(state: &Bound<'_, PyAny>) -> PyResult<State> {
    let py = state.py();
    if let Ok(d) = state.cast::<PyDict>() {
        return from_dict(d);
    }
    if !(state.is_instance_of::<PyList>() || state.is_instance_of::<PyTuple>()) {
        return Err(bad(
            py,
            format!(
                "a loader state is a dict from Loader.state_dict() (or a list of every rank's), \
                 got {}",
                state.get_type().name()?
            ),
        ));
    }
    let states = state
        .try_iter()?
        .map(|s| {
            let s = s?;
            let d = s.cast::<PyDict>().map_err(|_| {
                let name = s.get_type().name().map(|n| n.to_string());
                bad(
                    py,
                    format!(
                        "a list of states must hold dicts, got {}",
                        name.unwrap_or_default()
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
    State::merge(&states).map_err(|e| to_py(py, e))
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
