//! `pinring.Mixture`: several sources of one kind mixed by weight into one global
//! sequence, sharded over ranks once.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use pinring::source::{self, MixtureProblem, Segmented, Stop};
use pinring::{ConfigError, Dtype};

use crate::args;
use crate::errors::classes::config;
use crate::errors::from_core::to_py;
use crate::source::documents::{Documents, Packing};
use crate::source::dtype::Row;
use crate::source::given;
use crate::source::mixed::MixSpec;
use crate::source::spec::Spec;
use crate::source::weights::WeightsArg;
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};

/// Several sources of one kind and one sample shape mixed by weight into one global
/// sequence, which the mixture shards over ranks: what `Loader(mix, batch_size=...)`
/// feeds (`Loader(mix)` for Documents). Each batch's `batch.sources` says each row's
/// source, `batch.sample_ids` its id within that source.
///
/// A mixture of `Documents` mixes document by document: the g-th document of the global
/// document sequence comes from the source the rule picks, each source walking its own
/// documents (its shards one after the other, or its own shuffle), and the mixed sequence
/// is packed into steps exactly as one `Documents` source packs its own (every rank takes
/// each step's documents in rank order; `tokens_per_batch`, `max_seq_len`, `max_docs`,
/// `schedule`, `dtype` and `positions` are the sources', which must agree). A batch is one
/// step of this rank; `batch.sources` and `batch.doc_ids` name each document.
///
/// - Which source: the g-th sample of the global sequence comes from the source whose
///   next sample falls due first among those still owed one (the quota rule; ties to the
///   lowest index), a pure function of the weights and g: after any n samples each
///   source's count is within 1 of `weight × n` (weights normalized to sum to 1).
/// - Which sample: each source walks its own order (its own shuffle each epoch of its
///   own; no sample twice within its epoch), keyed by the mixture's `seed`.
/// - Ranks: rank r of world_size W takes positions r, r + W, ... of the global sequence;
///   with the Loader's batch_size B, step k of every rank is positions k·W·B .. (k+1)·W·B,
///   so every rank gets the same whole batches. The sources are built without rank and
///   world_size (rank=0, world_size=1, their defaults): those belong to the mixture.
/// - State: `Loader.state_dict()` is the global count, each source's own state, the
///   weights' history, the step and the skipped steps, the same on every rank; it resumes
///   on any world size and batch size (exactly once across the runs), and
///   `load_state_dict(state, weights=[...])` goes on with new weights from the saved point.
///
/// Args:
///     sources: a list of TokenWindows (of one seq_len and dtype), of FixedRecords (of
///         one record_bytes) or of Documents (of one packing: tokens_per_batch,
///         max_seq_len, max_docs, schedule, dtype, positions; of one bos and token width),
///         each made with rank=0 and world_size=1.
///     weights: each source's weight, one per source: finite, at least 0, not all 0; they
///         need not sum to 1 (each is taken over their sum). None: equal weights.
///     seed: keys every source's "shuffled" or "random" order together with the source's
///         own seed (0: each source walks exactly as it would alone). It does not change
///         which source a position takes.
///     rank: this process's rank: ranks take disjoint positions of the global sequence.
///     world_size: how many ranks share it.
///     stop: "never" (each source cycles its own epochs, a fresh order each; the run is
///         endless), "first" (end before the first sample that would start any source's
///         second epoch) or "all" (end once every source of positive weight finished its
///         first epoch; the early ones cycle meanwhile). The end falls on a whole step of
///         every rank. (For Documents, a stop rule indexes every shard of every source
///         when the mixture is made: it needs their document counts.)
///
/// Raises:
///     ConfigError: `e.argument` is "weights" for weights that are negative, NaN,
///         infinite, all 0 or not one per source; "sources" for no source, sources of
///         different kinds (TokenWindows beside FixedRecords), of different sample shapes
///         (seq_len, dtype, record_bytes; for Documents their packing, bos or token
///         width), or a source that sets its own rank/world_size;
///         "rank", "world_size", "seed" or "stop" for those out of range.
///     TypeError: `sources` is not a list of TokenWindows, FixedRecords or Documents.
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", frozen)]
#[derive(Debug)]
pub struct Mixture {
    spec: MixSpec,
    /// A batch's row (Documents: the slot's bytes).
    row: Row,
    /// The samples' (tokens') element type.
    dtype: Dtype,
    /// The sources' class name.
    kind: &'static str,
    /// The source objects, as given.
    sources: Vec<Py<PyAny>>,
    rank: u64,
    world_size: u64,
    seed: u64,
    stop: Stop,
}

/// The `stop` argument.
fn stop_arg(py: Python<'_>, stop: &str) -> PyResult<Stop> {
    Stop::from_name(&stop.trim().to_ascii_lowercase()).ok_or_else(|| {
        config(
            py,
            "stop",
            format!("stop {stop:?} is not one of \"never\", \"first\", \"all\""),
        )
    })
}

