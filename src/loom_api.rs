//! Models only (`cfg(pinring_loom)`): the protocol's roles, one call each, for `loom-tests/`.
//!
//! A [`Rig`] is one pipeline on the [`Model`] backend. Its stages are the crate's own code,
//! unchanged — `feeder::run`, `decode_pool::run` (decoding serially under the cfg) and
//! `copy_thread::run` — each handed out as a [`Stage`] that a model runs on a loom thread,
//! or first on the model's own thread when it cannot block there (a feeder with more host
//! slots than batches). The consumer is the ordinary [`Pipeline`] (`pop`, [`StopHandle`])
//! and [`Batch`] (`wait_on`, `synchronize`, `release`, drop). The device has no thread: it
//! moves when a thread waits on it, when the model steps it, or (opt-in) when the copy
//! thread polls it. The rig's pipeline owns no threads: dropping it stops the stages (as
//! `Pipeline`'s drop does) and the model joins them itself.
//!
//! A [`Mutation`] seeds a protocol bug into that same code, so that each model can show it
//! rejects it. Mutations exist only under this cfg.

use std::cell::Cell;

pub use crate::backend::model::{Device, Model, ModelEvent, ModelOptions, ModelStream};
use crate::backend::{Backend, CopyWaker, Layout};
use crate::config::{LastBatch, PAGE};
use crate::decode::Decode;
use crate::error::DecodeError;
pub use crate::error::Error;
use crate::host_ring::HostRing;
use crate::park::ParkSlot;
use crate::shared::{SampleBuffers, Shared};
use crate::sync::{native, spsc, Arc};
use crate::{copy_thread, decode_pool, feeder};
pub use crate::{Batch, Fence, Pipeline, StopHandle, TryPop};

/// A protocol bug a model can seed, to show that loom rejects it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mutation {
    /// The protocol as written.
    None,
    /// `Batch::release` publishes RELEASED before its fence is recorded (invariant 2).
    PublishBeforeRecord,
    /// The copy thread frees a host slot before its H2D has completed (invariant 1).
    FreeBeforeCopied,
    /// Stopping the pipeline wakes none of the parked threads (invariant 4).
    StopWithoutWake,
    /// A failed decode publishes FAILED but wakes neither the copy thread nor the feeder
    /// (invariant 4).
    FailWithoutWake,
}

thread_local! {
    static MUTATION: Cell<Mutation> = const { Cell::new(Mutation::None) };
}

/// Seeds `mutation` into the protocol code of the models run on this thread (loom runs a
/// model's threads on the thread that calls `loom::model`).
pub fn set_mutation(mutation: Mutation) {
    MUTATION.with(|m| m.set(mutation));
}

/// Whether `mutation` is seeded (read by the hooks in the protocol code).
pub(crate) fn mutated(mutation: Mutation) -> bool {
    MUTATION.with(|m| m.get() == mutation)
}

/// `par_iter_mut` for models: a serial iterator, since loom cannot see rayon's threads;
/// with it `decode_pool::run` is the same code in both builds.
pub(crate) trait SerialIterMut<T> {
    /// The slice's items, one after the other.
    fn par_iter_mut(&mut self) -> std::slice::IterMut<'_, T>;
}

impl<T> SerialIterMut<T> for [T] {
    fn par_iter_mut(&mut self) -> std::slice::IterMut<'_, T> {
        self.iter_mut()
    }
}

/// Bytes of one sample: its id, little-endian.
pub const SAMPLE_BYTES: usize = 8;

/// The shape of one model's pipeline.
#[derive(Debug, Clone)]
pub struct Spec {
    /// Host slots (H).
    pub host_slots: usize,
    /// Device slots (D).
    pub device_slots: usize,
    /// Samples per batch.
    pub samples_per_batch: usize,
    /// The source yields sample ids `0..samples`.
    pub samples: u64,
    /// The decoder fails on this sample id (after writing it).
    pub fail_at: Option<u64>,
    /// The decoder stops the pipeline (through a [`StopHandle`]) while decoding this id
    /// (after writing it).
    pub stop_at: Option<u64>,
    /// The copy thread's completion polls step the device (see [`ModelOptions`]).
    pub step_on_poll: bool,
}

/// A model's pipeline: its consumer side, its stages and its device.
pub struct Rig {
    /// The consumer side.
    pub pipeline: Pipeline<Model>,
    /// `feeder::run` over the source.
    pub feeder: Stage,
    /// `decode_pool::run` with the model's decoder.
    pub decoder: Stage,
    /// `copy_thread::run`.
    pub copier: Stage,
    /// The device: its streams, events, steps and checks.
    pub device: Arc<Device>,
}

