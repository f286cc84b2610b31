//! The stub attributes of the classes, methods and functions (`#[gen_stub_pyclass]`,
//! `#[gen_stub_pymethods]`, `#[gen_stub_pyfunction]`, with their `#[gen_stub(...)]`
//! helpers): pyo3-stub-gen's with the `stubs` feature, which the stub generator
//! (`src/bin/stub_gen.rs`) builds with; otherwise pinring-stub-attrs' stand-ins
//! (`python/stub-attrs`), which only remove the helpers, so that `pip install ./python`
//! compiles no stub generator for stubs the package already ships.

#[cfg(feature = "stubs")]
pub(crate) use pyo3_stub_gen::derive::{gen_stub_pyclass, gen_stub_pyfunction, gen_stub_pymethods};

#[cfg(not(feature = "stubs"))]
pub(crate) use pinring_stub_attrs::{gen_stub_pyclass, gen_stub_pyfunction, gen_stub_pymethods};
