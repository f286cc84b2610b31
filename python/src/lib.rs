//! `pinring._pinring`: the compiled half of the `pinring` Python package.
//!
//! It wraps the core crate's pipeline for PyTorch trainers: [`loader::Loader`] runs a
//! `pinring::Pipeline` on the cpu or cuda backend (chosen at run time from `device=`) over
//! a built-in, all-Rust source ([`source::TokenWindows`], [`source::FixedRecords`]);
//! [`batch::PyBatch`] is a DLPack producer (through `dlpark`) whose slot is released with a
//! fence duck-typed from torch or cupy objects. Python code never runs on the pipeline's
//! threads, and every wait happens with the GIL released. The Python package `pinring`
//! (`python/pinring/__init__.py`) re-exports everything here.
#![deny(unsafe_op_in_unsafe_fn)]

use pyo3::prelude::*;

mod batch;
mod device;
mod errors;
mod loader;
mod source;
mod state;

/// The module `pinring._pinring`.
#[pymodule]
fn _pinring(module: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(module)?;
    module.add_class::<source::TokenWindows>()?;
    module.add_class::<source::FixedRecords>()?;
    module.add_class::<loader::Loader>()?;
    module.add_class::<batch::PyBatch>()?;
    module.add_function(wrap_pyfunction!(state::merge_states, module)?)?;
    module.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
