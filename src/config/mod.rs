//! Pipeline configuration: a builder whose `build` validates every value.

mod display;
mod getters;

use std::time::Duration;

use crate::backend::contract::Backend;
use crate::backend::cpu::Cpu;
#[cfg(feature = "cuda")]
use crate::backend::cuda::{backend::Cuda, options::CudaOptions};
use crate::error::ConfigError;
use crate::fields::Fields;
use crate::host_ring::{DEVICE_ALIGN, HUGE_PAGE, PAGE};
use crate::locate::Locate;
use crate::setters::setters;
use crate::slot::info::SlotInfo;

/// What to do with a last batch that has fewer samples than `batch_size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LastBatch {
    /// Deliver it, with its true sample count and byte length.
    #[default]
    Partial,
    /// Drop it: every delivered batch is full.
    Drop,
}

/// A validated pipeline configuration. Build one with [`Config::builder`].
///
/// ```
/// let config = pinring::Config::builder()
///     .batch_size(16)
///     .bytes_per_sample(4 * 4097)
///     .build()?;
/// assert_eq!(config.batch_bytes(), 16 * 4 * 4097);
/// assert_eq!((config.host_slots(), config.device_slots()), (4, 2));
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug)]
pub struct Config<B: Backend = Cpu> {
    /// The settings kept as the builder was given them.
    pub(crate) settings: Settings,
    pub(crate) batch_size: usize,
    pub(crate) sample_bytes: usize,
    pub(crate) batch_bytes: usize,
    pub(crate) host_stride: usize,
    pub(crate) device_stride: usize,
    pub(crate) decode_threads: usize,
    /// The stream every `pop` binds its batch to ([`ConfigBuilder::consumer_stream`]).
    pub(crate) consumer_stream: Option<B::Stream>,
    /// Bytes of the batch descriptions every host and device slot keeps (their rows).
    pub(crate) id_bytes: usize,
    /// Rows a batch's description holds at most.
    pub(crate) rows_per_batch: usize,
    /// The batch's fields, if it has a layout of named arrays.
    pub(crate) fields: Option<std::sync::Arc<Fields>>,
    pub(crate) backend: B::Options,
    /// Samples per decode work item, when not derived from the sample size (models).
    pub(crate) decode_item_samples: Option<usize>,
}

/// The settings a [`ConfigBuilder`] stores as given and the [`Config`] it builds keeps as
/// they are (`build` checks them; `poison_released` it also turns on from the
/// environment).
#[derive(Debug, Clone)]
pub(crate) struct Settings {
    pub(crate) host_slots: usize,
    pub(crate) device_slots: usize,
    pub(crate) copy_core: Option<usize>,
    pub(crate) decode_cores: Vec<usize>,
    pub(crate) spin: Duration,
    pub(crate) last_batch: LastBatch,
    pub(crate) huge_pages: bool,
    pub(crate) pop_timeout: Option<Duration>,
    pub(crate) lease_timeout: Duration,
    pub(crate) shutdown_timeout: Duration,
    /// Most bytes of host memory: the ring and the bookkeeping (checked again with the
    /// sample type's size when the pipeline starts).
    pub(crate) host_budget: usize,
    /// The processes of this node that share its cores and memory (default 1).
    pub(crate) local_ranks: usize,
    /// Most bytes of device memory: the device slots.
    pub(crate) device_budget: usize,
    pub(crate) trace: usize,
    pub(crate) poison_released: bool,
    /// Whether the pipeline's threads run as `SCHED_BATCH` (`ConfigBuilder::batch_scheduling`).
    pub(crate) batch_scheduling: bool,
    /// What places the batches' rows in their files (`ConfigBuilder::locator`).
    pub(crate) locator: Option<std::sync::Arc<dyn Locate>>,
    /// The fields whose host bytes each batch keeps until its release
    /// (`ConfigBuilder::host_fields`).
    pub(crate) host_fields: Vec<String>,
}

