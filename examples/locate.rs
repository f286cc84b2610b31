//! Traces one step of a run to its data: prints, for one rank, every row of that step's
//! batch — its source, file, offset and length (in tokens, or records) — from the run's
//! settings or a saved state, without running the pipeline or reading any sample.
//!
//! ```text
//! # A run of token windows (seq_len 1024, shuffled with seed 1337) on 8 ranks, batches of 64:
//! cargo run --release --example locate -- --step 41000 --rank 3 --world-size 8 \
//!     --batch-size 64 --shards 'data/fineweb_train_*.bin' --seq-len 1024 \
//!     --order shuffled --seed 1337
//! # A mixture of three sources (one --shards each, in source order):
//! cargo run --release --example locate -- --step 41000 --rank 3 --world-size 8 \
//!     --batch-size 64 --shards 'web/*.bin' --shards 'code/*.bin' --shards 'math/*.bin' \
//!     --seq-len 1024 --order shuffled --seed 1,2,3 --weights 0.7,0.2,0.1 --mix-seed 0
//! # From a saved state (a Checkpoint or MixtureState as JSON, e.g. `state.to_text()`):
//! # its settings come from the state; the world size and batch size default to its own.
//! cargo run --release --example locate -- --step 41000 --rank 3 --state state.json \
//!     --shards 'web/*.bin' --shards 'code/*.bin' --shards 'math/*.bin'
//! # Packed documents (--tokens-per-batch: tokens per batch of each rank), one source or a mixture;
//! # each row is a document's piece, its offset the document's bos token in its shard:
//! cargo run --release --example locate -- --step 41000 --rank 3 --world-size 8 \
//!     --tokens-per-batch 49152 --max-seq-len 2048 --shards 'data/fineweb_train_*.bin'
//! cargo run --release --example locate -- --step 41000 --rank 3 --world-size 8 \
//!     --tokens-per-batch 49152 --max-seq-len 2048 --shards 'web/*.bin' --shards 'code/*.bin' \
//!     --weights 0.7,0.3 --order shuffled --seed 1,2
//! # From a saved state of packed documents (a DocumentsCheckpoint or a mixture's state):
//! cargo run --release --example locate -- --step 41000 --rank 3 --state docs_state.json \
//!     --shards 'web/*.bin' --shards 'code/*.bin'
//! ```
//!
//! A state traces the steps from its own on (the run resumed from it); a step before it
//! is traced from the settings of the run that made it. Every argument is checked first;
//! a step the run never reaches (a stop rule ended it) is an error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use pinring::source::{
    Checkpoint, DocOrder, Documents, DocumentsBuilder, DocumentsCheckpoint, FixedRecords,
    Identified, Mixture, MixtureState, Order, Piece, Sampler, Segmented, Stop, TokenShards,
};
use pinring::Location;
use pinring_examples::args::Schedule;
use pinring_examples::say;

