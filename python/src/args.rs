//! Checks of the plain arguments (counts, sizes, seconds, raw handles): each names the
//! argument as the caller wrote it and says what it must be.

use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};

use crate::errors::classes::config;

/// A count of at least 1 that fits `usize`.
pub(crate) fn count(py: Python<'_>, name: &str, value: i128) -> PyResult<usize> {
    let at_least_one = at_least_one(py, name, value)?;
    usize::try_from(at_least_one)
        .map_err(|_| config(py, name, format!("{name}={value} is too large")))
}

/// A number of at least 1 that fits `u64`.
pub(crate) fn at_least_one(py: Python<'_>, name: &str, value: i128) -> PyResult<u64> {
    if value < 1 {
        return Err(config(
            py,
            name,
            format!("{name} must be at least 1, got {value}"),
        ));
    }
    u64::try_from(value).map_err(|_| {
        config(
            py,
            name,
            format!("{name}={value} is too large: at most 2**64 - 1"),
        )
    })
}

/// A byte count of at least 1 that fits `usize`.
pub(crate) fn bytes(py: Python<'_>, name: &str, value: i128) -> PyResult<usize> {
    count(py, name, value)
}

/// A non-negative, finite number of seconds.
pub(crate) fn seconds(py: Python<'_>, name: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        config(
            py,
            name,
            format!("{name} must be a non-negative number of seconds, got {value}"),
        )
    })
}

/// `rank` and `world_size`: a world size of at least 1 and a rank below it.
pub(crate) fn rank_in_world(py: Python<'_>, rank: i128, world_size: i128) -> PyResult<(u64, u64)> {
    let world = at_least_one(py, "world_size", world_size)?;
    let rank = u64::try_from(rank)
        .ok()
        .filter(|&r| r < world)
        .ok_or_else(|| {
            config(
                py,
                "rank",
                format!("rank must be in 0..world_size ({world}), got {rank}"),
            )
        })?;
    Ok((rank, world))
}

/// A raw CUDA handle (a `CUstream`, a `CUevent`) given as `what`: an int, 0 or more.
/// Anything else is a TypeError ending with `accepted` (the forms the argument takes); an
/// int out of range, a ValueError saying `out_of_range()`.
pub(crate) fn int_handle(
    value: &Bound<'_, PyAny>,
    what: &str,
    accepted: &str,
    out_of_range: impl FnOnce() -> String,
) -> PyResult<usize> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{what} is {}, not an int handle. {accepted}",
            value.get_type().name()?
        )));
    }
    value
        .extract::<usize>()
        .map_err(|_| PyValueError::new_err(out_of_range()))
}

/// A seed: an int in `0..2**64`.
pub(crate) fn seed(py: Python<'_>, seed: i128) -> PyResult<u64> {
    u64::try_from(seed)
        .map_err(|_| config(py, "seed", format!("seed must be in 0..2**64, got {seed}")))
}
