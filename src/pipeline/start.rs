//! Wiring: one constructor assembles a pipeline's parts, for [`Pipeline::new`] (which
//! starts them on threads) and for the model checker's rig (which runs them on its own).

use crate::backend::contract::{Backend, CopyRole, CopyWaker, Layout};
use crate::cadence::Cadence;
use crate::config::{within_budget, Config};
use crate::control::Control;
use crate::copy_thread::Copier;
use crate::decode::Decode;
use crate::decode_pool::{self, DecodeWork};
use crate::device_side::DeviceSide;
use crate::error::{ConfigError, Error, Result};
use crate::feeder::Feeder;
use crate::host_kept::HostKept;
use crate::host_ring::HostRing;
use crate::park::ParkSlot;
use crate::ready_ring::{ready_ring, ready_ring_bytes};
use crate::slot::device::DeviceSlots;
use crate::slot::host::{HostSlots, SampleCells};
use crate::sync::{native, Arc};
use crate::trace::Trace;

use super::Pipeline;

/// Decode work items aim at this many bytes of output, so that a small sample's hand-off
/// (a claim, and a wake-up when the worker had parked) is shared by several: a batch of
/// 16 samples of 16 KiB is one item, and batches decode side by side on different
/// workers; a batch of 64 samples of 512 KiB is 64 items (a sample larger than this is an
/// item of its own).
const ITEM_BYTES: usize = 512 << 10;

/// Bytes of host memory a pipeline keeps beside its ring for its bookkeeping, now that
/// the backend and the sample type are known: the sample ids (counted by the config), one
/// sample cell per sample per host slot, every slot's protocol state and the ready ring.
/// Checked against the host budget, as the config checked the ring and the ids; nothing is
/// allocated or started before.
fn bookkeeping<B: Backend, S>(config: &Config<B>) -> Result<usize, ConfigError> {
    let (h, d) = (config.settings.host_slots, config.settings.device_slots);
    let overflow = ConfigError::Overflow("batch_size × host_slots (the sample cells)");
    let bookkeeping = [
        Some(config.id_bytes),
        SampleCells::<S>::bytes(h, config.batch_size),
        HostSlots::state_bytes(h),
        DeviceSlots::<B::Captured>::state_bytes(d),
        ready_ring_bytes(d),
    ]
    .into_iter()
    .try_fold(0usize, |sum, part| sum.checked_add(part?))
    .ok_or(overflow.clone())?;
    let total = (config.host_stride * h)
        .checked_add(bookkeeping)
        .ok_or(overflow)?;
    within_budget(
        "the host ring and the samples' bookkeeping (their ids and cells)",
        total,
        config.settings.host_budget,
        "host_budget",
    )?;
    Ok(bookkeeping)
}

/// A pipeline and its stages, not yet running.
pub(crate) struct Parts<B: Backend, D: Decode, I> {
    /// The consumer's side (it owns no threads yet).
    pub(crate) pipeline: Pipeline<B>,
    pub(crate) feeder: Feeder<D, I>,
    /// Shared by every decode worker: each runs `decode.run_worker()`.
    pub(crate) decode: Arc<DecodeWork<D>>,
    pub(crate) copier: Copier<B>,
}

/// Maps the host ring, opens the backend and builds every part of a pipeline.
pub(crate) fn assemble<B, D, I>(
    config: &Config<B>,
    decoder: D,
    samples: I,
) -> Result<Parts<B, D, I::IntoIter>>
where
    B: Backend,
    D: Decode,
    I: IntoIterator<Item = D::Sample>,
{
    let (host_slots, device_slots) = (config.settings.host_slots, config.settings.device_slots);
    let bookkeeping = bookkeeping::<B, D::Sample>(config)?;
    let ring = native::Arc::new(HostRing::new(
        host_slots,
        config.host_stride,
        config.settings.huge_pages,
        bookkeeping,
    )?);
    let copier = native::Arc::new(ParkSlot::new());
    let layout = Layout {
        batch_bytes: config.batch_bytes,
        host_stride: config.host_stride,
        device_stride: config.device_stride,
        host_slots,
        device_slots,
        shutdown_timeout: config.settings.shutdown_timeout,
        poison_released: config.settings.poison_released,
        batch_scheduling: config.settings.batch_scheduling,
    };
    let backend = B::open(
        &config.backend,
        ring.clone(),
        layout,
        CopyWaker(copier.clone()),
    )?;
    if let Some(stream) = &config.consumer_stream {
        backend.check_stream(stream)?;
    }
    let trace =
        (config.settings.trace > 0).then(|| native::Arc::new(Trace::new(config.settings.trace)));
    let control = Arc::new(Control::new(
        copier.clone(),
        config.settings.spin,
        host_slots,
        config.decode_threads,
        trace.clone(),
    ));
    let per_item = config
        .decode_item_samples
        .unwrap_or_else(|| (ITEM_BYTES / config.sample_bytes).max(1))
        .min(config.batch_size);
    let host = Arc::new(HostSlots::new(
        host_slots,
        config.batch_size,
        per_item,
        config.rows_per_batch,
    ));
    let cells = Arc::new(SampleCells::new(host_slots, config.batch_size));
    let device = Arc::new(DeviceSide {
        backend,
        slots: DeviceSlots::new(device_slots, config.rows_per_batch),
        copier,
        sample_bytes: config.sample_bytes,
        trace,
        poison: config.settings.poison_released,
        fields: config.fields.clone(),
        locator: config.settings.locator.clone(),
        kept: HostKept::new(
            &config.settings.host_fields,
            config.fields.as_deref(),
            device_slots,
            ring.clone(),
        ),
    });
    let (sender, receiver) = ready_ring(device_slots);
    let source_tally = decoder.source_tally();
    let pipeline = Pipeline {
        control: control.clone(),
        host: host.clone(),
        device: device.clone(),
        ring: ring.clone(),
        ready: receiver,
        next: 0,
        finished: None,
        pop_timeout: config.settings.pop_timeout,
        lease_timeout: config.settings.lease_timeout,
        consumer_stream: config.consumer_stream.clone(),
        lease_clock: None,
        shutdown_timeout: config.settings.shutdown_timeout,
        decode_threads: config.decode_threads,
        node_share: config.node_share(),
        source_tally,
        copy_thread: None,
        feeder: None,
        pool: None,
    };
    let decode = Arc::new(DecodeWork::new(
        control.clone(),
        host.clone(),
        cells.clone(),
        ring,
        decoder,
        config.sample_bytes,
    ));
    let feeder = Feeder {
        control: control.clone(),
        slots: host.clone(),
        samples: cells,
        source: samples.into_iter(),
        per_batch: config.batch_size,
        last_batch: config.settings.last_batch,
        decoder: std::marker::PhantomData,
    };
    let copier = Copier {
        control,
        host,
        device,
        ready: sender,
        role: CopyRole(()),
        max_run: crate::copy_thread::max_run(config.batch_bytes),
        enqueued_at: Vec::new(),
        cadence: Cadence::new(config.settings.spin),
        slot_wait: None,
        patience: crate::copy_thread::PATIENCE_MIN,
    };
    Ok(Parts {
        pipeline,
        feeder,
        decode,
        copier,
    })
}