/// A mixture problem as the ConfigError about the argument it concerns.
pub(crate) fn problem_error(py: Python<'_>, p: &MixtureProblem) -> PyErr {
    config(py, p.field(), format!("invalid Mixture: {p}"))
}

/// A core error of building a mixture, in Python's words.
pub(crate) fn build_error(py: Python<'_>, e: pinring::Error) -> PyErr {
    match e {
        pinring::Error::Config(ConfigError::Mixture(p)) => problem_error(py, &p),
        other => to_py(py, other),
    }
}

/// The sources' specs, as one mixture: of one kind, one dtype.
fn mixed(
    py: Python<'_>,
    specs: Vec<(Spec, Row, &'static str)>,
    weights: Option<Vec<f64>>,
    settings: (u64, u64, u64, Stop),
) -> PyResult<MixSpec> {
    let mut tokens = Vec::new();
    let mut records = Vec::new();
    let mut decoder = None;
    let first_kind = specs.first().map_or("", |s| s.2);
    let first_row = specs.first().map(|s| s.1);
    for (index, (spec, row, kind)) in specs.into_iter().enumerate() {
        if kind != first_kind {
            return Err(problem_error(
                py,
                &MixtureProblem::Kinds {
                    index,
                    first: first_kind.to_owned(),
                    here: kind.to_owned(),
                },
            ));
        }
        if let Some(first) = first_row.filter(|f| f.dtype != row.dtype) {
            return Err(config(
                py,
                "sources",
                format!(
                    "invalid Mixture: source {index}'s dtype is \"{}\", source 0's is \"{}\": a \
                     mixture's sources give samples of one dtype",
                    row.dtype.name(),
                    first.dtype.name()
                ),
            ));
        }
        match spec {
            Spec::Tokens {
                sampler,
                decoder: d,
            } => {
                decoder = Some(d);
                tokens.push(sampler);
            }
            Spec::Records { sampler } => records.push(sampler),
            Spec::Documents { .. } => unreachable!("Documents are mixed by documents_mixed"),
            Spec::Mixed(_) => unreachable!("given::single makes no mixture"),
        }
    }
    let built = py.detach(|| -> pinring::Result<MixSpec> {
        Ok(match decoder {
            Some(decoder) => MixSpec::Tokens {
                mix: settled(source::Mixture::builder(tokens), &settings, &weights).build()?,
                decoder,
            },
            None => MixSpec::Records {
                mix: settled(source::Mixture::builder(records), &settings, &weights).build()?,
            },
        })
    });
    built.map_err(|e| build_error(py, e))
}

/// A mixture of `sources`, the first of them a `Documents`: the sources' own settings
/// (shards, bos, order, index cache) mixed, packed as they all pack (they must agree), and
/// the mixture's row shape (its slot's bytes).
fn documents_mixed(
    py: Python<'_>,
    sources: &[Bound<'_, PyAny>],
    weights: Option<Vec<f64>>,
    (seed, rank, world, stop): (u64, u64, u64, Stop),
) -> PyResult<(MixSpec, Row, Dtype)> {
    let mut members = Vec::new();
    let mut first: Option<(Packing, Dtype)> = None;
    for (index, src) in sources.iter().enumerate() {
        let Ok(docs) = src.cast::<Documents>() else {
            let here = given::single(src).map_or("another object", |s| s.2);
            return Err(problem_error(
                py,
                &MixtureProblem::Kinds {
                    index,
                    first: "Documents".to_owned(),
                    here: here.to_owned(),
                },
            ));
        };
        let (member, packing, (_, world_size), dtype) = docs.get().member();
        if world_size != 1 {
            return Err(problem_error(
                py,
                &MixtureProblem::SourceSetting {
                    index,
                    setting: "rank/world_size",
                },
            ));
        }
        if let Some((p, _)) = &first {
            if let Some((name, here, there)) = p.difference(&packing) {
                return Err(config(
                    py,
                    "sources",
                    format!(
                        "invalid Mixture: source {index}'s {name} is {there}, source 0's is \
                         {here}: a mixture's Documents sources pack steps of one shape (the \
                         mixture packs them all alike)"
                    ),
                ));
            }
        } else {
            first = Some((packing, dtype));
        }
        members.push(member);
    }
    let Some((packing, dtype)) = first else {
        return Err(problem_error(py, &MixtureProblem::NoSources));
    };
    let built = py.detach(|| {
        let mut b = source::Mixture::documents(members)
            .seed(seed)
            .shard(rank, world)
            .stop(stop)
            .tokens_per_batch(packing.tokens_per_batch)
            .max_seq_len(packing.max_seq_len)
            .schedule(packing.schedule.clone())
            .token_type(packing.token_type)
            .positions(packing.positions);
        if let Some(m) = packing.max_docs {
            b = b.max_docs(m);
        }
        if let Some(w) = &weights {
            b = b.weights(w.clone());
        }
        b.build()
    });
    let mix = built.map_err(|e| build_error(py, e))?;
    let row = Row {
        cols: mix.fields().bytes(),
        dtype: Dtype::U8,
    };
    Ok((MixSpec::Documents { mix }, row, dtype))
}

/// `b` with the mixture's own settings: `(seed, rank, world_size, stop)` and the weights.
fn settled<S: Segmented + Clone>(
    b: source::MixtureBuilder<S>,
    &(seed, rank, world, stop): &(u64, u64, u64, Stop),
    weights: &Option<Vec<f64>>,
) -> source::MixtureBuilder<S> {
    let b = b.seed(seed).shard(rank, world).stop(stop);
    match weights {
        Some(w) => b.weights(w.clone()),
        None => b,
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl Mixture {
    #[new]
    #[pyo3(signature = (sources, weights = None, seed = 0, rank = 0, world_size = 1, stop = "never"))]
    fn new(
        py: Python<'_>,
        #[gen_stub(override_type(
            type_repr = "typing.Sequence[TokenWindows | FixedRecords | Documents]",
            imports = ("typing",)
        ))]
        sources: &Bound<'_, PyAny>,
        weights: Option<WeightsArg<'_>>,
        seed: i128,
        rank: i128,
        world_size: i128,
        stop: &str,
    ) -> PyResult<Self> {
        if !(sources.is_instance_of::<PyList>() || sources.is_instance_of::<PyTuple>()) {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "Mixture(sources, ...) takes a list of sources (TokenWindows, FixedRecords or \
                 Documents), got a {}",
                sources.get_type().name()?
            )));
        }
        let mut objects = Vec::new();
        let mut specs = Vec::new();
        for (index, src) in sources.try_iter()?.enumerate() {
            let src = src?;
            let Some(spec) = given::single(&src) else {
                return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                    "Mixture: sources[{index}] is a {}, not a TokenWindows, FixedRecords or \
                     Documents (a Mixture does not nest)",
                    src.get_type().name()?
                )));
            };
            specs.push(spec);
            objects.push(src.unbind());
        }
        let weights = weights.map(|w| w.read("one per source")).transpose()?;
        let seed = args::seed(py, seed)?;
        let (rank, world_size) = args::rank_in_world(py, rank, world_size)?;
        let stop = stop_arg(py, stop)?;
        let (row, kind) = specs.first().map_or(
            (
                Row {
                    cols: 0,
                    dtype: Dtype::U8,
                },
                "",
            ),
            |s| (s.1, s.2),
        );
        let settings = (seed, rank, world_size, stop);
        let (spec, row, dtype) = if kind == "Documents" {
            let given = sources.try_iter()?.collect::<PyResult<Vec<_>>>()?;
            documents_mixed(py, &given, weights, settings)?
        } else {
            (mixed(py, specs, weights, settings)?, row, row.dtype)
        };
        Ok(Mixture {
            spec,
            row,
            dtype,
            kind,
            sources: objects,
            rank,
            world_size,
            seed,
            stop,
        })
    }

    /// The sources, as given.
    #[getter]
    #[gen_stub(override_return_type(type_repr = "list[TokenWindows | FixedRecords | Documents]"))]
    fn sources(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        self.sources.iter().map(|s| s.clone_ref(py)).collect()
    }

    /// The weights, as given (equal ones when none were).
    #[getter]
    fn weights(&self) -> Vec<f64> {
        self.spec.weights()
    }

    /// Each source's share: the weights over their sum.
    #[getter]
    fn shares(&self) -> Vec<f64> {
        self.spec.shares()
    }

    /// Each source's samples per epoch of its own walk (documents, for Documents: None
    /// where not counted yet, before every shard of the source was indexed).
    #[getter]
    fn epoch_lens(&self) -> Vec<Option<u64>> {
        self.spec.epoch_lens()
    }

    /// The mixture's seed.
    #[getter]
    fn seed(&self) -> u64 {
        self.seed
    }

    /// This process's rank.
    #[getter]
    fn rank(&self) -> u64 {
        self.rank
    }

    /// Ranks the global sequence is sharded over.
    #[getter]
    fn world_size(&self) -> u64 {
        self.world_size
    }

    /// "never", "first" or "all".
    #[getter]
    fn stop(&self) -> &'static str {
        self.stop.name()
    }

    /// The samples' element type (the sources'; for Documents, their tokens').
    #[getter]
    fn dtype(&self) -> &'static str {
        self.dtype.name()
    }

    fn __repr__(&self) -> String {
        let weights: Vec<String> = self.spec.weights().iter().map(|w| format!("{w}")).collect();
        format!(
            "Mixture({} {} source(s), weights=[{}], seed={}, rank={}/{}, stop='{}', dtype='{}')",
            self.sources.len(),
            self.kind,
            weights.join(", "),
            self.seed,
            self.rank,
            self.world_size,
            self.stop.name(),
            self.dtype.name()
        )
    }
}

impl Mixture {
    /// The mixture as a loader needs it, and its row shape (its sources').
    pub(crate) fn spec(&self) -> (Spec, Row) {
        (Spec::Mixed(self.spec.clone()), self.row)
    }
}
