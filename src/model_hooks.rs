//! What the loom models (`loom-tests/`, a member of this workspace) reach inside the
//! crate. Built only with `RUSTFLAGS="--cfg pinring_loom"` and hidden from the docs: not
//! part of the public API, and absent from every normal build (the pattern tokio uses for
//! its fuzz hooks). See ARCHITECTURE.md §11.
//!
//! It holds three things and nothing else:
//! - the private backend trait and the types its operations take, so that the model
//!   device can implement a backend ([`Ops`] and what it names, and the [`CopyCount`] a
//!   backend publishes and `Batch::synchronize` waits on);
//! - the crate's own stages, built by the constructor [`Pipeline::new`] uses, for a model
//!   to run on loom threads of its own ([`assemble`]);
//! - what a model checks or seeds that no public call gives: the batch tokens still in
//!   the ready ring ([`unpopped_batches`]) and a thread whose wake-ups reach nobody
//!   ([`suppress_wakes`]).

use std::fmt;

pub use crate::backend::bound::BoundStreams;
pub use crate::backend::contract::{
    Backend, CopyFailed, CopyRole, CopyRun, CopyWaker, Layout, Ops, POISON_BYTE,
};
pub use crate::backend::copy_count::CopyCount;
pub use crate::host_ring::HostRing;
pub use crate::slot::index::{DeviceIdx, HostIdx};
pub use crate::sync::mocked::suppress_wakes;

use crate::config::Config;
use crate::decode::Decode;
use crate::error::Result;
use crate::pipeline::start::Parts;
use crate::pipeline::Pipeline;
use crate::ready_ring::Token;
use crate::sync::native::Arc;

/// Host slot `h`'s position in the ring.
pub fn host_index(h: HostIdx) -> usize {
    h.0
}

/// Device slot `d`'s position among the device slots.
pub fn device_index(d: DeviceIdx) -> usize {
    d.0
}

/// One stage of a pipeline, to run once on a thread of the model's choosing.
pub struct Stage(Box<dyn FnOnce() + Send>);

impl Stage {
    /// Runs the stage to its end.
    pub fn run(self) {
        (self.0)()
    }
}

impl fmt::Debug for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Stage")
    }
}

/// A pipeline whose threads are not started: its consumer side and its stages.
pub struct Stages<B: Backend> {
    /// The consumer's side: the real `Pipeline`, owning no thread.
    pub pipeline: Pipeline<B>,
    /// The feeder, over the source.
    pub feeder: Stage,
    /// One decode worker's loop; run it on as many threads as the model wants workers.
    pub decoder: Arc<dyn Fn() + Send + Sync>,
    /// The copy thread.
    pub copier: Stage,
}

impl<B: Backend> fmt::Debug for Stages<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stages")
            .field("pipeline", &self.pipeline)
            .finish_non_exhaustive()
    }
}

/// Builds a pipeline with the crate's own constructor (the one [`Pipeline::new`] uses),
/// decode items of `item_samples` samples each, and hands out its feeder, decode worker
/// and copy thread instead of starting them.
pub fn assemble<B, D, I>(
    mut config: Config<B>,
    item_samples: usize,
    decoder: D,
    samples: I,
) -> Result<Stages<B>>
where
    B: Backend,
    D: Decode,
    I: IntoIterator<Item = D::Sample>,
    I::IntoIter: Send + 'static,
{
    config.decode_item_samples = Some(item_samples);
    let Parts {
        pipeline,
        feeder,
        decode,
        copier,
    } = crate::pipeline::start::assemble(&config, decoder, samples)?;
    Ok(Stages {
        pipeline,
        feeder: Stage(Box::new(move || feeder.run())),
        decoder: Arc::new(move || decode.run_worker()),
        copier: Stage(Box::new(move || copier.run())),
    })
}

/// Takes the batch tokens still in the ready ring (made but never handed out) and counts
/// them. Call once the copy thread has ended.
pub fn unpopped_batches<B: Backend>(pipeline: &mut Pipeline<B>) -> u64 {
    let mut n = 0;
    while let Some(token) = pipeline.ready.pop() {
        n += u64::from(matches!(token, Token::Batch { .. }));
    }
    n
}
