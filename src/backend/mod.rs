//! Device backends: where device slots live and how copies and fences run.
//!
//! A backend owns the device side of one pipeline: the device slots, the copy stream,
//! the per-slot READY points (recorded after each copy into a slot), the per-host-slot
//! COPIED points (complete when the copy out of a host slot is done) and whatever it needs
//! to capture a consumer's release fence. This is the crate's lowest layer above the host
//! ring and the slot indices: nothing here names the config, the batch or the crate root.
//!
//! - `contract.rs`: the public, sealed [`Backend`](contract::Backend), the private `Ops`
//!   the pipeline drives, and what they exchange; the threading contract;
//! - `fence.rs`: [`Fence`](fence::Fence), the consumer's release forms, and how each one
//!   feeds the capture operations;
//! - `bound.rs`: the streams a batch was bound to with `wait_on` (fixed capacity);
//! - `copy_count.rs`: how many batches' copies have completed, and the parked waits on it
//!   (`Batch::synchronize`);
//! - `cpu/`, `cuda/`: the two backends.
//!
//! Every public type here has one public path, at the crate root (`pinring::Cpu`,
//! `pinring::CpuStream`, `pinring::Fence`, ...); this module itself is private.

pub(crate) mod bound;
pub(crate) mod contract;
pub(crate) mod copy_count;
pub(crate) mod cpu;
#[cfg(feature = "cuda")]
pub(crate) mod cuda;
pub(crate) mod fence;