/// Prints every row of one step's batch on one rank — source, file, offset, length — from
/// a run's settings or a saved state, without running anything.
#[derive(Debug, Parser)]
#[command(name = "locate", version)]
struct Args {
    /// The step to trace (the rank's batch number in the run, from 0).
    #[arg(long)]
    step: u64,
    /// The rank whose batch to print.
    #[arg(long, default_value_t = 0)]
    rank: u64,
    /// Ranks of the run [default: the state's, else 1].
    #[arg(long)]
    world_size: Option<u64>,
    /// Samples per batch of each rank [default: the state's; required without one] (not
    /// for packed documents: a batch is a step).
    #[arg(long)]
    batch_size: Option<u64>,
    /// The files of one source (a path or a pattern such as 'data/train_*.bin'); give it
    /// once per source, in the order the run's sources were given.
    #[arg(long = "shards", value_name = "PATTERN", required = true)]
    shards: Vec<PathBuf>,
    /// A saved state (JSON): a sampler's Checkpoint or a MixtureState, or of packed
    /// documents a DocumentsCheckpoint or a mixture's state. Its settings replace
    /// --seq-len, --record-bytes, --tokens-per-batch, --max-seq-len, --max-docs, --schedule, --bos,
    /// --order, --seed, --weights, --mix-seed and --stop.
    #[arg(long, value_name = "FILE")]
    state: Option<PathBuf>,
    /// Token windows of SEQ_LEN + 1 tokens at a stride of SEQ_LEN (token shards).
    #[arg(long)]
    seq_len: Option<u64>,
    /// Files of fixed-size records of this many bytes, instead of token shards.
    #[arg(long)]
    record_bytes: Option<usize>,
    /// Records per sample, with --record-bytes.
    #[arg(long, default_value_t = 1)]
    records: u64,
    /// Packed documents (instead of windows): tokens of inputs per rank per step.
    #[arg(long, value_name = "N")]
    tokens_per_batch: Option<u64>,
    /// Packed documents: where documents are cut [default: --tokens-per-batch].
    #[arg(long, value_name = "L")]
    max_seq_len: Option<u64>,
    /// Packed documents: the length of cu_seqlens [default: modded-nanogpt's rule].
    #[arg(long, value_name = "D")]
    max_docs: Option<u64>,
    /// Packed documents: step sizes that change, FROM:N:L entries, comma separated.
    #[arg(long, value_name = "FROM:N:L,...", value_parser = schedule_or_none, default_value = "")]
    schedule: Schedule,
    /// Packed documents: the token that starts a document [default: 50256 for u16
    /// shards, 128000 for u32].
    #[arg(long, value_name = "ID")]
    bos: Option<u32>,
    /// Each source's order.
    #[arg(long, default_value = "sequential", value_parser = ["sequential", "shuffled", "random"])]
    order: String,
    /// Each source's seed: one for every source, or one per source (comma-separated).
    #[arg(long, value_delimiter = ',', default_value = "0")]
    seed: Vec<u64>,
    /// A mixture's weights, one per source (comma-separated) [default: equal].
    #[arg(long, value_delimiter = ',')]
    weights: Vec<f64>,
    /// The mixture's seed.
    #[arg(long, default_value_t = 0)]
    mix_seed: u64,
    /// The mixture's stop rule.
    #[arg(long, default_value = "never", value_parser = ["never", "first", "all"])]
    stop: String,
    /// Steps the run skipped, as START..END (half-open; repeat for several).
    #[arg(long, value_name = "START..END", value_parser = step_range)]
    skip: Vec<(u64, u64)>,
}

/// `--schedule`, empty (its default) for none.
fn schedule_or_none(s: &str) -> Result<Schedule, String> {
    if s.is_empty() {
        return Ok(Schedule::default());
    }
    pinring_examples::args::schedule(s)
}

fn step_range(s: &str) -> Result<(u64, u64), String> {
    let (a, b) = s
        .split_once("..")
        .ok_or_else(|| format!("`{s}` is not a range START..END"))?;
    let num = |x: &str| {
        x.trim()
            .parse::<u64>()
            .map_err(|e| format!("`{x}` in `{s}`: {e}"))
    };
    Ok((num(a)?, num(b)?))
}

/// A saved state of any kind.
enum Saved {
    Sampler(Checkpoint),
    Mixture(MixtureState),
    Documents(DocumentsCheckpoint),
    DocumentMixture(MixtureState<DocumentsCheckpoint>),
}

fn read_state(path: &PathBuf) -> Result<Saved, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the state {}: {e}", path.display()))?;
    let mixture = match MixtureState::from_text(&text) {
        Ok(state) => return Ok(Saved::Mixture(state)),
        Err(e) => e,
    };
    let document_mixture = match MixtureState::<DocumentsCheckpoint>::from_text(&text) {
        Ok(state) => return Ok(Saved::DocumentMixture(state)),
        Err(e) => e,
    };
    let documents = match DocumentsCheckpoint::from_text(&text) {
        Ok(state) => return Ok(Saved::Documents(state)),
        Err(e) => e,
    };
    let sampler = match Checkpoint::from_text(&text) {
        Ok(state) => return Ok(Saved::Sampler(state)),
        Err(e) => e,
    };
    // The kind its keys say it is (a mixture's has `sources`, packed documents' a `bos`):
    // that kind's error says what is wrong (an old version, a key missing).
    let e = match (text.contains("\"sources\""), text.contains("\"bos\"")) {
        (true, true) => document_mixture,
        (true, false) => mixture,
        (false, true) => documents,
        (false, false) => sampler,
    };
    Err(format!(
        "{} is neither a sampler's checkpoint, a mixture's state nor a state of packed \
         documents: {e}",
        path.display()
    ))
}

