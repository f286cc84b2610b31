//! `pinring.Documents`: packed documents from llm.c / modded-nanogpt token shards, a step
//! of one rank per batch, as modded-nanogpt's generator makes them.

use std::path::PathBuf;

use pyo3::prelude::*;
use pyo3::types::{IntoPyDict, PyDict};

use pinring::source::{
    self, AnySource, DocumentProblem, Run, Source, SourceError, StepModes, MAX_TOKENS_PER_BATCH,
};
use pinring::Dtype;

use crate::args;
use crate::errors::classes::{config, new_error, obj, Kind};
use crate::source::base::PySource;
use crate::source::documents_args::{max_docs_arg, order_arg, schedule_arg, targets_dtype_arg};
use crate::source::dtype::Row;
use crate::source::given::{placement, Given};
use crate::source::paths::{file_names, path_list, PathsArg};
use crate::source::shards::{dtype_arg, open_error, FormatArg};
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};
use crate::topology::PyTopology;

/// Packed documents from llm.c / modded-nanogpt token shards: each batch is one training
/// step of this rank, for variable-length (document-masked) attention.
///
/// A document starts at a `bos` token and runs to the next one (or its shard's end);
/// tokens before a shard's first `bos` are never used. Files that keep an index of their
/// documents (format="megatron": the `.idx`'s document indices; format="datatrove": the
/// `.ds.index`'s document ends) give the documents from it when `bos` is None; with `bos`
/// given, every file is scanned for it as for llm.c shards. Each step of each rank packs
/// `tokens_per_batch + 1` tokens of whole documents, each cut at `max_seq_len`, the last
/// one cut to fill the step. With order="sequential", rank `r` of `world_size` at step `k`
/// gets exactly what modded-nanogpt's `distributed_data_generator(pattern, num_tokens =
/// tokens_per_batch * world_size, max_seq_len, grad_accum_steps=1, align_to_bos=True)`
/// yields there: ranks take each step's documents in rank order from one walk; a shard
/// whose documents run out mid-step drops that partial step and the step starts over at
/// the next shard; after the last shard the next epoch starts at the first (modded-nanogpt
/// stops there).
///
/// A batch's fields (`batch["inputs"]`, ...; `batch.fields` names them), 1-D, of this
/// step's own `N` = tokens_per_batch:
///
/// - `tokens` (`N + 1`, of `dtype`); `inputs` = `tokens[:-1]` and `targets` = `tokens[1:]`
///   (`N` each, views of it: int64 targets are `targets.long()` on the device);
/// - `cu_seqlens` (int32, `max_docs` of the step): `[0, end of each document...]`, the last
///   document ending at `N`, padded with `N`;
/// - `positions` (int32, `N`, with positions=True): each input's position in its document;
/// - with targets_dtype="int64", `targets` is an int64 field of its own (`N`), as
///   modded-nanogpt hands it to its loss, not a view;
/// - `bigram_inputs` (int32, `N`, with bigram_vocab_size=V): modded-nanogpt's
///   `get_bigram_hash(inputs)`, computed by the decode workers into the slot.
///
/// `batch.host(name)` is a numpy view of a field's host bytes, readable from pop until
/// release (modded-nanogpt's `bigram_cpu`); `batch.micro_step` the pop within its
/// optimizer step (`0..grad_accum_steps`).
///
/// `batch.max_seqlen` is the step's longest document (what varlen attention takes),
/// `batch.doc_ids` each document's id (the global offset of its `bos` token over the shards
/// in order: the same whatever the order, seed, rank or world size), `batch.step` the step.
///
/// Where documents start is found once per shard (a scan for `bos`): the first shard here,
/// the next ones by a thread ahead of the walk, so no step waits for an index
/// (`index_stats()` says so); in shuffled order every shard here, in parallel. It has no
/// `len()`: how many steps an epoch holds depends on where its documents fall.
///
/// Args:
///     paths: a shard's path, a glob with `*` / `?` in the file name, or a list of either
///         (str or os.PathLike), read in that order (a glob's matches sorted, as
///         modded-nanogpt sorts them). Shards of u16 tokens (GPT-2) and of u32 tokens
///         (LLaMA-3) are read.
///     bos: the token that starts a document; None: the files' own index of their
///         documents where their format keeps one (megatron, datatrove), else 50256
///         (GPT-2's `<|endoftext|>`) for 16-bit tokens, 128000 (LLaMA-3's
///         `<|begin_of_text|>`) for 32-bit tokens.
///     tokens_per_batch: tokens of inputs per rank per step (`N`; modded-nanogpt's
///         `num_tokens` is this times world_size).
///     max_seq_len: documents are cut at this many tokens (their tails are dropped).
///     max_docs: the length of `cu_seqlens` in every step (a step holds at most
///         `max_docs - 1` documents per rank); None: modded-nanogpt's rule, step by step
///         (64 / 96 / 128 for 16384 / 32768 / 49152 tokens, else the next multiple of 128
///         of `tokens_per_batch // 300`, at least 128); "formula": that formula alone, no
///         table (the medium track's `train_gpt_medium.py`). A step that needs more documents is
///         a ConfigError from `pop()` at that step, naming it and the count it needed.
///     schedule: changes of the step sizes, known up front: a list of `(from_step,
///         tokens_per_batch, max_seq_len)`, strictly increasing in `from_step`; step `k`
///         uses the last entry with `from_step <= k` (the sizes above before the first; an
///         entry at step 0 replaces them). What modded-nanogpt's `.send()` does at step `k`.
///         Sizes may go down (a taper). Slots are sized for the largest step; each batch
///         has its own step's shape. With grad_accum_steps, steps are optimizer steps.
///     order: "sequential" (modded-nanogpt's walk) or "shuffled" (each epoch a fresh
///         permutation of every document of every shard, from `seed`; only an epoch's last
///         partial step is dropped).
///     seed: the seed of "shuffled".
///     rank: this process's rank.
///     world_size: how many ranks share each step's documents.
///     dtype: the tokens' element type: "int32" (modded-nanogpt's inputs), "int64",
///         "uint32", or "uint16" (16-bit tokens only).
///     positions: add the `positions` field.
///     index_cache: a folder where each shard's document index is kept across runs (made
///         if missing); an index is used only if made for this very shard (path, size,
///         modification time) and bos, else the shard is scanned again. None: no cache.
///     topology: a `pinring.Topology`, instead of rank and world_size: its data-parallel
///         rank and size (`topo.dp_rank`, `topo.dp_size`).
///     align_to_bos: True: whole documents from their `bos` (above). False:
///         modded-nanogpt's validation walk — contiguous windows, rank `r` the
///         `tokens_per_batch + 1` tokens from `pos + r * tokens_per_batch`, `pos` moving on
///         `world_size * tokens_per_batch` a step, the next shard when `pos + world_size *
///         tokens_per_batch + 1` reaches the shard's end; `cu_seqlens` the positions of `bos`
///         in the inputs, padded with `N` (order="sequential" only).
///     grad_accum_steps: `G`, pops per optimizer step, each of `tokens_per_batch` tokens
///         per rank (modded-nanogpt's `num_tokens // (world_size * G)`). `batch.step` is the
///         optimizer step (what schedule, start_step, skip_steps and states count),
///         `batch.micro_step` its pop `0..G`. A state saved mid-step stands after the whole
///         step.
///     targets_dtype: "int64": `targets` an int64 field of its own; None or "int32": a view
///         of `tokens`.
///     bigram_vocab_size: `V`: adds `bigram_inputs` (int32), modded-nanogpt's hash of the
///         inputs with `M = V - 1`: `out[0] = M`, `out[i] = ((36313 * x[i]) ^ (27191 *
///         prev)) % M`, `prev` = `M` at `i = 1`, `x[i - 1]` after (int32 products wrapping).
///         2 to 2**31.
///     seq_cap: `C`: every `cu_seqlens` segment longer than `C` split from its start into
///         pieces of `C` (the last shorter; the tokens unchanged; the pieces must fit
///         max_docs).
///     format: the files' format, as for `TokenWindows`: "llmc", "megatron", "datatrove",
///         "npy" or "raw".
///     token_type: the files' token type, as for `TokenWindows`: "uint16" or "uint32"
///         (required for format="raw", checked against the files otherwise).
///
/// Raises:
///     SourceError: a file is missing (SourceFileNotFoundError), a directory or not what
///         its format says (its document index too, read when the documents are); a shard
///         holds no `bos` token; files with and without an index of their documents mixed
///         without `bos`; no step fits in a whole epoch. `e.path` names the
///         file.
///     ConfigError: an argument is out of range (`e.argument` names it): tokens_per_batch,
///         max_seq_len or max_docs of 0, a schedule not increasing in step (naming the
///         entry), a bos no shard's tokens can hold (>= 65536 for u16 shards), an unknown
///         order or dtype, a dtype too narrow for the shards; grad_accum_steps or seq_cap
///         below 1, bigram_vocab_size outside 2..2**31, a targets_dtype other than int32 /
///         int64, align_to_bos=False with order="shuffled".
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", extends = PySource, frozen)]
#[derive(Debug)]
pub struct Documents {
    /// The source, without a run.
    docs: source::Documents,
    /// The source's own settings (shards, bos, order, index cache), without the packing
    /// or the ranks: what a `Mixture` of it builds on.
    member: source::DocumentsBuilder,
    /// The packing settings, as given (a mixture takes them from its sources, which must
    /// agree: [`source::Packing::difference`]).
    packing: source::Packing,
    /// The walk and the derived fields, as given (a mixture takes none).
    modes: StepModes,
    /// The shard files, in the order they are walked.
    #[pyo3(get)]
    files: Vec<String>,
    /// Tokens in all shards.
    #[pyo3(get)]
    tokens: u64,
    /// The files' format, as `format` names it.
    format: &'static str,
}

