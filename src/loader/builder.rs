//! [`LoaderBuilder`]: a loader's run (batch size, rank, world size, epochs, start step,
//! skipped steps, a state to resume from) and its pipeline's settings, checked by
//! [`build`](LoaderBuilder::build) against the source.

use std::time::Duration;

use super::Loader;
use crate::backend::contract::Backend;
use crate::backend::cpu::Cpu;
#[cfg(feature = "cuda")]
use crate::backend::cuda::{backend::Cuda, options::CudaOptions};
use crate::config::{Config, ConfigBuilder, LastBatch};
use crate::error::{ConfigError, Result};
use crate::source::{IntoSource, Run, Source, State, StepRanges};
use crate::topology::Topology;

/// Builds a [`Loader`]: [`Loader::builder`]`(source)`, the run's settings, the pipeline's,
/// then [`build`](Self::build).
///
/// The run belongs to the loader: a source built with a rank, world size, batch size,
/// start step or skipped steps of its own is refused ([`ConfigError::Run`] naming the
/// setting), so that each is stated once.
#[must_use]
#[derive(Debug)]
pub struct LoaderBuilder<S: Source, B: Backend = Cpu> {
    source: Result<S>,
    run: Run,
    /// `drop_last` as given (packed documents refuse `true`).
    drop_last: Option<bool>,
    epochs: Option<u64>,
    resume: Option<State>,
    config: ConfigBuilder<B>,
}

