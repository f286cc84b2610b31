//! `pinring._pinring`: the compiled half of the `pinring` Python package.
//!
//! It wraps the core crate's pipeline for PyTorch trainers, one job per module:
//! - [`loader`]: `Loader`, which forwards to one core `pinring::Loader` over a built-in
//!   source, and `EpochIterator`; [`holder`] shares the core loader with every batch,
//!   [`stats`] reads its counters; [`topology`]: `Topology`; [`rank_guard`]: `RankGuard`;
//! - [`batch`]: `Batch`, a leased slot ([`release`]: its `release()`); [`host_field`]: what `Batch.host` exports; [`field`]: `Field`, one named array of a batch of
//!   several; [`lease`] is the lease a batch shares with its fields and their DLPack
//!   exports ([`dlpack`]); [`release_forms`] reads the fences `release(event=...)` takes,
//!   duck-typed from torch or cupy objects, and [`declared_stream`] the stream
//!   `Loader(stream=...)` declares; [`fixed_views`]: the per-slot views of
//!   `Loader(fixed_views=...)` that `Batch.view()` returns (the CUDA-graph mode);
//! - [`source`]: `TokenWindows`, `FixedRecords`, `Documents`, `Mixture`: each builds the
//!   core source (`pinring::source::AnySource`) and keeps its rank for the loader;
//!   [`lineage`]: `Batch.locate()`;
//! - [`dispatch`]: the cpu and cuda backends behind one type each; [`device`]: `device=`;
//! - [`args`]: checks of plain arguments; [`state`]: the state dict ([`plain`]: a serde
//!   record as Python data); [`errors`]: the exception classes and the mapping of the
//!   core's errors onto them;
//! - [`gil`]: what may block runs with the GIL released, wherever it runs.
//!
//! Python code never runs on the pipeline's threads, and every wait (a pop, a lock, a
//! conservative release, a pipeline's teardown, from a method, a `del`, the garbage
//! collector or a DLPack deleter) happens with the GIL released. The Python package
//! `pinring` (`python/pinring/__init__.py`) re-exports everything here; the type stubs
//! (`python/pinring/_pinring.pyi`) are generated from this code by `src/bin/stub_gen.rs`,
//! built with the `stubs` feature, which makes [`stub_attrs`] pyo3-stub-gen's.
#![deny(unsafe_op_in_unsafe_fn)]

use pyo3::prelude::*;

mod args;
mod batch;
mod declared_stream;
mod device;
mod dispatch;
mod dlpack;
mod errors;
mod field;
mod fixed_views;
mod gil;
mod holder;
mod host_field;
mod lease;
mod lineage;
mod loader;
mod plain;
mod rank_guard;
mod release;
mod release_forms;
mod source;
mod state;
mod stats;
mod stub_attrs;
mod topology;

/// The module `pinring._pinring`.
#[pymodule]
fn _pinring(module: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::classes::register(module)?;
    module.add_class::<source::base::PySource>()?;
    module.add_class::<source::base::PySampler>()?;
    module.add_class::<source::token_windows::TokenWindows>()?;
    module.add_class::<source::fixed_records::FixedRecords>()?;
    module.add_class::<source::documents::Documents>()?;
    module.add_class::<source::mixture::Mixture>()?;
    module.add_class::<loader::Loader>()?;
    module.add_class::<loader::epochs::EpochIterator>()?;
    module.add_class::<batch::PyBatch>()?;
    module.add_class::<field::PyField>()?;
    module.add_class::<topology::PyTopology>()?;
    module.add_class::<rank_guard::PyRankGuard>()?;
    module.add_function(wrap_pyfunction!(state::merge_states, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

#[cfg(feature = "stubs")]
pyo3_stub_gen::module_variable!("pinring._pinring", "__version__", &str);

// The stub generator's entry: `src/bin/stub_gen.rs` calls it.
#[cfg(feature = "stubs")]
pyo3_stub_gen::define_stub_info_gatherer!(stub_info);
