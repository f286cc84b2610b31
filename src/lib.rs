//! pinring keeps a GPU training loop fed.
//!
//! Rayon decode workers write samples straight into an mmap-backed host ring (pinned
//! with the CUDA backend); a dedicated copy thread drives host-to-device copies on a side
//! stream into a small pool of device slots; a lock-free SPSC ring hands the consumer
//! slot tokens in sequence order; and a slot is reused only once the consumer's release
//! fence says the device is done with it — waited on stream-side, never by blocking the
//! host. The protocol is written down in `ARCHITECTURE.md` and model-checked with loom.
//!
//! A trainer holds a [`Loader`]: the run of a [`Source`](source::Source) (token windows,
//! fixed-size records, packed documents, a mixture of any of them; see [`source`]) over
//! that pipeline. The batch size is stated once, on the loader, with the rank and world
//! size, the epochs, a start step and skipped steps; [`Loader::state`] is one rank-agnostic
//! [`State`] to save with the weights and resume from on any world size.
//!
//! ```
//! use pinring::source::{write_shard, Order, TokenShards};
//! use pinring::{Fence, Loader, State};
//!
//! # let dir = std::env::temp_dir().join(format!("pinring-crate-doc-{}", std::process::id()));
//! # std::fs::create_dir_all(&dir).unwrap();
//! write_shard(dir.join("train_000.bin"), &(0..10_000u16).collect::<Vec<_>>())?;
//! // Windows of 65 tokens (64 inputs, 64 targets shifted by one), a new order each epoch.
//! let source = TokenShards::glob(dir.join("train_*.bin"))?
//!     .windows(65)
//!     .order(Order::Shuffled { seed: 1 })
//!     .build()?;
//! let loader = |rank, world| {
//!     Loader::builder(source.clone()).batch_size(8).rank(rank).world_size(world)
//! };
//!
//! // Two ranks take 3 steps each; their states are one.
//! let mut states = Vec::new();
//! for rank in 0..2 {
//!     let mut run = loader(rank, 2).decode_threads(1).build()?;
//!     for step in 0..3 {
//!         let batch = run.pop()?.expect("no epoch cap: endless");
//!         assert_eq!(batch.step(), Some(step));
//!         // On the cpu backend the slot is ordinary memory: 8 windows of 65 i32 tokens.
//!         assert_eq!(batch.bytes().len(), 8 * 65 * 4);
//!         batch.release(Fence::Sync).expect("a Sync fence always captures");
//!     }
//!     states.push(run.state());
//! }
//! let state = State::from_text(&State::merge(&states)?.to_text())?;
//! // Three ranks go on from step 3.
//! let mut rank2 = loader(2, 3).resume(&state).build()?;
//! assert_eq!(rank2.pop()?.expect("a batch").step(), Some(3));
//! # std::fs::remove_dir_all(&dir).unwrap();
//! # Ok::<(), pinring::Error>(())
//! ```
//!
//! Beneath the loader, [`Pipeline`] is the transport: any iterator of samples, any
//! [`Decode`], batched as a [`Config`] says, with nothing of epochs, ranks or states.
//!
//! ```
//! use pinring::{decode_fn, Config, Fence, Pipeline};
//!
//! // Each sample is a u32 id; "decoding" writes 64 little-endian copies of it.
//! let decoder = decode_fn(|id: u32, out: &mut [u8]| {
//!     for chunk in out.chunks_exact_mut(4) {
//!         chunk.copy_from_slice(&id.to_le_bytes());
//!     }
//!     Ok(())
//! });
//! let config = Config::builder().batch_size(8).bytes_per_sample(256).decode_threads(2).build()?;
//! let mut pipeline = Pipeline::new(config, decoder, 0..100u32)?;
//!
//! let mut seen = 0;
//! while let Some(batch) = pipeline.pop()? {
//!     // On the cpu backend the device slot is ordinary memory.
//!     let first = u32::from_le_bytes(batch.bytes()[..4].try_into().unwrap());
//!     assert_eq!(first, batch.seq() as u32 * 8);
//!     seen += batch.samples();
//!     batch.release(Fence::Sync).expect("a Sync fence always captures");
//! }
//! assert_eq!(seen, 100); // 12 full batches and a short one of 4
//! # Ok::<(), pinring::Error>(())
//! ```

mod backend;
mod batch;
mod cadence;
mod config;
mod control;
mod copy_thread;
mod decode;
mod decode_pool;
mod describe;
mod device_side;
mod error;
mod feeder;
mod feeding;
mod fields;
mod host_kept;
mod host_ring;
mod loader;
mod locate;
// For the loom models in `loom-tests/` only (see its docs): built with `--cfg pinring_loom`
// alone, not part of the public API.
#[cfg(pinring_loom)]
#[doc(hidden)]
pub mod model_hooks;
mod park;
mod pipeline;
mod rank_guard;
mod ready_ring;
mod row;
mod setters;
mod slot;
pub mod source;
mod source_tally;
mod stats;
mod sync;
mod thread_policy;
mod topology;
mod trace;

pub use backend::contract::Backend;
pub use backend::cpu::event::CpuEvent;
pub use backend::cpu::stream::CpuStream;
pub use backend::cpu::{Cpu, CpuDevicePtr, CpuOptions};
#[cfg(feature = "cuda")]
pub use backend::cuda::backend::Cuda;
#[cfg(feature = "cuda")]
pub use backend::cuda::handles::{CuEvent, CuStream};
#[cfg(feature = "cuda")]
pub use backend::cuda::options::{CopyCalls, CudaDevice, CudaOptions};
pub use backend::fence::Fence;
#[cfg(feature = "cuda")]
pub use batch::cuda::BatchView;
pub use batch::view::Element;
pub use batch::{Batch, FieldAt, ReleaseError};
pub use config::{Config, ConfigBuilder, LastBatch, NodeShare};
/// The cudarc this crate was built with, for the [`CuStream`] / [`CuEvent`] conversions
/// and [`Batch::view_on`](crate::Batch) (feature `cuda`).
#[cfg(feature = "cuda")]
pub use cudarc;
pub use decode::{decode_fn, Decode, DecodeFn};
pub use describe::Describe;
pub use error::rank::RankError;
pub use error::view::ViewError;
pub use error::{ConfigError, DecodeError, Error, Result, Stage};
pub use fields::{Dtype, Field, Fields, FIELD_ALIGN};
pub use host_ring::HugePages;
pub use loader::builder::LoaderBuilder;
pub use loader::states::RunStates;
pub use loader::{EpochIter, Loader};
pub use locate::{Locate, Location};
pub use pipeline::{Pipeline, StopHandle, TryPop};
pub use rank_guard::{RankGuard, RankRecord, RankReport, RANK_LANES};
pub use row::{Row, MAX_DIMS};
pub use slot::stamp::{DeviceState, HostState};
pub use source::State;
pub use source_tally::{SourceStats, SourceTally};
pub use stats::{Bottleneck, StageTimes, Stats};
pub use topology::Topology;
pub use trace::cycle::{Handoff, SlotCycle, SlotTimeline};

/// The README, as the crate's guide: quick start, release patterns, the sizing guide,
/// formats, token shards, several ranks and states, packed documents, distributed training,
/// from a Rust trainer, mixing datasets, tracing a loss spike, the transport layer, Stats
/// and the timeline, example tools.
/// Its examples run as doc tests, in builds with the `cuda` feature (its GPU example is a
/// whole program, with nothing hidden from a reader on GitHub, so it needs the feature).
#[cfg_attr(feature = "cuda", doc = include_str!("../README.md"))]
pub mod guide {}
