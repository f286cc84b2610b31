//! pinring's loom models: the slot protocol's invariants (ARCHITECTURE.md §3 and §11),
//! checked by running the crate's own feeder, decode workers, copy thread, `Pipeline` and
//! `Batch` on loom threads against a model device, with their seeded-bug twins.
//!
//! Built only with `RUSTFLAGS="--cfg pinring_loom"` (a normal build of the workspace
//! compiles nothing here). The crate's internals come through its one hidden module,
//! `pinring::model_hooks`, which exists in that build alone. Run everything with
//! `scripts/loom.sh`: the test binary `tests/models.rs` runs each model and twin in a
//! process of its own.
//!
//! - `device`: the model device, a backend whose events have CUDA's
//!   meaning and which checks the invariants;
//! - `rig`: one pipeline built by the crate's `assemble`, its stages to run
//!   on loom threads;
//! - [`models`]: the models and their table; [`explore()`]: one model under loom;
//! - [`mutation`]: the seeded protocol bugs.
#![cfg(pinring_loom)]

mod device;
mod explore;
pub mod models;
pub mod mutation;
mod rig;

pub use explore::explore;
pub use models::{model_named, Entry, MODELS};
pub use mutation::Mutation;
