//! `pinring.RankGuard`: the core's [`pinring::RankGuard`] over a `Loader`, its lanes
//! reduced by a collective of Python's — `torch.distributed` (`pinring._collectives`,
//! torch imported only then) or the caller's own function — and a problem raised as
//! `RankError` or warned as `RankWarning`.

use std::time::{Duration, Instant};

use pyo3::prelude::*;
use pyo3::types::PyDict;

use pinring::{RankError, RankReport, RANK_LANES};

use crate::errors::classes::{class_of, config, new_error, Kind};
use crate::errors::from_core::{rank_attrs, to_py};
use crate::loader::Loader;
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};

/// Checks every `every` steps, on every rank at once, that no rank will run out of data
/// before the others (the hang of a rank with fewer batches, then a NCCL timeout) and
/// that no rank waits for its data far longer than the rest — and names the rank
/// *before* the training collective that would hang.
///
/// Each check reduces a small record of each rank (the step its run ends at within
/// `2 * every` steps, its data wait and source time since the last check, its step) with
/// one all-reduce (MAX over 9 int64 lanes: minima travel negated). Call `step()` once a
/// step, after the pop, on every rank:
///
///     guard = pinring.RankGuard(loader, every=100)   # over torch.distributed's group
///     for batch in loader:
///         guard.step()          # a collective every 100 pops; RankError names a rank
///         ...
///
/// Args:
///     loader: the Loader to watch.
///     group: the torch.distributed process group (None: the default one), used when no
///         `collective` is given; torch is imported then, not before.
///     every: pops between checks.
///     collective: instead of torch.distributed, `fn(lanes: list[int]) -> list[int]`: the
///         element-wise maximum of every rank's lanes (every rank calls it at once).
///     rank, world_size: this rank and the ranks of the collective (default with
///         `collective`: the loader's data-parallel rank and world size; with torch:
///         the group's).
///     on_problem: "raise" (RankError) or "warn" (RankWarning; `step()` returns the report).
///     wait_ratio, wait_floor: a rank whose data wait since the last check is above
///         `wait_ratio` times the least-waiting rank's and above `wait_floor` seconds is
///         named as slow.
///
/// Raises:
///     ConfigError: `every` of 0, a rank not below world_size, an unknown on_problem.
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", name = "RankGuard")]
pub struct PyRankGuard {
    loader: Py<Loader>,
    guard: pinring::RankGuard,
    collective: Py<PyAny>,
    warn: bool,
}