/// One stage of the pipeline, to run on a thread.
pub struct Stage(Box<dyn FnOnce() + Send>);

impl Stage {
    /// Runs the stage until it ends.
    pub fn run(self) {
        (self.0)()
    }
}

/// The model's decoder: writes each sample's id into its range, checking invariant 1 first.
struct ModelDecoder {
    device: Arc<Device>,
    ring: native::Arc<HostRing>,
    fail_at: Option<u64>,
    stop_at: Option<(u64, StopHandle<Model>)>,
}

impl Decode for ModelDecoder {
    type Sample = u64;

    fn decode(&self, sample: u64, out: &mut [u8]) -> Result<(), DecodeError> {
        let h = (out.as_ptr() as usize - self.ring.base() as usize) / self.ring.stride();
        self.device.decode_write(h);
        out[..SAMPLE_BYTES].copy_from_slice(&sample.to_le_bytes());
        if let Some((at, stop)) = &self.stop_at {
            if *at == sample {
                stop.stop();
            }
        }
        if self.fail_at == Some(sample) {
            return Err(DecodeError::new(format!("sample {sample} is bad")));
        }
        Ok(())
    }
}

/// Builds a model's pipeline. Call inside the model (every loom object is per execution).
pub fn rig(spec: &Spec) -> Rig {
    let (host_slots, device_slots) = (spec.host_slots, spec.device_slots);
    let batch_bytes = spec.samples_per_batch * SAMPLE_BYTES;
    assert!(batch_bytes <= PAGE);
    let ring = native::Arc::new(HostRing::new(host_slots, PAGE, false).expect("host ring"));
    let copier = native::Arc::new(ParkSlot::new());
    let layout = Layout {
        batch_bytes,
        host_slots,
        device_slots,
    };
    let options = ModelOptions {
        step_on_poll: spec.step_on_poll,
    };
    let backend = Model::open(&options, ring.clone(), layout, CopyWaker(copier.clone()))
        .expect("model backend");
    let device = backend.device();
    let shared = Arc::new(Shared::new(
        backend,
        ring.clone(),
        copier,
        device_slots,
        spec.samples_per_batch,
        SAMPLE_BYTES,
        0,
    ));
    let (producer, consumer) = spsc::channel(device_slots + 1);
    let buffers = Arc::new(SampleBuffers::new(host_slots, spec.samples_per_batch));
    let pipeline = Pipeline::for_model(shared.clone(), consumer);
    let decoder = ModelDecoder {
        device: device.clone(),
        ring,
        fail_at: spec.fail_at,
        stop_at: spec.stop_at.map(|at| (at, pipeline.stop_handle())),
    };
    let feeder = {
        let (shared, buffers, samples) = (shared.clone(), buffers.clone(), 0..spec.samples);
        Stage(Box::new(move || {
            feeder::run(&shared, &buffers, samples, LastBatch::Partial)
        }))
    };
    let decoder = {
        let shared = shared.clone();
        Stage(Box::new(move || {
            decode_pool::run(&shared, &buffers, &decoder)
        }))
    };
    let copier = Stage(Box::new(move || copy_thread::run(&shared, producer)));
    Rig {
        pipeline,
        feeder,
        decoder,
        copier,
        device,
    }
}

/// Enqueues on `stream` a kernel that reads `batch`'s device slot (the device checks that
/// the slot still holds the batch when the kernel runs).
pub fn kernel_read(stream: &ModelStream, batch: &Batch<Model>) {
    stream.read(batch.slot, batch.seq);
}

/// Reads `batch`'s sample ids on the host. Call after [`Batch::synchronize`]; the device
/// checks that the batch's H2D has completed.
pub fn host_read(batch: &Batch<Model>) -> Vec<u64> {
    let device = batch.shared.backend.device();
    ids(&device.host_read(batch.slot, batch.seq, batch.len))
}

/// The batch device slot `d` holds and its sample ids (after [`Device::drain`]).
pub fn device_slot(device: &Device, d: usize) -> (Option<u64>, Vec<u64>) {
    let (holds, bytes) = device.slot(d);
    (holds, ids(&bytes))
}

fn ids(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(SAMPLE_BYTES)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
        .collect()
}

/// Takes the batch tokens still in `pipeline`'s ready ring (never handed out). Call once
/// the copy thread has ended.
pub fn unpopped(pipeline: &mut Pipeline<Model>) -> u64 {
    pipeline.unpopped()
}
