//! Sampling, shared by every format: which windows of a [`Segmented`](segmented::Segmented)
//! source an epoch visits, in which [`Order`](order::Order), on which rank; the iterator,
//! its positions and the rank-agnostic [`Checkpoint`](checkpoint::Checkpoint); the
//! [`FileSet`](file_set::FileSet) every file format is, and the generic
//! [`Window`](window::Window) it yields, whose reads every format shares.
//!
//! - `segmented.rs`: the source side — [`Segmented`](segmented::Segmented) sets of segments
//!   of units, the `WindowSpec` a sampler asks them for, the `Identified` windows they give;
//! - `file_set.rs`: `FileSet`, one or more files of one format, and what each passes when
//!   opened;
//! - `window.rs`, `window_sample.rs`: the generic `Window<F>` of a file format, its
//!   `SegmentFile` and its reads; `window_sample!`, the `Decode` items every window decoder
//!   writes alike;
//! - `order.rs`: sequential, shuffled or random; `rng.rs`: the fixed random streams;
//! - `sampler.rs`, `sampler_builder.rs`, `sampler_inner.rs`: the `Sampler` (epochs, ranks,
//!   ids, checkpoints, resume), its builder, and what it shares with its iterators (the
//!   grid, each rank's share, the position arithmetic);
//! - `run_settings.rs`: rank, world size, batch size, start step and skipped steps as a
//!   builder holds them, and their one check into the `CheckedRun` a built source holds;
//! - `samples.rs`: the iterator and its `Position`; `steps.rs`, `skip.rs`: the step
//!   arithmetic (where a step starts, a run's place after `n` samples) and the skipped
//!   ranges;
//! - `checkpoint.rs`, `checkpoint_text.rs`, `difference.rs`: the `Checkpoint` and its
//!   `Fingerprint`, reading any state's JSON text, the first field in which two states
//!   differ (for every mismatch error);
//! - `located.rs`: a window's place from its id (`Locate`);
//! - `window_format.rs`: `WindowFormat`, what a format of windows or records implements;
//! - `as_source.rs`: a `Sampler` as a `Source`, written once for every `WindowFormat`.

pub(crate) mod as_source;
pub(crate) mod checkpoint;
pub(crate) mod checkpoint_text;
pub(crate) mod difference;
pub(crate) mod file_set;
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
pub(crate) mod window_format;
pub(crate) mod window_sample;
