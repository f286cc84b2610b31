//! The packed-documents source (`pinring::source::Documents`) through the public API: its
//! walk against an independent model of modded-nanogpt's generator, the fields of real
//! pipelines against the tokens on disk, coverage and elastic resume, starting at a step
//! and skipping steps, LLaMA-3 shards, states that know their shards' contents, and every
//! bad input.

#[path = "../common/source_error.rs"]
#[macro_use]
mod source_error;

mod by_hand;
mod cache;
mod case;
mod content;
mod coverage;
mod errors;
mod field_values;
mod fields;
mod helpers;
mod llama;
mod locate;
mod model;
mod node_lock;
mod packing;
mod seek;
mod sizes;
mod skips;
mod speedrun;
mod walk;
