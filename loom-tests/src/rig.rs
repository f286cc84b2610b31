//! The rig: one pipeline on the model device, built by the same constructor as
//! [`Pipeline::new`], whose stages a model runs on loom threads of its own.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use loom::thread::{self, JoinHandle};
use pinring::model_hooks::{assemble, suppress_wakes, unpopped_batches, Stage, Stages};
use pinring::{
    Batch, Config, Decode, DecodeError, Describe, Dtype, Fields, LastBatch, Pipeline, Row,
    StopHandle,
};

use crate::device::{Device, Model, ModelOptions, ModelStream};
use crate::mutation::{mutation, Mutation};

/// Bytes of one sample: its id, little-endian.
pub(crate) const SAMPLE_BYTES: usize = 8;

/// Marks a sample that carries its epoch: `EPOCH | epoch << 32 | id`.
const EPOCH: u64 = 1 << 63;

/// Sample `id` of epoch `epoch`, as a source with epochs yields it.
pub(crate) fn with_epoch(id: u64, epoch: u64) -> u64 {
    EPOCH | epoch << 32 | id
}

/// The id of a sample (without its epoch, if it carries one).
pub(crate) fn id_of(sample: u64) -> u64 {
    if sample & EPOCH != 0 {
        sample & 0xffff_ffff
    } else {
        sample
    }
}

/// The shape of one model's pipeline.
#[derive(Debug, Clone)]
pub(crate) struct Spec {
    pub(crate) host_slots: usize,
    pub(crate) device_slots: usize,
    pub(crate) batch_size: usize,
    /// Samples per decode work item.
    pub(crate) item_samples: usize,
    /// The source yields sample ids `0..samples`.
    pub(crate) samples: u64,
    /// Samples carry epochs: sample `i` belongs to epoch `i / epoch_len` (see
    /// [`with_epoch`]), so a batch ends early at an epoch's end.
    pub(crate) epoch_len: Option<u64>,
    pub(crate) last_batch: LastBatch,
    /// The decoder fails on this sample id (after writing it).
    pub(crate) fail_at: Option<u64>,
    /// The decoder stops the pipeline while decoding this id (after writing it).
    pub(crate) stop_at: Option<u64>,
    pub(crate) device: ModelOptions,
    pub(crate) pop_timeout: Option<Duration>,
    pub(crate) lease_timeout: Duration,
    /// Each batch is one sample laid out as two fields ([`model_fields`]), and describes
    /// itself: a row per sample, its step and its field extents.
    pub(crate) fields: bool,
}

impl Spec {
    /// `batches` full batches of `per_batch` samples over H host and D device slots; the
    /// device notifies copy completion; one item a batch.
    pub(crate) fn new(
        host_slots: usize,
        device_slots: usize,
        per_batch: usize,
        samples: u64,
    ) -> Self {
        Spec {
            host_slots,
            device_slots,
            batch_size: per_batch,
            item_samples: per_batch,
            samples,
            epoch_len: None,
            last_batch: LastBatch::Partial,
            fail_at: None,
            stop_at: None,
            device: ModelOptions {
                notifies: true,
                ..ModelOptions::default()
            },
            pop_timeout: None,
            lease_timeout: Duration::MAX,
            fields: false,
        }
    }
}

/// The field layout of a model with fields: `a` holds the sample's id, `b` (a
/// [`pinring::FIELD_ALIGN`] further) the id again and the id plus one, so that a batch
/// whose fields came from two copies (or two batches) shows it.
pub(crate) fn model_fields() -> Fields {
    Fields::new()
        .array("a", Dtype::I64, 1, 0)
        .array("b", Dtype::I64, 2, 1)
}

/// A model's pipeline: its consumer side, its device, and its stages, which the model runs
/// where it wants them (each on the model's own thread, to its end, or on a loom thread of
/// its own) and which [`Rig::finish`] joins.
pub(crate) struct Rig {
    pub(crate) pipeline: Pipeline<Model>,
    pub(crate) device: Arc<Device>,
    /// The feeder, over the source, until it runs.
    feeder: Option<Stage>,
    /// One decode worker's loop, until it goes to threads of its own. Where the model runs
    /// it on its own thread the model keeps it to the end (see [`Rig::finish`]).
    decoder: Option<Arc<dyn Fn() + Send + Sync>>,
    /// The copy thread, until it runs.
    copier: Option<Stage>,
    /// The stages started on threads of their own, in the order they started.
    threads: Vec<JoinHandle<()>>,
}

