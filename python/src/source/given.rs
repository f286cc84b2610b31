//! What a loader (or a mixture) takes from a source object: the core source, built
//! without a run, the shape of its rows, and the rank and world size the Python object
//! keeps for the loader ([`Given`]); and the `rank`, `world_size` and `topology`
//! arguments that place a source among its ranks.

use pyo3::prelude::*;

use pinring::source::{AnySource, Schedule};
use pinring::Fields;

use crate::args;
use crate::errors::classes::config;
use crate::source::dtype::Row;
use crate::topology::PyTopology;

/// What a loader takes from a source object.
#[derive(Debug, Clone)]
pub(crate) struct Given {
    /// The core source, without rank, world size, batch size or steps: the loader's.
    pub(crate) source: AnySource,
    /// One sample's shape and type (a step of fields: the slot's bytes).
    pub(crate) row: Row,
    /// The rank and world size the object was made with.
    pub(crate) place: (u64, u64),
    /// The class's name, for messages.
    pub(crate) class: &'static str,
    /// A step of packed documents: its fields and the schedule of its sizes.
    pub(crate) layout: Option<(Fields, Schedule)>,
}

/// The rank and world size of `rank=`, `world_size=` and `topology=` (whose data-parallel
/// rank and size stand for them): a world size of at least 1 and a rank below it; a
/// topology that disagrees with a rank or world size also given is a ConfigError.
pub(crate) fn placement(
    py: Python<'_>,
    rank: i128,
    world_size: i128,
    topology: Option<&PyTopology>,
) -> PyResult<(u64, u64)> {
    let (rank, world) = args::rank_in_world(py, rank, world_size)?;
    let Some(topology) = topology else {
        return Ok((rank, world));
    };
    agreed(py, (rank, world), topology.data_parallel_place())
}

/// `given` (a rank and world size, `(0, 1)` when not given) and `topology`'s
/// data-parallel place, as one: the topology's, unless `given` says otherwise.
pub(crate) fn agreed(
    py: Python<'_>,
    given: (u64, u64),
    topology: (u64, u64),
) -> PyResult<(u64, u64)> {
    if given == (0, 1) || given == topology {
        return Ok(topology);
    }
    Err(config(
        py,
        "topology",
        format!(
            "topology= is data-parallel rank {} of {}, but rank={}, world_size={} were given: \
             give one or the other (ranks are sharded by their data-parallel rank)",
            topology.0, topology.1, given.0, given.1
        ),
    ))
}