/// One source's sampler settings.
#[derive(Debug, Clone, Copy)]
struct SourceSettings {
    window: u64,
    stride: Option<u64>,
    order: Order,
    record_bytes: Option<usize>,
}

impl SourceSettings {
    fn of(c: &Checkpoint) -> Result<Self, String> {
        Ok(SourceSettings {
            window: c.window,
            stride: Some(c.stride),
            order: c.order().map_err(|e| e.to_string())?,
            record_bytes: (c.dataset.format == "records")
                .then(|| usize::try_from(c.dataset.record_bytes).unwrap_or(usize::MAX)),
        })
    }
}

/// What one row says.
struct Row {
    id: u64,
    at: Location,
}

pub(crate) fn main() -> ExitCode {
    let args = Args::parse();
    match locate(&args) {
        Ok((rows, unit)) => {
            say!(
                "step {} of rank {}: {} rows (offset and length in {unit})",
                args.step,
                args.rank,
                rows.len()
            );
            say!(
                "{:>5}  {:>6}  {:>12}  {:>8}  {:>12}  file",
                "row",
                "source",
                "offset",
                "length",
                "id"
            );
            for (i, row) in rows.iter().enumerate() {
                say!(
                    "{i:>5}  {:>6}  {:>12}  {:>8}  {:>12}  {}",
                    row.at.source,
                    row.at.offset,
                    row.at.len,
                    row.id,
                    row.at.path.display()
                );
            }
            ExitCode::SUCCESS
        }
        Err(why) => {
            eprintln!("error: {why}");
            ExitCode::FAILURE
        }
    }
}