impl Rig {
    /// Runs the feeder on the calling thread, to the source's end (or until the stages end).
    pub(crate) fn feed(&mut self) {
        self.feeder.take().expect("the feeder runs once").run();
    }

    /// Starts the feeder on a thread of its own.
    pub(crate) fn spawn_feeder(&mut self) {
        let feeder = self.feeder.take().expect("the feeder runs once");
        self.threads.push(thread::spawn(move || feeder.run()));
    }

    /// Runs one decode worker on the calling thread, until there is nothing left to decode.
    pub(crate) fn decode(&self) {
        self.decoder.as_ref().expect("the decoder is still here")();
    }

    /// Starts `workers` decode workers, each on a thread of its own. They hold the decode
    /// loop's last references: the last worker to end drops it, as in the pipeline.
    pub(crate) fn spawn_decoders(&mut self, workers: usize) {
        let decoder = self.decoder.take().expect("the decoders start once");
        let mut clones: Vec<_> = (1..workers).map(|_| decoder.clone()).collect();
        for decoder in std::iter::once(decoder).chain(clones.drain(..)) {
            self.threads.push(thread::spawn(move || decoder()));
        }
    }

    /// Starts the copy thread.
    pub(crate) fn spawn_copier(&mut self) {
        let copier = self.copier.take().expect("the copy thread starts once");
        self.threads.push(thread::spawn(move || copier.run()));
    }

    /// The host side first, to the source's end, on the calling thread (the feeder, then
    /// one decode worker), then the copy thread on a thread of its own: the consumer's
    /// pops race only the copy thread.
    pub(crate) fn host_side_then_copier(&mut self) {
        self.feed();
        self.decode();
        self.spawn_copier();
    }

    /// The feeder first, to the source's end, on the calling thread; then `workers`
    /// decode workers and the copy thread, each on a thread of its own.
    pub(crate) fn feed_then_spawn(&mut self, workers: usize) {
        self.feed();
        self.spawn_decoders(workers);
        self.spawn_copier();
    }

    /// Joins the stages' threads started so far, in the order they started.
    pub(crate) fn join_stages(&mut self) {
        for stage in self.threads.drain(..) {
            stage.join().unwrap();
        }
    }

    /// Joins the stages' threads, then checks that the ready ring holds no batch that was
    /// made but never handed out.
    pub(crate) fn assert_all_popped(&mut self) {
        self.join_stages();
        assert_eq!(
            unpopped_batches(&mut self.pipeline),
            0,
            "batches never popped"
        );
    }

    /// Joins the stages' threads and drops the pipeline; returns the device, which batches
    /// still out may go on using.
    pub(crate) fn close(mut self) -> Arc<Device> {
        self.join_stages();
        drop(self.pipeline);
        self.device
    }

    /// Ends the model: [`close`](Rig::close)s it, lets the device run what is queued, and
    /// checks that `batches` tokens were handed out and each released exactly once. A
    /// decode loop the model ran on its own thread goes last. Returns the drained device.
    pub(crate) fn finish(mut self, batches: u64) -> Arc<Device> {
        let decoder = self.decoder.take();
        let device = self.close();
        device.drain();
        assert_eq!(
            device.leases(),
            (batches, batches),
            "every token released exactly once"
        );
        drop(decoder);
        device
    }
}

/// What the model's decoder needs once the pipeline exists.
struct Setting {
    device: Arc<Device>,
    stop: StopHandle<Model>,
}

/// Writes each sample's id into its range (into both fields, with fields), checking
/// invariant 1 first.
struct ModelDecoder {
    setting: Arc<OnceLock<Setting>>,
    fail_at: Option<u64>,
    stop_at: Option<u64>,
    fields: bool,
}

impl Decode for ModelDecoder {
    type Sample = u64;

    fn identify(sample: &u64) -> Option<(u64, u64)> {
        (sample & EPOCH != 0).then(|| (id_of(*sample), (sample & !EPOCH) >> 32))
    }

