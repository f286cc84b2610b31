//! Mixtures, steps and lineage through the public API (issue 22): the blend's proportions
//! at every prefix, exactly-once across save → merge → resume chains that change the world
//! size, batch size and weights, `start_step` and `skip_steps` for samplers and mixtures
//! on every rank, stop rules, `locate` read back against the files, per-source stats,
//! states that know their files' contents, and bad input — for mixtures of windows and (in
//! `documents/`) of packed documents.

#[path = "../common/source_error.rs"]
#[macro_use]
mod source_error;

mod blend;
mod content;
mod documents;
mod errors;
mod helpers;
mod locate;
#[path = "../common/named_shards.rs"]
mod named_shards;
mod pipeline;
mod problem;
mod resume;
mod steps;
mod stop;