/// The settings a [`ConfigBuilder`] stores that `build` resolves into others: the sizes
/// of a batch, and the defaults that depend on other settings or on the machine.
#[derive(Debug, Clone, Default)]
struct Unresolved {
    batch_size: Option<usize>,
    bytes_per_sample: Option<usize>,
    batch_bytes: Option<usize>,
    decode_threads: Option<usize>,
    host_budget: Option<usize>,
    rows_per_batch: Option<usize>,
    fields: Option<Fields>,
}

/// The share of its node a pipeline takes by default, as one of `local_ranks` processes
/// on the node ([`ConfigBuilder::node_share`]): the decode threads (the cores this process
/// may use over `local_ranks`, at least one) and the host budget (the default 16 GiB over
/// `local_ranks`) it resolved to, each the given value where one was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeShare {
    /// The processes of the node sharing it (1: the node is this process's).
    pub local_ranks: usize,
    /// Decode threads the pipeline runs.
    pub decode_threads: usize,
    /// The most bytes its pinned host ring and bookkeeping may take.
    pub host_budget: usize,
}

// Written out: a derive would ask the backend type itself to be `Clone`; its options and
// streams are.
impl<B: Backend> Clone for Config<B> {
    fn clone(&self) -> Self {
        Config {
            settings: self.settings.clone(),
            batch_size: self.batch_size,
            sample_bytes: self.sample_bytes,
            batch_bytes: self.batch_bytes,
            host_stride: self.host_stride,
            device_stride: self.device_stride,
            decode_threads: self.decode_threads,
            consumer_stream: self.consumer_stream.clone(),
            id_bytes: self.id_bytes,
            rows_per_batch: self.rows_per_batch,
            fields: self.fields.clone(),
            backend: self.backend.clone(),
            decode_item_samples: self.decode_item_samples,
        }
    }
}

impl Config<Cpu> {
    /// Most device slots a pipeline takes (any backend). Each slot costs host-side
    /// bookkeeping (its stamp, fence and events, a ready-ring entry) that the device
    /// budget does not count, so the count is capped rather than left to the budget.
    pub const MAX_DEVICE_SLOTS: usize = 1024;

    /// Most decode threads a pipeline takes. Each is an OS thread that wakes for the
    /// pipeline's batches; past the machine's cores more only add wake-ups and contention
    /// (1,000 threads ran about 1,000 times slower than a core's worth), so the count is
    /// capped rather than left unchecked.
    pub const MAX_DECODE_THREADS: usize = 256;

    /// The host budget's default for a process alone on its node: 16 GiB (a node's share
    /// of it for one of several local ranks, [`ConfigBuilder::node_share`]).
    pub const DEFAULT_HOST_BUDGET: usize = 16 << 30;

    /// The spin time waits default to: a few tens of µs, about what a park and wake-up
    /// round trip costs (see [`ConfigBuilder::spin`]).
    pub const DEFAULT_SPIN: Duration = Duration::from_micros(30);

    /// How long `pop` waits by default when every device slot is leased before it reports
    /// [`Error::AllSlotsLeased`](crate::Error::AllSlotsLeased).
    pub const DEFAULT_LEASE_TIMEOUT: Duration = Duration::from_secs(30);

    /// Most spans a trace ring holds (see [`ConfigBuilder::trace`]): 40 bytes each, so
    /// 160 MiB at most.
    pub const MAX_TRACE_SPANS: usize = 1 << 22;

    /// A builder with the defaults: 4 host slots, 2 device slots, one decode thread per
    /// available core, the cpu backend, partial last batches delivered.
    pub fn builder() -> ConfigBuilder<Cpu> {
        ConfigBuilder {
            settings: Settings {
                host_slots: 4,
                device_slots: 2,
                copy_core: None,
                decode_cores: Vec::new(),
                spin: Config::DEFAULT_SPIN,
                last_batch: LastBatch::Partial,
                huge_pages: false,
                pop_timeout: None,
                lease_timeout: Config::DEFAULT_LEASE_TIMEOUT,
                shutdown_timeout: Duration::from_secs(5),
                host_budget: Config::DEFAULT_HOST_BUDGET,
                local_ranks: 1,
                device_budget: 16 << 30,
                trace: 0,
                poison_released: false,
                batch_scheduling: true,
                locator: None,
                host_fields: Vec::new(),
            },
            unresolved: Unresolved::default(),
            consumer_stream: None,
            backend: Default::default(),
        }
    }
}

