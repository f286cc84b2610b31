//! The exceptions `pinring` raises: the classes ([`classes`]) and the mapping of the core's
//! errors onto them ([`from_core`]).

pub(crate) mod classes;
pub(crate) mod from_core;
