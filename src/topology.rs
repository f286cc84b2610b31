//! [`Topology`]: which process this is among how many, on its node and in its
//! data-parallel group — read from the launcher's environment (torchrun, Slurm) or given,
//! with model-parallel groups laid out in Megatron's order.

use std::fmt;

use crate::error::{ConfigError, Result};

/// Where this process stands: its global rank of `world_size`, its local rank of the
/// `local_world_size` processes on its node, and its data-parallel rank and size once the
/// model-parallel groups are taken out ([`data_parallel`](Self::data_parallel)).
///
/// Batches are sharded by data-parallel rank: the ranks of one tensor, context or pipeline
/// group get the same batches. A [`LoaderBuilder`](crate::LoaderBuilder) takes one
/// ([`topology`](crate::LoaderBuilder::topology)).
///
/// ```
/// use pinring::Topology;
///
/// // torchrun's variables, as a launcher sets them (here: rank 13 of 16, 8 a node).
/// let vars = [("RANK", "13"), ("WORLD_SIZE", "16"), ("LOCAL_RANK", "5"), ("LOCAL_WORLD_SIZE", "8")];
/// let topo = Topology::from_vars(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string()))?;
/// assert_eq!((topo.dp_rank(), topo.dp_size()), (13, 16));
/// // Tensor parallel 2, pipeline parallel 2: 4 data-parallel ranks; rank 13 is the second
/// // tensor rank of data-parallel rank 2, in pipeline stage 1.
/// let dp = topo.data_parallel(2, 1, 2)?;
/// assert_eq!((dp.dp_rank(), dp.dp_size()), (2, 4));
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Topology {
    rank: u64,
    world_size: u64,
    local_rank: u64,
    local_world_size: u64,
    tensor: u64,
    context: u64,
    pipeline: u64,
}

/// The launcher a topology was read from, for errors.
#[derive(Clone, Copy)]
enum Launcher {
    Torchrun,
    Slurm,
}

impl fmt::Display for Launcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Launcher::Torchrun => {
                "torchrun sets RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE for each process"
            }
            Launcher::Slurm => {
                "srun sets SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and SLURM_NTASKS_PER_NODE"
            }
        })
    }
}

fn bad(field: &'static str, why: String) -> crate::error::Error {
    ConfigError::Run { field, why }.into()
}

impl Topology {
    /// One process alone: rank 0 of 1.
    pub fn single() -> Topology {
        Topology {
            rank: 0,
            world_size: 1,
            local_rank: 0,
            local_world_size: 1,
            tensor: 1,
            context: 1,
            pipeline: 1,
        }
    }

    /// A topology given by hand: `rank` of `world_size`, `local_rank` of
    /// `local_world_size` on its node. Inconsistent values (a rank not below its size, more
    /// processes on the node than in the world) are a [`ConfigError::Run`] naming them.
    pub fn new(rank: u64, world_size: u64, local_rank: u64, local_world_size: u64) -> Result<Self> {
        let t = Topology {
            rank,
            world_size,
            local_rank,
            local_world_size,
            tensor: 1,
            context: 1,
            pipeline: 1,
        };
        t.check(
            None,
            ["rank", "world_size", "local_rank", "local_world_size"],
        )?;
        Ok(t)
    }

