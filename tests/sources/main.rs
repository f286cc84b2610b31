//! Data sources through the public API, by topic: the shard format, malformed files,
//! the sampler, resume, the decoders through real pipelines, checkpoints, files that
//! change under a running loader, and reads that the file system fails.

#[path = "../common/source_error.rs"]
#[macro_use]
mod source_error;

mod changed_files;
mod checkpoint;
mod decoders;
mod failing_reads;
mod format;
mod helpers;
mod malformed;
mod resume;
mod sampler;
