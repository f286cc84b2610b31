//! Data sources through the public API, by topic: the shard format, raw token files,
//! Megatron's, datatrove's and numpy's token files (`indexed.rs`, written by `writers.rs`),
//! malformed files,
//! the sampler, resume, the decoders through real pipelines, checkpoints and the data they
//! know (content fingerprints), files that change under a running loader, and reads that
//! the file system fails.

#[path = "../common/source_error.rs"]
#[macro_use]
mod source_error;

mod batch_size;
mod changed_files;
mod checkpoint;
mod content;
mod decoders;
mod failing_reads;
mod format;
mod helpers;
mod indexed;
mod malformed;
#[path = "../common/named_shards.rs"]
mod named_shards;
mod raw;
mod resume;
mod sampler;
mod writers;