/// Declares builder methods that hand a pipeline setting to the config builder.
macro_rules! pipeline_settings {
    ($(
        $(#[$attr:meta])*
        $name:ident($arg:ident: $ty:ty);
    )*) => {
        $(
            $(#[$attr])*
            pub fn $name(mut self, $arg: $ty) -> Self {
                self.config = self.config.$name($arg);
                self
            }
        )*
    };
}

impl<S: Source> LoaderBuilder<S, Cpu> {
    pub(super) fn new(source: Result<S>) -> Self {
        LoaderBuilder {
            source,
            run: Run::default(),
            drop_last: None,
            epochs: None,
            resume: None,
            config: Config::builder(),
        }
    }
}

impl<S: Source, B: Backend> LoaderBuilder<S, B> {
    /// Samples a batch (required for token windows, records and their mixtures; refused
    /// for packed documents, whose batch is one step of `tokens_per_batch` tokens).
    pub fn batch_size(mut self, samples: u64) -> Self {
        self.run.batch_size = Some(samples);
        self
    }

    /// This process's data-parallel rank (default 0), below the world size.
    pub fn rank(mut self, rank: u64) -> Self {
        self.run.rank = rank;
        self
    }

    /// How many data-parallel ranks share the run (default 1).
    pub fn world_size(mut self, world_size: u64) -> Self {
        self.run.world_size = world_size;
        self
    }

    /// The data-parallel rank and world size of `topology` ([`Topology::dp_rank`],
    /// [`Topology::dp_size`]): ranks of one model-parallel group get the same batches.
    /// With several local ranks, the pipeline takes its node's share
    /// ([`ConfigBuilder::node_share`]`(local_world_size)`): the decode threads and host
    /// budget not given default to the cores and the default budget split among them.
    pub fn topology(mut self, topology: &Topology) -> Self {
        self.run.rank = topology.dp_rank();
        self.run.world_size = topology.dp_size();
        let local = usize::try_from(topology.local_world_size()).unwrap_or(usize::MAX);
        self.config = self.config.node_share(local);
        self
    }

    /// Deliver `epochs` epochs, counted from epoch 0 also when resumed (default: no cap).
    /// A mixture has no epochs of its own (refused: end it with its stop rule).
    pub fn epochs(mut self, epochs: u64) -> Self {
        self.epochs = Some(epochs);
        self
    }

    /// Drop each epoch's short last batch (default `true`: every batch full, the same
    /// count on every rank); `false` delivers it. Packed documents have no short batch
    /// (`true` is refused).
    pub fn drop_last(mut self, on: bool) -> Self {
        self.drop_last = Some(on);
        self
    }

    /// Begin at step `k`: exactly where an uninterrupted run stands at step `k`, nothing
    /// before it read or decoded. A state resumed from that stands before it begins there
    /// too.
    pub fn start_step(mut self, k: u64) -> Self {
        self.run.start_step = k;
        self
    }

    /// Leave out these steps: a half-open range (`10..20`) or several (`[10..20, 40..45]`);
    /// the other batches keep their step numbers, and the state records the ranges so
    /// that a resume keeps skipping them. Calls add up.
    pub fn skip_steps(mut self, ranges: impl StepRanges) -> Self {
        self.run.skip_steps.extend(ranges.ranges());
        self
    }

    /// Continue from `state` (of any rank of a run at any world size; merge several with
    /// [`State::merge`]).
    pub fn resume(mut self, state: &State) -> Self {
        self.resume = Some(state.clone());
        self
    }

    pipeline_settings! {
        /// Host slots: batches decode may run ahead in pinned host memory (default 4).
        host_slots(n: usize);
        /// Device slots: batches the consumer may hold at once (default 2).
        device_slots(n: usize);
        /// The decode pool's threads (default: one per core this process may use, over the
        /// node share's local ranks).
        decode_threads(n: usize);
        /// One of `local_ranks` processes on the node: the defaults split its cores and the
        /// host budget ([`ConfigBuilder::node_share`]; [`topology`](Self::topology) sets it).
        node_share(local_ranks: usize);
        /// Pins the copy thread to this core.
        copy_core(core: usize);
        /// Pins the decode threads to these cores.
        decode_cores(cores: Vec<usize>);
        /// How long a waiting stage spins before it parks (default 30 µs).
        spin(spin: Duration);
        /// Backs the host ring with huge pages where the system has them.
        huge_pages(on: bool);
        /// How long `pop` waits by default (default: no limit).
        pop_timeout(timeout: Duration);
        /// How long `pop` waits while every device slot is leased (default 30 s).
        lease_timeout(timeout: Duration);
        /// How long dropping the loader waits for its threads (default 5 s).
        shutdown_timeout(timeout: Duration);
        /// The most bytes the pinned host ring may take (default 16 GiB, over the node
        /// share's local ranks).
        host_budget(bytes: usize);
        /// The most bytes the device slots may take.
        device_budget(bytes: usize);
        /// Records a timeline of this many spans ([`Loader::write_trace`]).
        trace(spans: usize);
        /// Fills a released device slot with a poison pattern (a debug mode).
        poison_released(on: bool);
        /// Whether the pipeline's threads run as `SCHED_BATCH` (default on:
        /// [`ConfigBuilder::batch_scheduling`]).
        batch_scheduling(on: bool);
        /// Fields whose host bytes each batch keeps from pop until release
        /// ([`ConfigBuilder::host_fields`]).
        host_fields(names: Vec<String>);
        /// The stream the consumer's steps run on, declared once (see
        /// [`ConfigBuilder::consumer_stream`]).
        consumer_stream(stream: B::Stream);
    }

    /// The pipeline on another backend, with its options.
    pub fn backend<B2: Backend>(self, options: B2::Options) -> LoaderBuilder<S, B2> {
        LoaderBuilder {
            source: self.source,
            run: self.run,
            drop_last: self.drop_last,
            epochs: self.epochs,
            resume: self.resume,
            config: self.config.backend::<B2>(options),
        }
    }

    /// The pipeline on a CUDA device (see [`CudaOptions`]).
    #[cfg(feature = "cuda")]
    pub fn cuda(self, options: CudaOptions) -> LoaderBuilder<S, Cuda> {
        self.backend::<Cuda>(options)
    }

    /// Checks the run against the source, sets the source up for it and starts the
    /// pipeline.
    ///
    /// Errors ([`ConfigError::Run`], naming the setting): a source that set part of the
    /// run itself; no batch size for windows or records, or one for packed documents;
    /// `drop_last(true)` for packed documents; `epochs` of 0, or for a mixture; a start
    /// step past the end of a run capped by `epochs`. Then the source's own checks of the
    /// run (a rank not below the world size, ...), of `resume`'s state (a state of another
    /// run is a mismatch naming what differs), and the pipeline's.
    pub fn build(self) -> Result<Loader<S, B>> {
        let source = self.source?;
        if let Some(name) = source.own_run().first_set() {
            return Err(run_error(
                name,
                format!(
                    "set on the source: a Loader owns its run, so build the source without \
                     it and set it on the loader (Loader::builder(source).{name}(..))"
                ),
            ));
        }
        let mut run = self.run;
        if source.packs_steps() {
            if let Some(n) = run.batch_size {
                return Err(run_error(
                    "batch_size",
                    format!(
                        "batch_size {n}: a batch of packed documents is one step of this rank, \
                         of the source's tokens_per_batch tokens (set the step's size, or its \
                         schedule, on the source)"
                    ),
                ));
            }
            if self.drop_last == Some(true) {
                return Err(run_error(
                    "drop_last",
                    "packed documents have no short batch to drop: every step holds \
                     tokens_per_batch + 1 tokens, and the walk drops partial steps itself"
                        .to_owned(),
                ));
            }
        } else if run.batch_size.is_none() {
            return Err(run_error(
                "batch_size",
                "the loader needs a batch size for windows or records: \
                 Loader::builder(source).batch_size(n)"
                    .to_owned(),
            ));
        }
        run.drop_last = self.drop_last.unwrap_or(true);
        run.epochs = self.epochs;
        match self.epochs {
            Some(0) => return Err(ConfigError::Zero("epochs").into()),
            Some(e) if !source.has_epochs() => {
                return Err(run_error(
                    "epochs",
                    format!(
                        "epochs {e}: a mixture has no epochs of its own (each source walks \
                         its own): end its run with its stop rule, or stop popping"
                    ),
                ))
            }
            _ => {}
        }
        let source = source.with_run(&run)?;
        if let Some(state) = &self.resume {
            source.check(state)?;
        }
        check_start(&source, &run, self.epochs, self.resume.as_ref())?;
        let last_batch = if run.drop_last && !source.packs_steps() {
            LastBatch::Drop
        } else {
            LastBatch::Partial
        };
        let config = self
            .config
            .layout_of(source.config())
            .last_batch(last_batch)
            .build()?;
        Loader::assembled(source, run, self.epochs, config, self.resume)
    }
}

fn run_error(field: &'static str, why: String) -> crate::error::Error {
    ConfigError::Run { field, why }.into()
}

/// A start step at or past the end of a run that ends — capped by `epochs`, or a
/// mixture's stop rule — delivers nothing: refused, saying how many steps the run has.
/// Token windows and records: arithmetic. Packed documents and mixtures: walked to (about
/// a microsecond a step, nothing read); a walk stops at the run's end, where one more step
/// does not move it on.
fn check_start<S: Source>(
    source: &S,
    run: &Run,
    epochs: Option<u64>,
    from: Option<&State>,
) -> Result<()> {
    let k = run.start_step;
    if k == 0 || from.is_some_and(|s| s.step() >= k) {
        return Ok(());
    }
    let rule = source.stop_rule();
    let end = match (epochs, rule) {
        (None, None) => return Ok(()),
        (Some(epochs), _) if source.epoch_batches().is_some() => source.end_step(from, epochs)?,
        _ => {
            let at = source.state_at(from, None, k)?;
            let next = source.state_at(from, Some(&at), at.step().saturating_add(1))?;
            (next.step() == at.step()).then_some(at.step())
        }
    };
    let Some(steps) = end.filter(|&end| k >= end) else {
        return Ok(());
    };
    let held = match steps {
        0 => "no step".to_owned(),
        1 => "1 step (step 0".to_owned(),
        n => format!("{n} steps (0 to {}", n - 1),
    };
    let per_epoch = match (source.epoch_batches(), epochs) {
        (Some(b), Some(e)) => {
            format!("; its {e} epoch(s) of {b} steps each end at step {steps})")
        }
        _ if steps == 0 => String::new(),
        _ => ")".to_owned(),
    };
    let (ender, fix) = match (rule, epochs) {
        (Some(stop), _) => (
            format!("its stop rule (stop=\"{stop}\")"),
            ", or the stop rule \"never\" (no end)".to_owned(),
        ),
        (None, e) => (
            format!("epochs={}", e.unwrap_or(0)),
            ", or more epochs (or none: no cap)".to_owned(),
        ),
    };
    Err(run_error(
        "start_step",
        format!(
            "start_step={k} is past the end of the run: {ender} gives it {held}{per_epoch}, \
             so it would deliver nothing: give a start_step below {steps}{fix}"
        ),
    ))
}

impl<S: Source> Loader<S, Cpu> {
    /// A builder of a loader over `source` (a [`Source`], or a
    /// [`FixedRecords`](crate::source::FixedRecords) set), on the cpu backend by default.
    pub fn builder(source: impl IntoSource<Source = S>) -> LoaderBuilder<S, Cpu> {
        LoaderBuilder::new(source.into_source())
    }
}
