//! What every format that reads files shares: opening regular files and reading them by
//! position, with the check that they did not change under the loader
//! ([`source_file`], over the shared [`open_file`]); each file's content fingerprint ([`content`]); each thread's read
//! chunk, which widening reads and sequential walks go through ([`chunk`]); runs, whose
//! reads are checked once per file at their end ([`deferred`]); and file-name patterns
//! ([`glob`]).
//!
//! Nothing here maps a file or installs a signal handler: every byte comes from a positioned
//! read, whose failure is an error like any other.

pub(crate) mod chunk;
pub(crate) mod content;
pub(crate) mod deferred;
pub(crate) mod glob;
pub(crate) mod open_file;
pub(crate) mod source_file;
