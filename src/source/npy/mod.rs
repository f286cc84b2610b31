//! numpy's `.npy` files of one 1-D integer array of tokens (`np.save`; OLMo-core's and
//! MaxText's token arrays, when saved with a header). [`Npy`] is a
//! [`TokenFileFormat`](crate::source::TokenFileFormat): windows, documents and mixtures
//! read it as they read llm.c shards. What is wrong with a file as such an array is an
//! [`NpyProblem`].
//!
//! - `format.rs`: [`Npy`], how a file is opened and checked;
//! - `header.rs`: the header (magic, version, the dict of `descr`, `fortran_order` and
//!   `shape`) as numpy's format description (`numpy.lib.format`) says it is written;
//! - `problem.rs`: [`NpyProblem`].

mod format;
mod header;
mod problem;

pub use format::Npy;
pub use problem::NpyProblem;
