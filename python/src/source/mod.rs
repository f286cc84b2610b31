//! The built-in sources, one file per Python class ([`token_windows`], [`fixed_records`],
//! [`documents`]), and what they share: the element type and row shape ([`dtype`]), the
//! sampling arguments ([`sampling`]), paths and globs ([`paths`]), token shards and the
//! `dtype` argument ([`shards`]), and what a loader needs from a source ([`spec`]). All of
//! it is Rust: files are opened and checked when the source is made, and the pipeline's
//! threads never call into Python.

pub(crate) mod documents;
pub(crate) mod dtype;
pub(crate) mod fixed_records;
pub(crate) mod paths;
pub(crate) mod sampling;
pub(crate) mod shards;
pub(crate) mod spec;
pub(crate) mod token_windows;