    /// The topology the launcher's environment gives: torchrun's (or
    /// `torch.distributed.run`'s, or any launcher's that sets them) `RANK`, `WORLD_SIZE`,
    /// `LOCAL_RANK`, `LOCAL_WORLD_SIZE`; else Slurm's `SLURM_PROCID`, `SLURM_NTASKS`,
    /// `SLURM_LOCALID`, `SLURM_NTASKS_PER_NODE` (its compressed form, `4(x2),2`, picked by
    /// `SLURM_NODEID`). A variable missing, not a number, or inconsistent with the others
    /// is a [`ConfigError::Run`] naming it; neither launcher's variables at all, too (use
    /// [`single`](Self::single) for one process).
    pub fn from_env() -> Result<Self> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// As [`from_env`](Self::from_env), reading variables through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self> {
        if var("RANK").is_some() {
            let n = |name: &'static str| number(&var, name, Launcher::Torchrun);
            let t = Topology {
                rank: n("RANK")?,
                world_size: n("WORLD_SIZE")?,
                local_rank: n("LOCAL_RANK")?,
                local_world_size: n("LOCAL_WORLD_SIZE")?,
                ..Topology::single()
            };
            t.check(
                Some(Launcher::Torchrun),
                ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"],
            )?;
            return Ok(t);
        }
        if var("SLURM_PROCID").is_some() {
            let l = Launcher::Slurm;
            let n = |name: &'static str| number(&var, name, l);
            let per_node = var("SLURM_NTASKS_PER_NODE").ok_or_else(|| {
                bad(
                    "SLURM_NTASKS_PER_NODE",
                    format!("SLURM_NTASKS_PER_NODE is not set ({l})"),
                )
            })?;
            let counts = slurm_counts(&per_node).ok_or_else(|| {
                bad(
                    "SLURM_NTASKS_PER_NODE",
                    format!(
                        "SLURM_NTASKS_PER_NODE={per_node:?} is not a task count a node, as \
                         \"8\" or \"4(x2),2\""
                    ),
                )
            })?;
            let local_world_size = match (counts.as_slice(), var("SLURM_NODEID")) {
                ([one], _) => *one,
                (many, _) if many.iter().all(|&c| c == many[0]) => many[0],
                (many, Some(_)) => {
                    let node = n("SLURM_NODEID")?;
                    *usize::try_from(node)
                        .ok()
                        .and_then(|i| many.get(i))
                        .ok_or_else(|| {
                            bad(
                                "SLURM_NODEID",
                                format!(
                                    "SLURM_NODEID={node} but SLURM_NTASKS_PER_NODE={per_node:?} \
                                     lists {} nodes",
                                    many.len()
                                ),
                            )
                        })?
                }
                (_, None) => {
                    return Err(bad(
                        "SLURM_NODEID",
                        format!(
                            "SLURM_NTASKS_PER_NODE={per_node:?} differs between nodes, and \
                             SLURM_NODEID, which says which node this is, is not set"
                        ),
                    ))
                }
            };
            let t = Topology {
                rank: n("SLURM_PROCID")?,
                world_size: n("SLURM_NTASKS")?,
                local_rank: n("SLURM_LOCALID")?,
                local_world_size,
                ..Topology::single()
            };
            t.check(
                Some(l),
                [
                    "SLURM_PROCID",
                    "SLURM_NTASKS",
                    "SLURM_LOCALID",
                    "SLURM_NTASKS_PER_NODE",
                ],
            )?;
            return Ok(t);
        }
        Err(bad(
            "RANK",
            "no launcher's variables are set: neither RANK (torchrun) nor SLURM_PROCID \
             (Slurm); start the processes with torchrun or srun, or use Topology::single() \
             for one process"
                .to_owned(),
        ))
    }

    /// Checks the four numbers against each other; `names` are their names as the caller
    /// knows them (rank, world size, local rank, local world size).
    fn check(&self, from: Option<Launcher>, names: [&'static str; 4]) -> Result<()> {
        let [rank, world, local, local_world] = names;
        let tail = from.map_or(String::new(), |l| format!(" ({l})"));
        if self.world_size == 0 {
            return Err(bad(world, format!("{world} is 0{tail}")));
        }
        if self.local_world_size == 0 {
            return Err(bad(local_world, format!("{local_world} is 0{tail}")));
        }
        if self.rank >= self.world_size {
            return Err(bad(
                rank,
                format!(
                    "{rank}={} is not below {world}={}{tail}",
                    self.rank, self.world_size
                ),
            ));
        }
        if self.local_rank >= self.local_world_size {
            return Err(bad(
                local,
                format!(
                    "{local}={} is not below {local_world}={}{tail}",
                    self.local_rank, self.local_world_size
                ),
            ));
        }
        if self.local_world_size > self.world_size {
            return Err(bad(
                local_world,
                format!(
                    "{local_world}={} is more processes than {world}={}{tail}",
                    self.local_world_size, self.world_size
                ),
            ));
        }
        Ok(())
    }

    /// The same processes with model-parallel groups of `tensor` × `context` × `pipeline`
    /// ranks, laid out in Megatron's default order (tensor fastest, then context, then
    /// data, then pipeline): the data-parallel rank and size are then this process's among
    /// the `world_size / (tensor · context · pipeline)` data-parallel ranks. Sizes of 0, or
    /// whose product does not divide the world size, are a [`ConfigError::Run`].
    pub fn data_parallel(&self, tensor: u64, context: u64, pipeline: u64) -> Result<Self> {
        for (name, n) in [
            ("tensor", tensor),
            ("context", context),
            ("pipeline", pipeline),
        ] {
            if n == 0 {
                return Err(bad(name, format!("a {name}-parallel size of 0")));
            }
        }
        let model = tensor.saturating_mul(context).saturating_mul(pipeline);
        if !self.world_size.is_multiple_of(model) {
            return Err(bad(
                "tensor",
                format!(
                    "tensor {tensor} × context {context} × pipeline {pipeline} = {model} ranks a \
                     model replica, which does not divide the world size {}",
                    self.world_size
                ),
            ));
        }
        Ok(Topology {
            tensor,
            context,
            pipeline,
            ..*self
        })
    }

    /// The global rank.
    pub fn rank(&self) -> u64 {
        self.rank
    }

    /// The number of processes.
    pub fn world_size(&self) -> u64 {
        self.world_size
    }

    /// The rank among this node's processes.
    pub fn local_rank(&self) -> u64 {
        self.local_rank
    }

    /// The processes on this node.
    pub fn local_world_size(&self) -> u64 {
        self.local_world_size
    }

    /// The data-parallel rank: what batches are sharded by.
    pub fn dp_rank(&self) -> u64 {
        (self.rank / (self.tensor * self.context)) % self.dp_size()
    }

    /// The number of data-parallel ranks.
    pub fn dp_size(&self) -> u64 {
        self.world_size / (self.tensor * self.context * self.pipeline)
    }

    /// The tensor-, context- and pipeline-parallel sizes.
    pub fn model_parallel(&self) -> (u64, u64, u64) {
        (self.tensor, self.context, self.pipeline)
    }
}

/// `name` read as a whole number, or the error naming it.
fn number(var: &impl Fn(&str) -> Option<String>, name: &'static str, l: Launcher) -> Result<u64> {
    let value = var(name).ok_or_else(|| bad(name, format!("{name} is not set ({l})")))?;
    value.trim().parse().map_err(|_| {
        bad(
            name,
            format!("{name}={value:?} is not a whole number ({l})"),
        )
    })
}

/// Slurm's compressed task counts a node (`"4"`, `"4(x2),2"`), expanded; `None` if it
/// does not read.
fn slurm_counts(text: &str) -> Option<Vec<u64>> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        match part.split_once("(x") {
            Some((n, times)) => {
                let n: u64 = n.parse().ok()?;
                let times: usize = times.strip_suffix(')')?.parse().ok()?;
                if times > 1 << 20 {
                    return None;
                }
                out.extend(std::iter::repeat_n(n, times));
            }
            None => out.push(part.parse().ok()?),
        }
    }
    (!out.is_empty() && out.iter().all(|&c| c > 0)).then_some(out)
}