/// The rows of the step, and the unit of their offsets.
fn locate(args: &Args) -> Result<(Vec<Row>, &'static str), String> {
    let saved = args.state.as_ref().map(read_state).transpose()?;
    let documents = matches!(saved, Some(Saved::Documents(_) | Saved::DocumentMixture(_)))
        || (saved.is_none() && args.tokens_per_batch.is_some());
    if documents {
        return Ok((document_rows(args, saved.as_ref())?, "tokens"));
    }
    let sources = args.shards.len();
    // Each source's settings, from the state or the arguments.
    let settings: Vec<SourceSettings> = match &saved {
        Some(Saved::Sampler(c)) => vec![SourceSettings::of(c)?],
        Some(Saved::Mixture(m)) => m
            .sources
            .iter()
            .map(SourceSettings::of)
            .collect::<Result<_, _>>()?,
        Some(Saved::Documents(_) | Saved::DocumentMixture(_)) | None => {
            let seeds = seeds(args, sources)?;
            let (window, stride, record_bytes) = match (args.seq_len, args.record_bytes) {
                (Some(t), None) if t > 0 => (t + 1, Some(t), None),
                (None, Some(r)) => (args.records, None, Some(r)),
                (Some(0), None) => return Err("--seq-len must be at least 1".into()),
                _ => {
                    return Err(
                        "give --seq-len (token shards) or --record-bytes (records), or --state"
                            .into(),
                    )
                }
            };
            seeds
                .iter()
                .map(|&seed| SourceSettings {
                    window,
                    stride,
                    order: Order::from_name(&args.order, seed).unwrap_or_default(),
                    record_bytes,
                })
                .collect()
        }
    };
    sources_given(settings.len(), sources)?;
    let (world, batch) = match &saved {
        Some(Saved::Sampler(c)) => (c.world_size, c.batch_size),
        Some(Saved::Mixture(m)) => (m.world_size, m.batch_size),
        _ => (1, 0),
    };
    let world = args.world_size.unwrap_or(world);
    let batch = args
        .batch_size
        .or((batch > 0).then_some(batch))
        .ok_or("give --batch-size (steps are batches), or a --state saved with one")?;
    if settings[0].record_bytes.is_some() {
        let samplers = settings
            .iter()
            .zip(&args.shards)
            .map(|(s, files)| {
                let records = FixedRecords::glob(files, s.record_bytes.unwrap_or(1))
                    .map_err(|e| e.to_string())?;
                sampler(Sampler::builder(records).window(s.window), s)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((
            rows(args, samplers, saved.as_ref(), world, batch)?,
            "records",
        ))
    } else {
        let samplers = settings
            .iter()
            .zip(&args.shards)
            .map(|(s, files)| {
                let shards = TokenShards::glob(files).map_err(|e| e.to_string())?;
                sampler(shards.windows(s.window), s)
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((
            rows(args, samplers, saved.as_ref(), world, batch)?,
            "tokens",
        ))
    }
}

/// `--rank` of `world` ranks, from `--step`, skipping `--skip`: on the builder of a
/// sampler, a mixture or packed documents (each has these settings by these names).
macro_rules! on_rank_from_step {
    ($builder:expr, $args:expr, $world:expr) => {
        $builder
            .shard($args.rank, $world)
            .start_step($args.step)
            .skip_steps($args.skip.iter().copied())
    };
}

/// A source's sampler, alone (world size 1, no batch size).
fn sampler<S: Segmented>(
    builder: pinring::source::SamplerBuilder<S>,
    s: &SourceSettings,
) -> Result<Sampler<S>, String> {
    let builder = builder.order(s.order);
    let builder = match s.stride {
        Some(stride) => builder.stride(stride),
        None => builder,
    };
    builder.build().map_err(|e| e.to_string())
}

/// The step's rows on the rank: of one sampler, or of the mixture of several.
fn rows<S>(
    args: &Args,
    samplers: Vec<Sampler<S>>,
    saved: Option<&Saved>,
    world: u64,
    batch: u64,
) -> Result<Vec<Row>, String>
where
    S: Segmented + Clone,
    S::Window: Identified,
{
    let fail = |e: pinring::Error| e.to_string();
    let mixed =
        samplers.len() > 1 || !args.weights.is_empty() || matches!(saved, Some(Saved::Mixture(_)));
    let stepped: Vec<(Option<u64>, Row)> = if mixed {
        let (weights, seed, stop) = match saved {
            Some(Saved::Mixture(m)) => (m.current_weights().to_vec(), m.seed, m.stop),
            _ => mixing(args, samplers.len()),
        };
        let mix = Mixture::builder(samplers)
            .weights(weights)
            .seed(seed)
            .stop(stop)
            .batch_size(batch);
        let mix = on_rank_from_step!(mix, args, world).build().map_err(fail)?;
        let run = match saved {
            Some(Saved::Mixture(state)) => mix
                .iter_from(at_or_after(args, state, state.step)?)
                .map_err(fail)?,
            _ => mix.iter(),
        };
        run.take(batch as usize)
            .map(|s| {
                let (source, id) = (s.source(), s.item().id());
                let at = mix.location(source, id).expect("the mixture's own sample");
                (s.step(), Row { id, at })
            })
            .collect()
    } else {
        let one = samplers.into_iter().next().expect("one --shards at least");
        let s = one.to_builder().batch_size(batch);
        let s = on_rank_from_step!(s, args, world).build().map_err(fail)?;
        let run = match saved {
            Some(Saved::Sampler(state)) => s
                .iter_from_checkpoint(at_or_after(args, state, state.step)?)
                .map_err(fail)?,
            _ => s.iter(),
        };
        run.take(batch as usize)
            .map(|w| {
                let at = s.location(w.id(), 0).expect("the sampler's own window");
                (w.step(), Row { id: w.id(), at })
            })
            .collect()
    };
    let rows: Vec<Row> = stepped
        .into_iter()
        .take_while(|(step, _)| *step == Some(args.step))
        .map(|(_, row)| row)
        .collect();
    if rows.is_empty() {
        return Err(no_step(args));
    }
    Ok(rows)
}

/// The packing settings of a run of packed documents: base sizes, schedule changes,
/// max_docs.
struct Packing {
    tokens: u64,
    max_seq_len: u64,
    schedule: Vec<(u64, u64, u64)>,
    max_docs: Option<u64>,
}

impl Packing {
    /// From a saved checkpoint (its schedule starts at step 0).
    fn of(c: &DocumentsCheckpoint) -> Self {
        let (tokens, max_seq_len) = c.schedule.first().map_or((0, 0), |&(_, n, l)| (n, l));
        Packing {
            tokens,
            max_seq_len,
            schedule: c.schedule.get(1..).unwrap_or_default().to_vec(),
            max_docs: (c.max_docs > 0).then_some(c.max_docs),
        }
    }
}

/// `packing` on the builder of packed documents or of a mixture of them, with
/// [`on_rank_from_step!`] (each has these settings by these names).
macro_rules! packed_on_rank {
    ($builder:expr, $packing:expr, $args:expr, $world:expr) => {{
        let packing: Packing = $packing;
        let builder = $builder
            .tokens_per_batch(packing.tokens)
            .max_seq_len(packing.max_seq_len)
            .schedule(packing.schedule);
        let builder = on_rank_from_step!(builder, $args, $world);
        match packing.max_docs {
            Some(d) => builder.max_docs(d),
            None => builder,
        }
    }};
}

/// One source's builder: its shards, bos and order.
fn document_source(
    files: &PathBuf,
    bos: Option<u32>,
    order: DocOrder,
) -> Result<DocumentsBuilder, String> {
    let shards = TokenShards::glob(files).map_err(|e| e.to_string())?;
    let source = Documents::builder(shards).order(order);
    Ok(match bos {
        Some(bos) => source.bos(bos),
        None => source,
    })
}

/// The rows of the step on the rank, of a source of packed documents or a mixture of
/// them: each piece, its length as the batch's row gives it (the last one less 1).
fn document_rows(args: &Args, saved: Option<&Saved>) -> Result<Vec<Row>, String> {
    let fail = |e: pinring::Error| e.to_string();
    let sources = args.shards.len();
    // Each source's bos and order, and the packing, from the state or the arguments.
    let (bos_order, packing): (Vec<(Option<u32>, DocOrder)>, Packing) = match saved {
        Some(Saved::Documents(c)) => (
            vec![(Some(c.bos), c.order().map_err(fail)?)],
            Packing::of(c),
        ),
        Some(Saved::DocumentMixture(m)) => (
            m.sources
                .iter()
                .map(|c| Ok((Some(c.bos), c.order().map_err(fail)?)))
                .collect::<Result<_, String>>()?,
            Packing::of(m.sources.first().ok_or("the state has no source")?),
        ),
        _ => {
            let seeds = seeds(args, sources)?;
            let tokens = args.tokens_per_batch.unwrap_or(0);
            let order = |seed| match args.order.as_str() {
                "shuffled" => Ok(DocOrder::Shuffled { seed }),
                "sequential" => Ok(DocOrder::Sequential),
                other => Err(format!(
                    "packed documents are sequential or shuffled, not {other}"
                )),
            };
            (
                seeds
                    .iter()
                    .map(|&seed| Ok((args.bos, order(seed)?)))
                    .collect::<Result<_, String>>()?,
                Packing {
                    tokens,
                    max_seq_len: args.max_seq_len.unwrap_or(tokens),
                    schedule: args.schedule.0.clone(),
                    max_docs: args.max_docs,
                },
            )
        }
    };
    sources_given(bos_order.len(), sources)?;
    let world = args.world_size.unwrap_or(match saved {
        Some(Saved::Documents(c)) => c.world_size,
        Some(Saved::DocumentMixture(m)) => m.world_size,
        _ => 1,
    });
    let builders = bos_order
        .iter()
        .zip(&args.shards)
        .map(|(&(bos, order), files)| document_source(files, bos, order))
        .collect::<Result<Vec<_>, _>>()?;
    let mixed =
        sources > 1 || !args.weights.is_empty() || matches!(saved, Some(Saved::DocumentMixture(_)));
    let none = || no_step(args);
    // A row per piece, as the batch's rows are: the last piece's row is one token shorter
    // (the step's last token is a target only).
    let row = |source: u16, piece: Piece, at: Option<Location>| {
        at.map(|at| Row { id: piece.doc, at }).ok_or_else(|| {
            format!(
                "document {} of source {source} is not in its shards",
                piece.doc
            )
        })
    };
    let rows: Vec<Row> = if mixed {
        let (weights, seed, stop) = match saved {
            Some(Saved::DocumentMixture(m)) => (m.current_weights().to_vec(), m.seed, m.stop),
            _ => mixing(args, sources),
        };
        let mix = Mixture::documents(builders)
            .weights(weights)
            .seed(seed)
            .stop(stop);
        let mix = packed_on_rank!(mix, packing, args, world)
            .build()
            .map_err(fail)?;
        let mut run = match saved {
            Some(Saved::DocumentMixture(state)) => mix
                .iter_from(at_or_after(args, state, state.step)?)
                .map_err(fail)?,
            _ => mix.iter(),
        };
        let step = run
            .next()
            .filter(|s| s.step() == args.step)
            .ok_or_else(none)?;
        if let Some(e) = step.error() {
            return Err(e.to_string());
        }
        let n = step.pieces().len();
        step.pieces()
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let len = p.piece.len - u64::from(i + 1 == n);
                row(p.source, p.piece, mix.location(p.source, p.piece.doc, len))
            })
            .collect::<Result<_, _>>()?
    } else {
        let docs = builders.into_iter().next().ok_or("give --shards")?;
        let docs = packed_on_rank!(docs, packing, args, world)
            .build()
            .map_err(fail)?;
        // The run from the state (which skips the state's skipped steps too) or from the
        // start, walked to the step over the index.
        let mut run = match saved {
            Some(Saved::Documents(state)) => docs
                .iter_from(at_or_after(args, state, state.step)?)
                .map_err(fail)?,
            _ => docs.iter(),
        };
        let step = run.next().ok_or_else(none)?;
        if let Some(e) = step.error() {
            return Err(e.to_string());
        }
        if step.step() != args.step {
            return Err(none());
        }
        let n = step.piece_count() as usize;
        step.pieces()
            .enumerate()
            .map(|(i, p)| row(0, p, docs.location(p.doc, p.len - u64::from(i + 1 == n))))
            .collect::<Result<_, _>>()?
    };
    Ok(rows)
}

/// Each source's seed: `--seed` gives one for every source, or one per source.
fn seeds(args: &Args, sources: usize) -> Result<Vec<u64>, String> {
    match args.seed.len() {
        1 => Ok(vec![args.seed[0]; sources]),
        n if n == sources => Ok(args.seed.clone()),
        n => Err(format!(
            "{n} seeds for {sources} sources: give one, or one per source"
        )),
    }
}

/// A mixture of `sources`' weights (equal by default), seed and stop rule, from the
/// arguments.
fn mixing(args: &Args, sources: usize) -> (Vec<f64>, u64, Stop) {
    let weights = if args.weights.is_empty() {
        vec![1.0; sources]
    } else {
        args.weights.clone()
    };
    (
        weights,
        args.mix_seed,
        Stop::from_name(&args.stop).unwrap_or_default(),
    )
}

/// `state` sources (the state's, or the arguments') against `given` `--shards`: one each.
fn sources_given(state: usize, given: usize) -> Result<(), String> {
    if state != given {
        return Err(format!(
            "the state has {state} source(s), but --shards was given {given} time(s): give each source's files"
        ));
    }
    Ok(())
}

/// The error for a step the run does not reach on the rank.
fn no_step(args: &Args) -> String {
    format!(
        "the run has no step {} on rank {} (it is skipped, or the run ends before it)",
        args.step, args.rank
    )
}

/// The saved `state` (at step `saved`), once `--step` is checked not to be before it.
fn at_or_after<'a, T>(args: &Args, state: &'a T, saved: u64) -> Result<&'a T, String> {
    let step = args.step;
    if step < saved {
        Err(format!(
            "step {step} is before the state's step {saved}: a state traces the steps from its \
             own on; trace earlier ones from the run's settings"
        ))
    } else {
        Ok(state)
    }
}