impl<B: Backend> Pipeline<B> {
    /// Maps the host ring, opens the backend and starts the feeder, the decode workers and
    /// the copy thread. `samples` is pulled lazily, one batch ahead per free host slot; it
    /// may be infinite.
    ///
    /// A source that numbers its steps cuts them into batches of its own size — a
    /// sampler's [`batch_size`](crate::source::SamplerBuilder::batch_size), a mixture's, one
    /// step of packed documents a batch — and its samples say so
    /// ([`Describe::batch_size`](crate::Describe::batch_size)). The config's
    /// [`batch_size`](crate::ConfigBuilder::batch_size) must be the same: otherwise every
    /// batch would carry the wrong step, so the feeder refuses the run at its first sample,
    /// before anything is decoded, and the first [`pop`](Self::pop) returns
    /// [`ConfigError::SourceBatchSize`](crate::ConfigError::SourceBatchSize) (the samples are
    /// pulled lazily, on the feeder thread, so this cannot come from `new` itself). A source
    /// whose samples do not say (no steps, a source of your own) is not checked.
    ///
    /// ```
    /// use pinring::source::{write_shard, TokenShards, TokenType, Tokens};
    /// use pinring::{Config, ConfigError, Error, Pipeline};
    /// # let path = std::env::temp_dir().join(format!("pinring-batch-size-doc-{}.bin", std::process::id()));
    /// write_shard(&path, &[7; 4096])?;
    /// let sampler = TokenShards::open([&path])?.windows(65).batch_size(8).build()?;
    /// let decoder = Tokens::new(TokenType::U16);
    /// let config = Config::builder().batch_size(16).bytes_per_sample(decoder.sample_bytes(65)).build()?;
    /// let mut pipeline = Pipeline::new(config, decoder, sampler.iter())?;
    /// let err = pipeline.pop().unwrap_err();
    /// assert!(matches!(err, Error::Config(ConfigError::SourceBatchSize { source_batch: 8, config_batch: 16 })));
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn new<D, I>(config: Config<B>, decoder: D, samples: I) -> Result<Self>
    where
        D: Decode,
        I: IntoIterator<Item = D::Sample>,
        I::IntoIter: Send + 'static,
    {
        let Parts {
            mut pipeline,
            feeder,
            decode,
            copier,
        } = assemble(&config, decoder, samples)?;
        // From here on, an early return drops `pipeline`, which stops what was started.
        let control = pipeline.control.clone();
        let pool = decode_pool::build_pool(
            config.decode_threads,
            &config.settings.decode_cores,
            config.settings.batch_scheduling,
            &control,
        )?;
        pool.spawn_broadcast(move |_| decode.run_worker());
        pipeline.pool = Some(pool);

        let copy_core = config.settings.copy_core;
        let batch = config.settings.batch_scheduling;
        pipeline.copy_thread = Some(spawn(&control, "pinring-copy", batch, move || {
            if let Some(id) = copy_core {
                core_affinity::set_for_current(core_affinity::CoreId { id });
            }
            crate::thread_policy::fine_timer_slack();
            copier.run();
        })?);
        let feeding = control.clone();
        pipeline.feeder = Some(spawn(&control, "pinring-feeder", batch, move || {
            crate::feeding::feeding(feeding, || feeder.run());
        })?);
        Ok(pipeline)
    }
}

/// Spawns a named pipeline thread that counts itself in `control` until it ends (also if
/// it unwinds), as `SCHED_BATCH` when `batch` (src/thread_policy.rs).
fn spawn(
    control: &Arc<Control>,
    name: &'static str,
    batch: bool,
    body: impl FnOnce() + Send + 'static,
) -> Result<native::JoinHandle<()>> {
    struct Exit(Arc<Control>);
    impl Drop for Exit {
        fn drop(&mut self) {
            self.0.thread_exited();
        }
    }
    control.thread_started();
    let exit = Exit(control.clone());
    native::Builder::new()
        .name(name.into())
        .spawn(move || {
            let _exit = exit;
            crate::thread_policy::yield_at_wakeup(batch);
            body();
        })
        .map_err(|e| Error::Spawn {
            thread: name,
            source: Box::new(e),
        })
}