/// Builds a [`Config`]; every value is checked by [`build`](ConfigBuilder::build).
#[derive(Debug, Clone)]
#[must_use]
pub struct ConfigBuilder<B: Backend = Cpu> {
    settings: Settings,
    unresolved: Unresolved,
    consumer_stream: Option<B::Stream>,
    backend: B::Options,
}

impl<B: Backend> ConfigBuilder<B> {
    setters! {
        /// Samples in a full batch (required, at least 1).
        batch_size(n: usize) => unresolved.batch_size = Some(n);
        /// Bytes each sample takes (give this or [`batch_bytes`](Self::batch_bytes)).
        bytes_per_sample(n: usize) => unresolved.bytes_per_sample = Some(n);
        /// Bytes of a full batch (give this or [`bytes_per_sample`](Self::bytes_per_sample));
        /// must be a multiple of `batch_size`.
        batch_bytes(n: usize) => unresolved.batch_bytes = Some(n);
        /// Host slots in the pinned ring (default 4): how far decode may run ahead.
        host_slots(n: usize) => settings.host_slots = n;
        /// Device slots (default 2): how many batches the consumer can hold at once; at most
        /// [`Config::MAX_DEVICE_SLOTS`].
        device_slots(n: usize) => settings.device_slots = n;
        /// Threads in the decode pool (default: the available parallelism, over the
        /// [`node_share`](Self::node_share)'s local ranks); at most
        /// [`Config::MAX_DECODE_THREADS`].
        decode_threads(n: usize) => unresolved.decode_threads = Some(n);
        /// This process is one of `local_ranks` on its node (a launcher's
        /// `LOCAL_WORLD_SIZE`; [`LoaderBuilder::topology`](crate::LoaderBuilder::topology)
        /// sets it): the decode threads and the host budget not given default to its share,
        /// the cores and [`Config::DEFAULT_HOST_BUDGET`] split `local_ranks` ways, so that
        /// the node's loaders together take what one alone would (default 1).
        node_share(local_ranks: usize) => settings.local_ranks = local_ranks;
        /// Pins the copy thread to this core.
        copy_core(core: usize) => settings.copy_core = Some(core);
        /// Pins decode worker `i` to `cores[i % cores.len()]`.
        decode_cores(cores: impl IntoIterator<Item = usize>) =>
            settings.decode_cores = cores.into_iter().collect();
        /// How long a waiting thread spins before it parks (default
        /// [`Config::DEFAULT_SPIN`], 30 µs; zero parks at once).
        ///
        /// Every wait in the pipeline (the consumer's `pop`, the copy thread, the decode
        /// workers, the feeder) checks its condition in a spin loop for at most this long, then
        /// parks until woken. The spin is bounded by time, adapts (a waiter spins only while its
        /// waits are typically shorter than this), and a deadline is checked in both phases. A
        /// longer spin shortens the hand-off between stages that run at a high rate; zero
        /// leaves every idle core to the trainer at the cost of a wake-up latency per hand-off.
        spin(spin: Duration) => settings.spin = spin;
        /// What to do with a short last batch (default: deliver it).
        last_batch(mode: LastBatch) => settings.last_batch = mode;
        /// Asks for 2 MiB huge pages for the host ring; when the system has none the ring
        /// falls back to normal pages and [`Pipeline::huge_pages`](crate::Pipeline::huge_pages)
        /// says why.
        huge_pages(on: bool) => settings.huge_pages = on;
        /// Makes `pop` give up after `timeout` with
        /// [`Error::PopTimeout`](crate::Error::PopTimeout).
        pop_timeout(timeout: Duration) => settings.pop_timeout = Some(timeout);
        /// How long `pop` waits, when every device slot is leased by batches already handed
        /// out, before it returns [`Error::AllSlotsLeased`](crate::Error::AllSlotsLeased)
        /// naming them (default [`Config::DEFAULT_LEASE_TIMEOUT`]). A release from another
        /// thread within that time lets the pop go on; a batch forgotten or held while popping
        /// more would otherwise hang the pop forever.
        lease_timeout(timeout: Duration) => settings.lease_timeout = timeout;
        /// How long dropping the pipeline waits for threads that run user code (a decode in
        /// progress, a source iterator's `next`) before it leaves them to end on their own
        /// (default 5 s).
        shutdown_timeout(timeout: Duration) => settings.shutdown_timeout = timeout;
        /// Most bytes of host memory the pipeline may take (default 16 GiB): its host ring and
        /// the bookkeeping of its samples (their ids and, once the decoder's sample type is
        /// known at [`Pipeline::new`](crate::Pipeline::new), one cell per sample per host
        /// slot; see [`Config::bookkeeping_bytes`]).
        host_budget(bytes: usize) => unresolved.host_budget = Some(bytes);
        /// Most bytes the device slots may take (default 16 GiB).
        device_budget(bytes: usize) => settings.device_budget = bytes;
        /// Records a timeline of the pipeline (per-batch spans of every stage) into a ring of
        /// `spans` entries, written as Chrome trace JSON by
        /// [`Pipeline::write_trace`](crate::Pipeline::write_trace) (default 0: off). The ring
        /// is allocated here, once: recording allocates nothing, and keeps the latest `spans`
        /// spans of a longer run. A batch makes about `5 + decode items` spans; at most
        /// [`Config::MAX_TRACE_SPANS`].
        trace(spans: usize) => settings.trace = spans;
        /// A debug mode for the most likely mistake, a view of a batch kept and read after the
        /// batch's release: every released device slot is filled with a poison pattern on the
        /// device, ordered after its release fence (and before the slot's next copy), so that
        /// such a view reads out-of-range values instead of plausible data from another batch
        /// (default off; the environment variable `PINRING_POISON_RELEASED=1` turns it on for
        /// every config built).
        ///
        /// The pattern: every byte 0xFF, so integers read -1 (int8 to int64) or their largest
        /// value (uint8 255, uint16 65,535, ...: beyond any vocabulary), floats NaN.
        ///
        /// Cost, on: one fill of the slot (`device_stride` bytes) per batch, on the device: a
        /// device-memory write beside the copies (cuda: three more driver calls per release on
        /// the releasing thread, `cuStreamWaitEvent`, `cuMemsetD8Async`, `cuEventRecord`; cpu:
        /// a memset of the slot, by the releasing thread for `Fence::Sync`, else by the slot's
        /// own poison thread, one per device slot). Off: one branch per release.
        poison_released(on: bool) => settings.poison_released = on;
        /// Whether the pipeline's own threads (decode workers, feeder, copy thread, the
        /// backend's copy and completion threads) run under Linux's `SCHED_BATCH` policy
        /// (default on): a thread the pipeline wakes then never preempts the thread that
        /// woke it (the trainer's `release` or `pop`) and runs on a free core, or at the next
        /// scheduler tick when none is free; its share of the CPU is unchanged. On a host
        /// with fewer free cores than pipeline threads this keeps the trainer's calls short
        /// (a cpu `release` on 2 cores: 150 µs as `SCHED_OTHER`, 21 µs as `SCHED_BATCH`;
        /// benches/RESULTS.md). Off: the threads keep the policy they were started with.
        batch_scheduling(on: bool) => settings.batch_scheduling = on;
        /// Fields of the layout ([`fields`](Self::fields)) whose host bytes every batch keeps
        /// from pop until release, for the consumer to read on the host
        /// ([`Batch::host_field_bytes`](crate::Batch::host_field_bytes); modded-nanogpt reads
        /// its bigram hash there before the forward pass). A host slot is freed as soon as its
        /// copy completes, before the release, so these bytes are copied out of it: by the copy
        /// thread, as it starts the batch's copy, into a buffer of the batch's device slot.
        ///
        /// Cost: `device_slots ×` the fields' bytes of host memory, and one `memcpy` of the
        /// fields' bytes per batch on the copy thread (for modded-nanogpt's `bigram_inputs` at
        /// 49,152 tokens a rank: 192 KiB a batch). Default: none. A name that is not a field
        /// is [`ConfigError::Fields`].
        host_fields(names: Vec<String>) => settings.host_fields = names;
        /// Rows a batch's description holds at most (default: `batch_size`, a row a sample). A
        /// source whose sample packs several rows (the documents of a step) sets it to the
        /// most a batch can hold; rows described past it are not kept.
        rows_per_batch(rows: usize) => unresolved.rows_per_batch = Some(rows);
        /// Gives each batch a layout of named arrays in its slot (a batch of one sample: see
        /// [`Fields`]): [`Batch::field`](crate::Batch::field) finds them. When
        /// `bytes_per_sample` is not set it is the layout's size.
        fields(fields: Fields) => unresolved.fields = Some(fields);
        /// Declares the stream the consumer's work runs on, once: every
        /// [`pop`](crate::Pipeline::pop) then makes it wait (stream-side, the host does not
        /// block) for the batch and binds the batch to it, as
        /// [`Batch::wait_on`](crate::Batch::wait_on) does, and a release with
        /// [`Fence::Bound`](crate::Fence::Bound) (or a drop) fences on it. A training loop then
        /// names no stream per step:
        ///
        /// ```
        /// use pinring::{Config, CpuStream, Fence, Pipeline};
        /// let stream = CpuStream::new(); // cuda: a CuStream of the pipeline's context
        /// let config = Config::builder()
        ///     .batch_size(2)
        ///     .bytes_per_sample(4)
        ///     .consumer_stream(stream.clone())
        ///     .build()?;
        /// let fill = |s: u32, out: &mut [u8]| -> Result<(), pinring::DecodeError> {
        ///     out.copy_from_slice(&s.to_le_bytes());
        ///     Ok(())
        /// };
        /// let mut pipeline = Pipeline::new(config, pinring::decode_fn(fill), 0..8u32)?;
        /// while let Some(batch) = pipeline.pop()? {
        ///     // ... enqueue the step's work on `stream` ...
        ///     batch.release(Fence::Bound)?;
        /// }
        /// # Ok::<(), Box<dyn std::error::Error>>(())
        /// ```
        ///
        /// Set it after choosing the backend (switching backends forgets it). A batch may
        /// still be bound to more streams with `wait_on`; `Fence::Bound` fences on all of
        /// them. cuda: the stream must belong to the pipeline's context, checked once when the
        /// pipeline starts ([`Error::Fence`](crate::Error::Fence)); each `pop` then costs one
        /// `cuStreamWaitEvent` more.
        consumer_stream(stream: B::Stream) => consumer_stream = Some(stream);
        /// What places each batch's rows in their files, for
        /// [`Batch::locate`](crate::Batch::locate) (default: none, and `locate` says so): the
        /// source the pipeline reads — a [`Sampler`](crate::source::Sampler) or a
        /// [`Mixture`](crate::source::Mixture) (cheap to clone), or a source's own config
        /// helper sets it. Nothing on the pipeline's path uses it.
        locator(locator: std::sync::Arc<dyn Locate>) => settings.locator = Some(locator);
    }

