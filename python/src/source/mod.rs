//! The built-in sources, one file per Python class ([`token_windows`], [`fixed_records`],
//! [`documents`], [`mixture`]), each building the core source without a run and keeping
//! its rank and world size for the loader ([`given`]; [`read`] reads a source object), and what they share: the element
//! type and row shape ([`dtype`]), the sampling arguments ([`sampling`]), paths and globs
//! ([`paths`]), token shards and the `dtype` argument ([`shards`]), the `weights`
//! argument ([`weights`]) and arguments read after the constructor checks the others
//! ([`taken_arg`]). All of it is Rust: files are opened and checked when the source is
//! made, and the pipeline's threads never call into Python.

pub(crate) mod base;
pub(crate) mod documents;
mod documents_args;
pub(crate) mod dtype;
pub(crate) mod fixed_records;
pub(crate) mod given;
pub(crate) mod mixture;
pub(crate) mod paths;
pub(crate) mod read;
pub(crate) mod sampling;
pub(crate) mod shards;
pub(crate) mod taken_arg;
pub(crate) mod token_windows;
pub(crate) mod weights;
