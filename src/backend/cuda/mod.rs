//! The cuda backend: a pinned host ring, side-stream H2D copies and event-fenced device
//! slots, through the CUDA driver API (cudarc, loaded at run time).
//!
//! In layers, as cudarc's own `driver::{sys, result, safe}`: `driver` loads libcuda and
//! names failed calls; `context` opens the pipeline's context and binds it for a call
//! without disturbing the caller's; `resources` owns every driver resource (RAII, each
//! freed in its context); `backend` is the [`Cuda`](crate::Cuda) backend, `fence` what it keeps of a release and a bound stream; `completion` its
//! thread that follows the copies and publishes the copy count; `copies` how a run's bytes
//! are enqueued (per piece, or batched); `options` how a pipeline chooses its device and
//! its copy calls ([`CudaOptions`](crate::CudaOptions), [`CudaDevice`](crate::CudaDevice),
//! [`CopyCalls`](crate::CopyCalls)); `handles` are the caller's
//! [`CuStream`](crate::CuStream) and [`CuEvent`](crate::CuEvent). The cudarc
//! interop of a batch (`view_on`, `ready_event`, `release_on`) is in `src/batch/cuda.rs`.
//! Driver calls go through cudarc's `result` layer where it has one.
//!
//! What the backend holds, its release fences, the poison mode, contexts, teardown and a
//! missing driver are documented on [`Cuda`](crate::Cuda), the public face of this module.

pub(crate) mod backend;
mod completion;
mod context;
mod copies;
mod driver;
pub(crate) mod fence;
pub(crate) mod handles;
pub(crate) mod options;
mod resources;