    /// This builder with the batch layout of `layout` (a source's: batch size, bytes a
    /// sample or a batch, rows a batch, fields, locator) in place of its own; its other
    /// settings stay.
    pub(crate) fn layout_of(mut self, layout: ConfigBuilder<Cpu>) -> Self {
        let Unresolved {
            batch_size,
            bytes_per_sample,
            batch_bytes,
            rows_per_batch,
            fields,
            decode_threads: _,
            host_budget: _,
        } = layout.unresolved;
        self.unresolved = Unresolved {
            batch_size,
            bytes_per_sample,
            batch_bytes,
            rows_per_batch,
            fields,
            ..self.unresolved
        };
        self.settings.locator = layout.settings.locator;
        self
    }

    /// Switches to backend `B2` with these options.
    pub fn backend<B2: Backend>(self, options: B2::Options) -> ConfigBuilder<B2> {
        ConfigBuilder {
            settings: self.settings,
            unresolved: self.unresolved,
            // A stream of the old backend means nothing to the new one.
            consumer_stream: None,
            backend: options,
        }
    }

    /// Switches to the cuda backend: shorthand for `.backend::<Cuda>(options)`.
    #[cfg(feature = "cuda")]
    pub fn cuda(self, options: CudaOptions) -> ConfigBuilder<Cuda> {
        self.backend::<Cuda>(options)
    }

