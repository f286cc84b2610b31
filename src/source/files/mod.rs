//! What every format that reads files shares: opening regular files and reading them by
//! position, with the check that they did not change under the loader
//! ([`source_file`]), each file's content fingerprint ([`content`]), and file-name patterns
//! ([`glob`]).

pub(crate) mod content;
pub(crate) mod glob;
pub(crate) mod guarded_map;
pub(crate) mod source_file;
