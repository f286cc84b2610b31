//! `pinring.Topology`: which process this is among how many, on its node and in its
//! data-parallel group (the core's [`pinring::Topology`]), read from the launcher's
//! environment or given; sources and loaders take it for their rank and world size.

use pyo3::prelude::*;

use crate::errors::classes::config;
use crate::errors::from_core::to_py;
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};

/// Where this process stands among the processes of a run: its global `rank` of
/// `world_size`, its `local_rank` of the `local_world_size` processes on its node, and its
/// data-parallel rank and size (`dp_rank`, `dp_size`) once model-parallel groups are taken
/// out (`data_parallel`).
///
/// Batches are sharded by data-parallel rank: the ranks of one tensor, context or pipeline
/// group get the same batches. Pass it to a source or a Loader as `topology=topo` (the
/// same as `rank=topo.dp_rank, world_size=topo.dp_size`).
///
///     topo = pinring.Topology.from_env()            # torchrun's or Slurm's variables
///     topo = topo.data_parallel(tensor=2)           # tensor-parallel pairs share batches
///     src = pinring.TokenWindows("train_*.bin", seq_len=1024, topology=topo)
///
/// Args:
///     rank: this process's global rank, below world_size.
///     world_size: the number of processes.
///     local_rank: its rank among the processes of its node, below local_world_size.
///     local_world_size: the processes on its node, at most world_size.
///
/// Raises:
///     ConfigError: inconsistent values (`e.argument` names the one at fault).
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", name = "Topology", frozen, eq)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyTopology {
    topology: pinring::Topology,
}

impl PyTopology {
    /// The processes on this node (a Loader's node share).
    pub(crate) fn local_world_size_of(&self) -> u64 {
        self.topology.local_world_size()
    }

    /// The data-parallel rank and size: what batches are sharded by.
    pub(crate) fn data_parallel_place(&self) -> (u64, u64) {
        (self.topology.dp_rank(), self.topology.dp_size())
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl PyTopology {
    #[new]
    #[pyo3(signature = (rank, world_size, local_rank, local_world_size))]
    fn new(
        py: Python<'_>,
        rank: i128,
        world_size: i128,
        local_rank: i128,
        local_world_size: i128,
    ) -> PyResult<Self> {
        let n = |name: &str, v: i128| {
            u64::try_from(v).map_err(|_| {
                config(
                    py,
                    name,
                    format!("{name} must be a whole number in 0..2**64, got {v}"),
                )
            })
        };
        let (rank, world_size) = (n("rank", rank)?, n("world_size", world_size)?);
        let (local_rank, local_world_size) = (
            n("local_rank", local_rank)?,
            n("local_world_size", local_world_size)?,
        );
        pinring::Topology::new(rank, world_size, local_rank, local_world_size)
            .map(|topology| PyTopology { topology })
            .map_err(|e| to_py(py, e))
    }

    /// The topology the launcher's environment gives: torchrun's `RANK`, `WORLD_SIZE`,
    /// `LOCAL_RANK`, `LOCAL_WORLD_SIZE`; else Slurm's `SLURM_PROCID`, `SLURM_NTASKS`,
    /// `SLURM_LOCALID`, `SLURM_NTASKS_PER_NODE` (its compressed form, `4(x2),2`, picked by
    /// `SLURM_NODEID`). Read from `os.environ` as it is now.
    ///
    /// Raises:
    ///     ConfigError: a variable missing, not a number or inconsistent with the others
    ///         (`e.argument` names it), or neither launcher's variables set.
    #[staticmethod]
    fn from_env(py: Python<'_>) -> PyResult<Self> {
        // os.environ, not the C environment: what a test or a launcher wrapper set there.
        let environ = py.import("os")?.getattr("environ")?;
        let var = |name: &str| -> Option<String> {
            environ
                .call_method1("get", (name,))
                .ok()
                .and_then(|v| v.extract::<String>().ok())
        };
        pinring::Topology::from_vars(var)
            .map(|topology| PyTopology { topology })
            .map_err(|e| to_py(py, e))
    }

    /// The same processes with model-parallel groups of `tensor` × `context` × `pipeline`
    /// ranks, laid out in Megatron's default order (tensor fastest, then context, then
    /// data, then pipeline): `dp_rank` and `dp_size` are then the data-parallel ones.
    ///
    /// Args:
    ///     tensor: ranks of a tensor-parallel group.
    ///     context: ranks of a context-parallel group.
    ///     pipeline: pipeline stages.
    ///
    /// Raises:
    ///     ConfigError: a size of 0, or sizes whose product does not divide world_size.
    #[pyo3(signature = (tensor = 1, context = 1, pipeline = 1))]
    fn data_parallel(
        &self,
        py: Python<'_>,
        tensor: u64,
        context: u64,
        pipeline: u64,
    ) -> PyResult<Self> {
        self.topology
            .data_parallel(tensor, context, pipeline)
            .map(|topology| PyTopology { topology })
            .map_err(|e| to_py(py, e))
    }

    /// The global rank.
    #[getter]
    fn rank(&self) -> u64 {
        self.topology.rank()
    }

    /// The number of processes.
    #[getter]
    fn world_size(&self) -> u64 {
        self.topology.world_size()
    }

    /// The rank among this node's processes.
    #[getter]
    fn local_rank(&self) -> u64 {
        self.topology.local_rank()
    }

    /// The processes on this node.
    #[getter]
    fn local_world_size(&self) -> u64 {
        self.topology.local_world_size()
    }

    /// The data-parallel rank: what batches are sharded by.
    #[getter]
    fn dp_rank(&self) -> u64 {
        self.topology.dp_rank()
    }

    /// The number of data-parallel ranks.
    #[getter]
    fn dp_size(&self) -> u64 {
        self.topology.dp_size()
    }

    fn __repr__(&self) -> String {
        let t = &self.topology;
        let (tensor, context, pipeline) = t.model_parallel();
        format!(
            "Topology(rank={}, world_size={}, local_rank={}, local_world_size={}, dp_rank={}, \
             dp_size={}, tensor={tensor}, context={context}, pipeline={pipeline})",
            t.rank(),
            t.world_size(),
            t.local_rank(),
            t.local_world_size(),
            t.dp_rank(),
            t.dp_size()
        )
    }
}