    /// Checks every value and returns the config, or the first [`ConfigError`] found.
    pub fn build(self) -> Result<Config<B>, ConfigError> {
        let Self {
            mut settings,
            unresolved,
            consumer_stream,
            backend,
        } = self;
        let samples = unresolved
            .batch_size
            .ok_or(ConfigError::Missing("batch_size"))?;
        nonzero(samples, "batch_size")?;
        for name in &settings.host_fields {
            if unresolved
                .fields
                .as_ref()
                .and_then(|f| f.get(name))
                .is_none()
            {
                return Err(ConfigError::Fields(format!(
                    "host_fields names {name:?}, which is not a field of the batches' layout: \
                     name fields the layout has (ConfigBuilder::fields)"
                )));
            }
        }
        let mut bytes_per_sample = unresolved.bytes_per_sample;
        if let Some(fields) = &unresolved.fields {
            if let Some(problem) = fields.problem() {
                return Err(ConfigError::Fields(problem.to_owned()));
            }
            if fields.is_empty() {
                return Err(ConfigError::Fields("the layout has no field".to_owned()));
            }
            if samples != 1 {
                return Err(ConfigError::Fields(format!(
                    "a batch with fields holds one sample (batch_size 1), not {samples}"
                )));
            }
            match bytes_per_sample {
                None if unresolved.batch_bytes.is_none() => bytes_per_sample = Some(fields.bytes()),
                Some(per) if per < fields.bytes() => {
                    return Err(ConfigError::Fields(format!(
                        "the fields take {} bytes, past bytes_per_sample {per}",
                        fields.bytes()
                    )))
                }
                _ => {}
            }
        }
        let rows_per_batch = unresolved.rows_per_batch.unwrap_or(samples);
        let (sample_bytes, batch_bytes) = match (bytes_per_sample, unresolved.batch_bytes) {
            (Some(_), Some(_)) => {
                return Err(ConfigError::Conflict("bytes_per_sample", "batch_bytes"))
            }
            (None, None) => return Err(ConfigError::Missing("bytes_per_sample or batch_bytes")),
            (Some(per), None) => {
                nonzero(per, "bytes_per_sample")?;
                let batch = per
                    .checked_mul(samples)
                    .ok_or(ConfigError::Overflow("batch_size × bytes_per_sample"))?;
                (per, batch)
            }
            (None, Some(batch)) => {
                nonzero(batch, "batch_bytes")?;
                if batch % samples != 0 {
                    return Err(ConfigError::Indivisible {
                        batch_bytes: batch,
                        samples,
                    });
                }
                (batch / samples, batch)
            }
        };
        if let Some(fields) = &unresolved.fields
            && batch_bytes < fields.bytes()
        {
            return Err(ConfigError::Fields(format!(
                "the fields take {} bytes, past batch_bytes {batch_bytes}",
                fields.bytes()
            )));
        }
        nonzero(settings.host_slots, "host_slots")?;
        nonzero(settings.device_slots, "device_slots")?;
        if settings.device_slots > Config::MAX_DEVICE_SLOTS {
            return Err(ConfigError::TooMany {
                field: "device_slots",
                n: settings.device_slots,
                max: Config::MAX_DEVICE_SLOTS,
            });
        }
        let share = nonzero(settings.local_ranks, "node_share")?;
        let decode_threads = match unresolved.decode_threads {
            Some(n) => nonzero(n, "decode_threads")?,
            None => (std::thread::available_parallelism().map_or(1, |n| n.get()) / share)
                .clamp(1, Config::MAX_DECODE_THREADS),
        };
        settings.host_budget = unresolved
            .host_budget
            .unwrap_or(Config::DEFAULT_HOST_BUDGET / share);
        if decode_threads > Config::MAX_DECODE_THREADS {
            return Err(ConfigError::TooMany {
                field: "decode_threads",
                n: decode_threads,
                max: Config::MAX_DECODE_THREADS,
            });
        }
        if settings.trace > Config::MAX_TRACE_SPANS {
            return Err(ConfigError::TooMany {
                field: "trace",
                n: settings.trace,
                max: Config::MAX_TRACE_SPANS,
            });
        }
        let align = if settings.huge_pages { HUGE_PAGE } else { PAGE };
        let host_stride = batch_bytes
            .checked_next_multiple_of(align)
            .ok_or(ConfigError::Overflow("batch_bytes rounded up to the page"))?;
        let host_bytes = host_stride
            .checked_mul(settings.host_slots)
            .ok_or(ConfigError::Overflow("host_slots × batch_bytes"))?;
        let id_bytes = SlotInfo::bytes(settings.host_slots, rows_per_batch)
            .zip(SlotInfo::bytes(settings.device_slots, rows_per_batch))
            .and_then(|(host, device)| host.checked_add(device))
            .ok_or(ConfigError::Overflow(
                "rows_per_batch × slots (the batch descriptions)",
            ))?;
        let host_total = host_bytes
            .checked_add(id_bytes)
            .ok_or(ConfigError::Overflow(
                "batch_bytes × host_slots + the batch descriptions",
            ))?;
        within_budget(
            "the host ring and the batch descriptions",
            host_total,
            settings.host_budget,
            "host_budget",
        )?;
        let device_stride = batch_bytes
            .checked_next_multiple_of(DEVICE_ALIGN)
            .ok_or(ConfigError::Overflow("batch_bytes rounded up to the page"))?;
        let device_bytes = device_stride
            .checked_mul(settings.device_slots)
            .ok_or(ConfigError::Overflow("device_slots × batch_bytes"))?;
        within_budget(
            "the device slots",
            device_bytes,
            settings.device_budget,
            "device_budget",
        )?;
        if settings.copy_core.is_some() || !settings.decode_cores.is_empty() {
            let cores = core_affinity::get_core_ids().unwrap_or_default();
            let check = |field, core: usize| {
                if cores.iter().any(|c| c.id == core) {
                    Ok(())
                } else {
                    Err(ConfigError::NoSuchCore {
                        field,
                        core,
                        available: cores.len(),
                    })
                }
            };
            if let Some(core) = settings.copy_core {
                check("copy_core", core)?;
            }
            for &core in &settings.decode_cores {
                check("decode_cores", core)?;
            }
        }
        settings.poison_released |= poison_from_env();
        Ok(Config {
            settings,
            batch_size: samples,
            sample_bytes,
            batch_bytes,
            host_stride,
            device_stride,
            decode_threads,
            consumer_stream,
            id_bytes,
            rows_per_batch,
            fields: unresolved.fields.map(std::sync::Arc::new),
            backend,
            decode_item_samples: None,
        })
    }
}

/// The environment variable that turns the poison mode on for every config built.
const POISON_ENV: &str = "PINRING_POISON_RELEASED";

/// Whether `PINRING_POISON_RELEASED=1` is set.
fn poison_from_env() -> bool {
    std::env::var_os(POISON_ENV).is_some_and(|v| v == "1")
}

fn nonzero(n: usize, field: &'static str) -> Result<usize, ConfigError> {
    if n == 0 {
        Err(ConfigError::Zero(field))
    } else {
        Ok(n)
    }
}

/// `bytes` of `what` within `budget` (the setting `knob`), or [`ConfigError::OverBudget`]
/// saying so.
pub(crate) fn within_budget(
    what: &'static str,
    bytes: usize,
    budget: usize,
    knob: &'static str,
) -> Result<(), ConfigError> {
    if bytes > budget {
        Err(ConfigError::OverBudget {
            what,
            bytes,
            budget,
            knob,
        })
    } else {
        Ok(())
    }
}
