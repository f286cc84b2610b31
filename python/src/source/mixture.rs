//! `pinring.Mixture`: several sources of one kind mixed by weight into one global
//! sequence, sharded over ranks once.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use pinring::source::{self, AnySource, MixtureProblem, Run, Source, Stop};
use pinring::Dtype;

use crate::args;
use crate::errors::classes::config;
use crate::errors::from_core::to_py;
use crate::source::base::PySource;
use crate::source::documents::Documents;
use crate::source::dtype::Row;
use crate::source::given::{placement, Given};
use crate::source::read;
use crate::source::weights::WeightsArg;
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};
use crate::topology::PyTopology;

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
///     topology: a `pinring.Topology`, instead of rank and world_size: its data-parallel
///         rank and size (`topo.dp_rank`, `topo.dp_size`).
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
#[pyclass(module = "pinring", extends = PySource, frozen)]
#[derive(Debug)]
pub struct Mixture {
    /// The sources' class name.
    kind: &'static str,
    /// The source objects, as given.
    sources: Vec<Py<PyAny>>,
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
fn problem_error(py: Python<'_>, p: &MixtureProblem) -> PyErr {
    config(py, p.field(), format!("invalid Mixture: {p}"))
}

/// The mixture's own settings: seed, stop rule and weights.
struct Settings {
    seed: u64,
    stop: Stop,
    weights: Option<Vec<f64>>,
}

/// A mixture of the window (or record) sources `members`, all of one kind.
fn windows_mixed(members: &[Given], settings: &Settings) -> pinring::Result<AnySource> {
    fn built<S: source::WindowFormat>(
        samplers: Vec<source::Sampler<S>>,
        s: &Settings,
    ) -> pinring::Result<source::Mixture<S>> {
        let b = source::Mixture::builder(samplers).seed(s.seed).stop(s.stop);
        match &s.weights {
            Some(w) => b.weights(w.clone()).build(),
            None => b.build(),
        }
    }
    let mut tokens = Vec::new();
    let mut records = Vec::new();
    for member in members {
        match &member.source {
            AnySource::TokenWindows(s) => tokens.push(s.clone()),
            AnySource::FixedRecords(s) => records.push(s.clone()),
            _ => unreachable!("the members are windows or records"),
        }
    }
    Ok(if records.is_empty() {
        AnySource::TokenMixture(built(tokens, settings)?)
    } else {
        AnySource::RecordMixture(built(records, settings)?)
    })
}

/// A mixture of the `Documents` objects `sources`: their own settings (shards, bos,
/// order, index cache) mixed, packed as they all pack (they must agree), and the tokens'
/// dtype.
fn documents_mixed(
    py: Python<'_>,
    sources: &[Bound<'_, PyAny>],
    settings: &Settings,
) -> PyResult<(AnySource, Dtype)> {
    let mut members = Vec::new();
    let mut first: Option<(source::Packing, Dtype)> = None;
    for (index, src) in sources.iter().enumerate() {
        let docs = src.cast::<Documents>().map_err(|_| {
            let here = read::single(src).map_or("another object", |g| g.class);
            kinds(py, index, "Documents", here)
        })?;
        if let Some(setting) = docs.get().modes_given() {
            return Err(config(
                py,
                "sources",
                format!(
                    "invalid Mixture: source {index} was given {setting}, which a mixture does \
                     not take (it packs whole documents, one pop a step, with inputs, targets \
                     and cu_seqlens): leave it out, or use one Documents source"
                ),
            ));
        }
        let (member, packing) = docs.get().member();
        let dtype = docs.as_super().get().dtype;
        match &first {
            Some((p, first_dtype)) => {
                if let Some((name, here, there)) = p.difference(&packing) {
                    // Python names the token type by its argument, `dtype`, and its values
                    // as numpy does.
                    let (name, here, there) = match name.as_str() {
                        "token_type" => (
                            "dtype".to_owned(),
                            format!("\"{}\"", first_dtype.name()),
                            format!("\"{}\"", dtype.name()),
                        ),
                        _ => (name, here, there),
                    };
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
            }
            None => first = Some((packing, dtype)),
        }
        members.push(member);
    }
    let Some((packing, dtype)) = first else {
        return Err(problem_error(py, &MixtureProblem::NoSources));
    };
    let built = py.detach(|| {
        let mut b = source::Mixture::documents(members)
            .seed(settings.seed)
            .stop(settings.stop)
            .packing(packing);
        if let Some(w) = &settings.weights {
            b = b.weights(w.clone());
        }
        b.build()
    });
    let mix = built.map_err(|e| to_py(py, e))?;
    Ok((AnySource::DocumentMixture(mix), dtype))
}

/// The error of source `index` of another kind (`here`) than source 0 (`first`).
fn kinds(py: Python<'_>, index: usize, first: &str, here: &str) -> PyErr {
    problem_error(
        py,
        &MixtureProblem::Kinds {
            index,
            first: first.to_owned(),
            here: here.to_owned(),
        },
    )
}

/// Checks the sources read from `sources` against source 0: one kind, one dtype, none
/// with a rank or world size of its own.
fn check_members(py: Python<'_>, members: &[Given]) -> PyResult<()> {
    let Some(first) = members.first() else {
        return Ok(());
    };
    for (index, member) in members.iter().enumerate() {
        if member.class != first.class {
            return Err(kinds(py, index, first.class, member.class));
        }
        if member.row.dtype != first.row.dtype {
            return Err(config(
                py,
                "sources",
                format!(
                    "invalid Mixture: source {index}'s dtype is \"{}\", source 0's is \"{}\": a \
                     mixture's sources give samples of one dtype",
                    member.row.dtype.name(),
                    first.row.dtype.name()
                ),
            ));
        }
        if member.place != (0, 1) {
            return Err(problem_error(
                py,
                &MixtureProblem::SourceSetting {
                    index,
                    setting: "rank/world_size",
                },
            ));
        }
    }
    Ok(())
}

/// The shares of the mixture `source` (the weights over their sum) and each source's
/// samples an epoch of its own walk (documents: `None` until every shard of the source
/// was indexed).
fn mixture_figures(source: &AnySource) -> (Vec<f64>, Vec<Option<u64>>) {
    let all = |lens: Vec<u64>| lens.into_iter().map(Some).collect();
    match source {
        AnySource::TokenMixture(m) => (m.shares().to_vec(), all(m.epoch_lens())),
        AnySource::RecordMixture(m) => (m.shares().to_vec(), all(m.epoch_lens())),
        AnySource::DocumentMixture(m) => (m.shares().to_vec(), m.epoch_lens()),
        _ => (Vec::new(), Vec::new()),
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl Mixture {
    #[new]
    #[pyo3(signature = (sources, weights = None, seed = 0, rank = 0, world_size = 1, stop = "never", *, topology = None))]
    #[allow(clippy::too_many_arguments)]
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
        topology: Option<PyRef<'_, PyTopology>>,
    ) -> PyResult<PyClassInitializer<Self>> {
        if !(sources.is_instance_of::<PyList>() || sources.is_instance_of::<PyTuple>()) {
            return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                "Mixture(sources, ...) takes a list of sources (TokenWindows, FixedRecords or \
                 Documents), got a {}",
                sources.get_type().name()?
            )));
        }
        let objects = sources.try_iter()?.collect::<PyResult<Vec<_>>>()?;
        let mut members = Vec::new();
        for (index, src) in objects.iter().enumerate() {
            match read::single(src) {
                Some(member) => members.push(member),
                None => {
                    return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                        "Mixture: sources[{index}] is a {}, not a TokenWindows, FixedRecords or \
                         Documents (a Mixture does not nest)",
                        src.get_type().name()?
                    )))
                }
            }
        }
        let weights = weights.map(|w| w.read("one per source")).transpose()?;
        let settings = Settings {
            seed: args::seed(py, seed)?,
            stop: stop_arg(py, stop)?,
            weights,
        };
        let place = placement(py, rank, world_size, topology.as_deref())?;
        check_members(py, &members)?;
        let kind = members.first().map_or("", |m| m.class);
        let (source, dtype) = if kind == "Documents" {
            documents_mixed(py, &objects, &settings)?
        } else {
            let built = py.detach(|| windows_mixed(&members, &settings));
            let dtype = members.first().map_or(Dtype::U8, |m| m.row.dtype);
            (built.map_err(|e| to_py(py, e))?, dtype)
        };
        // This rank's share checked now, as the loader will shard it.
        let (rank, world_size) = place;
        py.detach(|| {
            source.with_run(&Run {
                rank,
                world_size,
                ..Run::default()
            })
        })
        .map_err(|e| to_py(py, e))?;
        let (row, layout) = match &source {
            AnySource::DocumentMixture(m) => (
                Row {
                    cols: m.fields().bytes(),
                    dtype: Dtype::U8,
                },
                Some((m.fields(), m.schedule().clone())),
            ),
            _ => (members[0].row, None),
        };
        let given = Given {
            source,
            row,
            place,
            class: "Mixture",
            layout,
        };
        Ok(PySource::new(given, dtype).add_subclass(Mixture {
            kind,
            sources: objects.into_iter().map(Bound::unbind).collect(),
            seed: settings.seed,
            stop: settings.stop,
        }))
    }

    /// The sources, as given.
    #[getter]
    #[gen_stub(override_return_type(type_repr = "list[TokenWindows | FixedRecords | Documents]"))]
    fn sources(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        self.sources.iter().map(|s| s.clone_ref(py)).collect()
    }

    /// The weights, as given (equal ones when none were).
    #[getter]
    fn weights(slf: PyRef<'_, Self>) -> Vec<f64> {
        let given = &slf.as_super().given;
        given.source.weights().unwrap_or_default().to_vec()
    }

    /// Each source's share: the weights over their sum.
    #[getter]
    fn shares(slf: PyRef<'_, Self>) -> Vec<f64> {
        mixture_figures(&slf.as_super().given.source).0
    }

    /// Each source's samples per epoch of its own walk (documents, for Documents: None
    /// where not counted yet, before every shard of the source was indexed).
    #[getter]
    fn epoch_lens(slf: PyRef<'_, Self>) -> Vec<Option<u64>> {
        mixture_figures(&slf.as_super().given.source).1
    }

    /// The mixture's seed.
    #[getter]
    fn seed(&self) -> u64 {
        self.seed
    }

    /// "never", "first" or "all".
    #[getter]
    fn stop(&self) -> &'static str {
        self.stop.name()
    }

    fn __repr__(slf: PyRef<'_, Self>) -> String {
        let source = slf.as_super();
        let weights = source.given.source.weights().unwrap_or_default();
        let weights: Vec<String> = weights.iter().map(|w| format!("{w}")).collect();
        format!(
            "Mixture({} {} source(s), weights=[{}], seed={}, {}, stop='{}', dtype='{}')",
            slf.sources.len(),
            slf.kind,
            weights.join(", "),
            slf.seed,
            source.place(),
            slf.stop.name(),
            source.dtype.name()
        )
    }
}
