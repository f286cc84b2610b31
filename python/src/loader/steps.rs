//! The Loader's `start_step` and `skip_steps` arguments: where a run begins and which of its
//! steps it leaves out, checked as the caller wrote them.

use std::ops::Range;

use pyo3::prelude::*;
use pyo3::types::{PyList, PyRange, PyTuple};

use crate::errors::classes::config;

/// The steps a run begins at and leaves out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Steps {
    /// `start_step`: the step the run begins at (0: the start).
    pub(crate) start: u64,
    /// `skip_steps`: half-open ranges `a..b` of steps left out, as given (checked
    /// `a <= b`).
    pub(crate) skip: Vec<Range<u64>>,
}

impl Steps {
    /// Checks `start_step` (an int of at least 0) and `skip_steps` (None, or a list or
    /// tuple of `(a, b)` pairs of ints with `0 <= a <= b`, or of `range(a, b)` objects of
    /// step 1).
    pub(crate) fn parse(
        py: Python<'_>,
        start_step: i128,
        skip_steps: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let start = u64::try_from(start_step).map_err(|_| {
            config(
                py,
                "start_step",
                format!("start_step must be a step number in 0..2**64, got {start_step}"),
            )
        })?;
        let mut skip = Vec::new();
        let Some(given) = skip_steps.filter(|s| !s.is_none()) else {
            return Ok(Steps { start, skip });
        };
        let shape = |what: String| {
            config(
                py,
                "skip_steps",
                format!(
                    "skip_steps must be a list of half-open (start, end) step ranges, as \
                     range(start, end) is: {what}"
                ),
            )
        };
        if !(given.is_instance_of::<PyList>() || given.is_instance_of::<PyTuple>()) {
            return Err(shape(format!("got a {}", given.get_type().name()?)));
        }
        for (index, entry) in given.try_iter()?.enumerate() {
            let entry = entry?;
            let pair: (i128, i128) = if let Ok(r) = entry.cast::<PyRange>() {
                if r.getattr("step")?.extract::<i128>()? != 1 {
                    return Err(shape(format!(
                        "skip_steps[{index}] is {}, a range of step other than 1",
                        entry.repr()?
                    )));
                }
                (
                    r.getattr("start")?.extract()?,
                    r.getattr("stop")?.extract()?,
                )
            } else {
                let pair: Option<Vec<i128>> = entry.extract().ok();
                match pair.as_deref() {
                    Some(&[a, b]) if !entry.is_instance_of::<pyo3::types::PyString>() => (a, b),
                    _ => {
                        return Err(shape(format!(
                            "skip_steps[{index}] is {}, not a pair of ints",
                            entry.repr().map(|r| r.to_string()).unwrap_or_default()
                        )))
                    }
                }
            };
            let (a, b) = pair;
            let step = |v: i128| u64::try_from(v).ok();
            match (step(a), step(b)) {
                (Some(a), Some(b)) if a <= b => skip.push(a..b),
                (Some(_), Some(_)) => {
                    return Err(shape(format!(
                        "skip_steps[{index}] = ({a}, {b}) ends before it starts"
                    )))
                }
                _ => {
                    return Err(shape(format!(
                        "skip_steps[{index}] = ({a}, {b}): steps are in 0..2**64"
                    )))
                }
            }
        }
        Ok(Steps { start, skip })
    }
}