    fn describe(sample: &u64, out: &mut Describe<'_>) {
        let id = id_of(*sample);
        out.row(Row {
            id,
            len: 1,
            source: (id % 3) as u16,
        });
        out.step(id);
        out.dims(&[1, 2]);
    }

    fn decode(&self, sample: u64, out: &mut [u8]) -> Result<(), DecodeError> {
        let setting = self.setting.get().expect("set before the stages run");
        setting.device.decode_write(out);
        out[..SAMPLE_BYTES].copy_from_slice(&sample.to_le_bytes());
        if self.fields {
            let b = model_fields().get("b").expect("field b").offset;
            out[b..b + SAMPLE_BYTES].copy_from_slice(&sample.to_le_bytes());
            out[b + SAMPLE_BYTES..b + 2 * SAMPLE_BYTES]
                .copy_from_slice(&(sample + 1).to_le_bytes());
        }
        if self.stop_at == Some(sample) {
            if mutation() == Mutation::StopWithoutWake {
                suppress_wakes(); // Seeded bug: the stop wakes nobody.
            }
            setting.stop.stop();
        }
        if self.fail_at == Some(sample) {
            if mutation() == Mutation::FailWithoutWake {
                suppress_wakes(); // Seeded bug: the failure wakes nobody.
            }
            return Err(DecodeError::new(format!("sample {sample} is bad")));
        }
        Ok(())
    }
}

/// Builds a model's pipeline with the crate's own constructor. Call inside the model
/// (every loom object belongs to one execution).
pub(crate) fn rig(spec: &Spec) -> Rig {
    let mut builder = Config::builder().batch_size(spec.batch_size);
    builder = if spec.fields {
        builder.fields(model_fields())
    } else {
        builder.bytes_per_sample(SAMPLE_BYTES)
    };
    builder = builder
        .host_slots(spec.host_slots)
        .device_slots(spec.device_slots)
        .decode_threads(1)
        .spin(Duration::ZERO)
        .last_batch(spec.last_batch)
        .lease_timeout(spec.lease_timeout)
        .shutdown_timeout(Duration::MAX);
    if let Some(t) = spec.pop_timeout {
        builder = builder.pop_timeout(t);
    }
    let config = builder
        .backend::<Model>(spec.device.clone())
        .build()
        .expect("a valid model config");
    let setting = Arc::new(OnceLock::new());
    let decoder = ModelDecoder {
        setting: setting.clone(),
        fail_at: spec.fail_at,
        stop_at: spec.stop_at,
        fields: spec.fields,
    };
    let Stages {
        pipeline,
        feeder,
        decoder,
        copier,
    } = {
        let epoch_len = spec.epoch_len;
        let source = (0..spec.samples).map(move |i| match epoch_len {
            Some(len) => with_epoch(i, i / len),
            None => i,
        });
        assemble(config, spec.item_samples, decoder, source).expect("model pipeline")
    };
    let device = pipeline.backend().device.clone();
    let _ = setting.set(Setting {
        device: device.clone(),
        stop: pipeline.stop_handle(),
    });
    Rig {
        pipeline,
        device,
        feeder: Some(feeder),
        decoder: Some(decoder),
        copier: Some(copier),
        threads: Vec::new(),
    }
}

/// Enqueues on `stream` a kernel that reads `batch`'s slot (the device checks that the
/// slot still holds the batch when the kernel runs).
pub(crate) fn kernel_read(stream: &ModelStream, batch: &Batch<Model>) {
    stream.read(batch.slot(), batch.seq());
}

/// Reads `batch`'s sample ids on the host. Call after [`Batch::synchronize`].
pub(crate) fn host_read(device: &Device, batch: &Batch<Model>) -> Vec<u64> {
    ids(&device.host_read(batch.slot(), batch.seq(), batch.len()))
}

/// The batch device slot `d` holds and its sample ids (after [`Device::drain`]).
pub(crate) fn device_slot(device: &Device, d: usize) -> (Option<u64>, Vec<u64>) {
    let (holds, bytes) = device.slot(d);
    (holds, ids(&bytes))
}

fn ids(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(SAMPLE_BYTES)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}
