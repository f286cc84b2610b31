//! The one place that names std's atomics, cells, threads and clock.
//!
//! Shaped like tokio's `loom` module: this file selects, [`real`](self) holds std's
//! primitives, and under `RUSTFLAGS="--cfg pinring_loom"` `mocked.rs` swaps in loom's
//! model-checked ones (plus a logical clock and the model's park/unpark), so the protocol
//! code reads the same in both builds and runs unchanged under the model checker. The one
//! behaviour switch the protocol code honours for a model (a thread whose wake-ups are
//! suppressed) lives in `mocked.rs`; no stage file names the cfg.
//!
//! [`native`] is std in both builds: it serves the cpu backend's emulated device and the
//! statistics, which the models replace or need not explore.
//!
//! Files: `real.rs` (std's primitives; rtrb as the ready ring), `mocked.rs` (loom's, the
//! logical clock, park/unpark, `suppress_wakes`), `mocked_spsc.rs` (the ready ring on the
//! shim's atomics, for the models).

#[cfg(not(pinring_loom))]
mod real;
#[cfg(not(pinring_loom))]
pub(crate) use real::*;

// `pub(crate)` so that `model_hooks` can re-export `suppress_wakes` from where it is defined.
#[cfg(pinring_loom)]
pub(crate) mod mocked;
#[cfg(pinring_loom)]
pub(crate) mod mocked_spsc;
#[cfg(pinring_loom)]
pub(crate) use mocked::*;
#[cfg(pinring_loom)]
pub(crate) use mocked_spsc as spsc;

/// std's primitives, never switched to loom.
#[allow(unused_imports)] // which of these a build uses depends on its features
pub(crate) mod native {
    pub(crate) use std::cell::UnsafeCell;
    pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};
    pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
    pub(crate) use std::thread::{current as current_thread, sleep, Builder, JoinHandle, ThreadId};
    pub(crate) use std::thread_local;
    pub(crate) use std::time::Instant;

    /// The calling thread's id, kept in a thread-local: `current_thread().id()` takes (and
    /// drops) a counted handle on the thread each time, on the release path. While the
    /// thread's locals are torn down (a batch dropped by another local's destructor), the
    /// handle's way.
    #[cfg(feature = "cuda")]
    pub(crate) fn current_thread_id() -> ThreadId {
        thread_local!(static ID: ThreadId = current_thread().id());
        ID.try_with(|id| *id)
            .unwrap_or_else(|_| current_thread().id())
    }
}