#[gen_stub_pymethods]
#[pymethods]
impl PyRankGuard {
    #[new]
    #[pyo3(signature = (loader, group = None, every = 100, *, collective = None, rank = None,
                        world_size = None, on_problem = "raise", wait_ratio = 4.0, wait_floor = 1.0))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        loader: Py<Loader>,
        group: Option<Py<PyAny>>,
        every: i128,
        collective: Option<Py<PyAny>>,
        rank: Option<i128>,
        world_size: Option<i128>,
        on_problem: &str,
        wait_ratio: f64,
        wait_floor: f64,
    ) -> PyResult<Self> {
        let warn = match on_problem {
            "raise" => false,
            "warn" => true,
            other => {
                return Err(config(
                    py,
                    "on_problem",
                    format!("on_problem {other:?}: \"raise\" or \"warn\""),
                ))
            }
        };
        let count = |name: &str, v: i128| {
            u64::try_from(v).map_err(|_| config(py, name, format!("{name} {v} is negative")))
        };
        if !(wait_ratio.is_finite() && wait_ratio >= 1.0) {
            return Err(config(
                py,
                "wait_ratio",
                format!("wait_ratio {wait_ratio}: a finite number of 1 or more"),
            ));
        }
        let floor = Duration::try_from_secs_f64(wait_floor).map_err(|_| {
            config(
                py,
                "wait_floor",
                format!("wait_floor {wait_floor}: seconds, 0 or more"),
            )
        })?;
        let (collective, given_rank, given_world) = match collective {
            Some(c) => {
                let (r, w) = loader.get().place(py);
                (c, r, w)
            }
            None => {
                let made = py
                    .import("pinring._collectives")?
                    .call_method1("torch_max", (group,))?;
                let (c, r, w): (Py<PyAny>, u64, u64) = made.extract()?;
                (c, r, w)
            }
        };
        let rank = rank
            .map(|r| count("rank", r))
            .transpose()?
            .unwrap_or(given_rank);
        let world = world_size
            .map(|w| count("world_size", w))
            .transpose()?
            .unwrap_or(given_world);
        let guard = pinring::RankGuard::new(rank, world, count("every", every)?)
            .map_err(|e| to_py(py, e))?
            .wait_ratio(wait_ratio)
            .wait_floor(floor)
            .warn_only(warn);
        Ok(PyRankGuard {
            loader,
            guard,
            collective,
            warn,
        })
    }

    /// Once a step, after the pop, on every rank: a check when the loader's pops are a
    /// multiple of `every` (not checked at that count yet), returning its report; None
    /// otherwise.
    ///
    /// Raises:
    ///     RankError: a rank named (on_problem="raise"), or the collective's own error.
    #[gen_stub(override_return_type(type_repr = "dict[str, typing.Any] | None", imports = ("typing",)))]
    fn step<'py>(&mut self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let popped = self.loader.get().popped(py);
        if !self.guard.due(popped) {
            return Ok(None);
        }
        self.check(py).map(Some)
    }

    /// Checks now (every rank at once), whatever the pop count: the report, a dict of
    /// `step`, `first_end` ((step, rank): the earliest end within the look ahead),
    /// `last_end`, `most_wait` ((seconds, rank)), `least_wait`, `most_source_time`
    /// ((seconds, rank)), `problem` (the message, or None) and `rank` (the rank named,
    /// or None).
    ///
    /// Raises:
    ///     RankError: a rank named (on_problem="raise"), or the collective's own error.
    #[gen_stub(override_return_type(type_repr = "dict[str, typing.Any]", imports = ("typing",)))]
    fn check<'py>(&mut self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let began = Instant::now();
        let (record, popped) = self.loader.get().guard_record(py, &mut self.guard)?;
        let collective = self.collective.bind(py).clone();
        let mut raised: Option<PyErr> = None;
        let verdict = self
            .guard
            .conclude(&record, popped, began, |lanes: &mut [i64]| {
                let reduced = collective
                    .call1((lanes.to_vec(),))
                    .and_then(|out| out.extract::<Vec<i64>>());
                match reduced {
                    Ok(out) if out.len() == RANK_LANES => {
                        lanes.copy_from_slice(&out);
                        Ok(())
                    }
                    Ok(out) => Err(format!(
                        "the collective returned {} lanes for {RANK_LANES}",
                        out.len()
                    )),
                    Err(e) => {
                        let text = e.to_string();
                        raised = Some(e);
                        Err(text)
                    }
                }
            });
        if let Some(e) = raised {
            return Err(e);
        }
        let report = match verdict {
            Ok(report) => report,
            Err(pinring::Error::Rank(e)) => return Err(rank_error(py, &e)),
            Err(e) => return Err(to_py(py, e)),
        };
        if self.warn {
            if let Some(problem) = &report.problem {
                py.import("warnings")?.call_method1(
                    "warn",
                    (problem.to_string(), class_of(py, Kind::RankWarning)?, 2),
                )?;
            }
        }
        report_dict(py, &report)
    }

    /// Pops between checks.
    #[getter]
    fn every(&self) -> u64 {
        self.guard.every()
    }

    /// How far ahead a check looks for a run's end (2 * every steps).
    #[getter]
    fn horizon(&self) -> u64 {
        self.guard.horizon()
    }

    /// Checks made so far.
    #[getter]
    fn checks(&self) -> u64 {
        self.guard.checks()
    }

    /// Seconds spent in checks so far, the collective included (divide by `checks` for
    /// the cost of one).
    #[getter]
    fn check_time(&self) -> f64 {
        self.guard.check_time().as_secs_f64()
    }
}

/// A `pinring.RankError` for `e`.
fn rank_error(py: Python<'_>, e: &RankError) -> PyErr {
    new_error(py, Kind::Rank, e.to_string(), &rank_attrs(py, e))
}

/// A check's report as a dict.
fn report_dict<'py>(py: Python<'py>, r: &RankReport) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("step", r.step)?;
    d.set_item("first_end", (r.first_end.0, r.first_end.1))?;
    d.set_item("last_end", r.last_end)?;
    d.set_item("most_wait", (r.most_wait.0.as_secs_f64(), r.most_wait.1))?;
    d.set_item("least_wait", r.least_wait.as_secs_f64())?;
    d.set_item(
        "most_source_time",
        (r.most_source_time.0.as_secs_f64(), r.most_source_time.1),
    )?;
    d.set_item("problem", r.problem.as_ref().map(ToString::to_string))?;
    d.set_item("rank", r.problem.as_ref().and_then(RankError::rank))?;
    Ok(d)
}