/// What building the source can refuse, in Python's words.
fn build_error(py: Python<'_>, e: pinring::Error, dtype: Dtype) -> PyErr {
    match e {
        pinring::Error::Source(SourceError::File { path, problem })
            if matches!(
                problem.format_problem::<DocumentProblem>(),
                Some(DocumentProblem::BosOutOfRange { .. })
            ) =>
        {
            new_error(
                py,
                Kind::Config,
                format!("bos is out of range for {}: it {problem}", path.display()),
                &[
                    ("argument", obj(py, "bos")),
                    ("path", obj(py, path.to_string_lossy().into_owned())),
                ],
            )
        }
        other => open_error(py, other, dtype),
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl Documents {
    #[new]
    #[pyo3(signature = (paths, *, bos = None, tokens_per_batch, max_seq_len, max_docs = None, schedule = None, order = "sequential", seed = 0, rank = 0, world_size = 1, dtype = "int32", positions = false, index_cache = None, topology = None, align_to_bos = true, grad_accum_steps = 1, targets_dtype = None, bigram_vocab_size = None, seq_cap = None, format = "llmc", token_type = None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        paths: PathsArg<'_>,
        bos: Option<i128>,
        tokens_per_batch: i128,
        max_seq_len: i128,
        #[gen_stub(override_type(type_repr = "int | str | None"))] max_docs: Option<
            &Bound<'_, PyAny>,
        >,
        #[gen_stub(override_type(
            type_repr = "typing.Sequence[tuple[int, int, int]] | None",
            imports = ("typing",)
        ))]
        schedule: Option<&Bound<'_, PyAny>>,
        order: &str,
        seed: i128,
        rank: i128,
        world_size: i128,
        dtype: &str,
        positions: bool,
        index_cache: Option<PathBuf>,
        topology: Option<PyRef<'_, PyTopology>>,
        align_to_bos: bool,
        grad_accum_steps: i128,
        targets_dtype: Option<&str>,
        bigram_vocab_size: Option<i128>,
        seq_cap: Option<i128>,
        format: &str,
        token_type: Option<&str>,
    ) -> PyResult<PyClassInitializer<Self>> {
        let format = FormatArg::parse(py, format, token_type)?;
        let bos = bos
            .map(|b| {
                u32::try_from(b).map_err(|_| {
                    config(
                        py,
                        "bos",
                        format!("bos must be a token id in 0..2**32, got {b}"),
                    )
                })
            })
            .transpose()?;
        let tokens_per_batch = args::at_least_one(py, "tokens_per_batch", tokens_per_batch)?;
        if tokens_per_batch > MAX_TOKENS_PER_BATCH {
            return Err(config(
                py,
                "tokens_per_batch",
                format!(
                    "tokens_per_batch={tokens_per_batch} is over {MAX_TOKENS_PER_BATCH}, the \
                     most a step packs (N + 1 tokens and cu_seqlens are int32)"
                ),
            ));
        }
        let max_seq_len = args::at_least_one(py, "max_seq_len", max_seq_len)?;
        let (max_docs, max_docs_formula) = max_docs_arg(py, max_docs)?;
        let modes = StepModes {
            max_docs_formula: max_docs_formula.then_some(true),
            align_to_bos: (!align_to_bos).then_some(false),
            grad_accum_steps: Some(args::at_least_one(
                py,
                "grad_accum_steps",
                grad_accum_steps,
            )?)
            .filter(|&g| g != 1),
            targets_dtype: targets_dtype_arg(py, targets_dtype)?,
            bigram_vocab_size: bigram_vocab_size
                .map(|v| {
                    u64::try_from(v).map_err(|_| {
                        config(
                            py,
                            "bigram_vocab_size",
                            format!("bigram_vocab_size must be 2 to 2**31, got {v}"),
                        )
                    })
                })
                .transpose()?,
            seq_cap: seq_cap
                .map(|c| args::at_least_one(py, "seq_cap", c))
                .transpose()?,
        };
        let schedule = schedule
            .filter(|s| !s.is_none())
            .map(|s| schedule_arg(py, s))
            .transpose()?
            .unwrap_or_default();
        let seed = args::seed(py, seed)?;
        let order = order_arg(py, order, seed)?;
        let place = placement(py, rank, world_size, topology.as_deref())?;
        let (ty, dtype) = dtype_arg(py, dtype)?;
        let paths = path_list(&paths)?;
        let packing = source::Packing {
            tokens_per_batch,
            max_seq_len,
            max_docs,
            schedule,
            token_type: Some(ty),
            positions: Some(positions),
        };
        let opened = format.open(py, &paths)?;
        let built = py.detach(|| -> pinring::Result<_> {
            let shards = opened?;
            let files = file_names(shards.shards().iter().map(|s| s.path()));
            let tokens = shards.tokens();
            let mut member = source::Documents::builder(shards).order(order);
            if let Some(bos) = bos {
                member = member.bos(bos);
            }
            if let Some(dir) = index_cache {
                member = member.index_cache(dir);
            }
            let docs = member
                .clone()
                .packing(packing.clone())
                .modes(modes.clone())
                .build()?;
            // This rank's share checked now, as the loader will shard it.
            let (rank, world_size) = place;
            Source::with_run(
                &docs,
                &Run {
                    rank,
                    world_size,
                    ..Run::default()
                },
            )?;
            Ok((docs, member, files, tokens))
        });
        let (docs, member, files, tokens) = built.map_err(|e| build_error(py, e, dtype))?;
        let row = Row {
            cols: docs.fields().bytes(),
            dtype: Dtype::U8,
        };
        let given = Given {
            source: AnySource::Documents(docs.clone()),
            row,
            place,
            class: "Documents",
            layout: Some((docs.fields(), docs.schedule().clone())),
        };
        Ok(PySource::new(given, dtype).add_subclass(Documents {
            docs,
            member,
            packing,
            modes,
            files,
            tokens,
            format: format.name,
        }))
    }

    /// Whether the walk packs whole documents from their `bos` (True), or contiguous
    /// windows (False: modded-nanogpt's validation walk).
    #[getter]
    fn align_to_bos(&self) -> bool {
        self.docs.schedule().align_to_bos()
    }

    /// Pops per optimizer step (`G`).
    #[getter]
    fn grad_accum_steps(&self) -> u64 {
        self.docs.schedule().grad_accum_steps()
    }

    /// "int64" when `targets` is an int64 field of its own; None: a view of `tokens`.
    #[getter]
    fn targets_dtype(&self) -> Option<&'static str> {
        self.modes.targets_dtype.map(|_| "int64")
    }

    /// `V` of `bigram_inputs`; None without that field.
    #[getter]
    fn bigram_vocab_size(&self) -> Option<u64> {
        self.modes.bigram_vocab_size
    }

    /// The cap every `cu_seqlens` segment is split at; None: no cap.
    #[getter]
    fn seq_cap(&self) -> Option<u64> {
        self.modes.seq_cap
    }

    /// The token that starts a document; None when the documents come from the files' own
    /// index (format="megatron" or "datatrove" without `bos`).
    #[getter]
    fn bos(&self) -> Option<u32> {
        Some(self.docs.bos()).filter(|&b| b != source::FILE_INDEX_BOS)
    }

    /// The files' format: "llmc", "megatron", "datatrove", "npy" or "raw".
    #[getter]
    fn format(&self) -> &'static str {
        self.format
    }

    /// Tokens of inputs per rank at step 0.
    #[getter]
    fn tokens_per_batch(&self) -> u64 {
        self.docs.schedule().at(0).tokens
    }

    /// Where documents are cut at step 0.
    #[getter]
    fn max_seq_len(&self) -> u64 {
        self.docs.schedule().at(0).max_seq_len
    }

    /// The `max_docs` given; None: modded-nanogpt's rule, step by step.
    #[getter]
    fn max_docs(&self) -> Option<u64> {
        self.docs.schedule().max_docs()
    }

    /// The step sizes over the run: `[(from_step, tokens_per_batch, max_seq_len, max_docs),
    /// ...]`, the first from step 0.
    #[getter]
    fn schedule(&self) -> Vec<(u64, u64, u64, u64)> {
        self.docs
            .schedule()
            .entries()
            .iter()
            .map(|&(from, s)| (from, s.tokens, s.max_seq_len, s.max_docs))
            .collect()
    }

    /// `(tokens_per_batch, max_seq_len, max_docs)` of step `step`.
    ///
    /// Args:
    ///     step: a step number, from 0.
    fn sizes_at(&self, step: u64) -> (u64, u64, u64) {
        let s = self.docs.schedule().at(step);
        (s.tokens, s.max_seq_len, s.max_docs)
    }

    /// "sequential" or "shuffled".
    #[getter]
    fn order(&self) -> &'static str {
        self.docs.order().name()
    }

    /// The seed of "shuffled" (0 for "sequential").
    #[getter]
    fn seed(&self) -> u64 {
        self.docs.order().seed()
    }

    /// Whether batches carry `positions`.
    #[getter]
    fn positions(&self) -> bool {
        self.packing.positions.unwrap_or(false)
    }

    /// The names of a batch's fields, in layout order.
    #[getter]
    fn fields(&self) -> Vec<String> {
        self.docs.fields().iter().map(|f| f.name.clone()).collect()
    }

    /// Documents in all shards, when counted up front (order="shuffled" indexes every
    /// shard here); None with order="sequential".
    #[getter]
    fn documents(&self) -> Option<u64> {
        self.docs.documents()
    }

    /// How the shards were indexed so far, as a dict of counts: `shards`, `indexed`, and of
    /// those `at_start` (before any step), `ahead` (by the thread ahead of the walk),
    /// `on_walk` (by the walk itself: a step waited; 0 in a healthy run) and `from_cache`.
    #[gen_stub(override_return_type(type_repr = "dict[str, int]"))]
    fn index_stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self.docs.index_stats();
        [
            ("shards", s.shards),
            ("indexed", s.indexed),
            ("at_start", s.at_start),
            ("ahead", s.ahead),
            ("on_walk", s.on_walk),
            ("from_cache", s.from_cache),
        ]
        .into_py_dict(py)
    }

    fn __repr__(slf: PyRef<'_, Self>) -> String {
        let s = slf.docs.schedule().at(0);
        let source = slf.as_super();
        format!(
            "Documents({} file(s), {} tokens, bos={}, tokens_per_batch={}, max_seq_len={}, \
             {} schedule change(s), dtype='{}', order='{}', {})",
            slf.files.len(),
            slf.tokens,
            match slf.bos() {
                Some(b) => b.to_string(),
                None => "None".to_owned(),
            },
            s.tokens,
            s.max_seq_len,
            slf.docs.schedule().entries().len() - 1,
            source.dtype.name(),
            slf.docs.order().name(),
            source.place()
        )
    }
}

impl Documents {
    /// The walk and derived fields given, if any is (a mixture refuses them).
    pub(crate) fn modes_given(&self) -> Option<&'static str> {
        self.modes.first_given().map(|name| match name {
            "max_docs_formula" => "max_docs=\"formula\"",
            other => other,
        })
    }

    /// What a mixture of this source builds on: its own settings (no packing, no ranks)
    /// and its packing settings.
    pub(crate) fn member(&self) -> (source::DocumentsBuilder, source::Packing) {
        (self.member.clone(), self.packing.clone())
    }
}
