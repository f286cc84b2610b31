//! Sampling, shared by every format: which windows of a [`Segmented`](segmented::Segmented)
//! source an epoch visits, in which [`Order`](order::Order), on which rank; the iterator,
//! its positions and the rank-agnostic [`Checkpoint`](checkpoint::Checkpoint); the generic
//! [`Window`](window::Window) the file formats yield.

pub(crate) mod as_source;
pub(crate) mod checkpoint;
pub(crate) mod checkpoint_text;
pub(crate) mod difference;
pub(crate) mod located;
pub(crate) mod order;
pub(crate) mod rng;
pub(crate) mod sampler;
pub(crate) mod sampler_builder;
pub(crate) mod sampler_inner;
pub(crate) mod samples;
pub(crate) mod segmented;
pub(crate) mod skip;
pub(crate) mod steps;
pub(crate) mod window;
pub(crate) mod window_sample;
