//! Mixtures of packed documents (`Mixture<Documents>`): every rank's steps against an
//! independent model of the mixed document stream and its packing, the blend within one
//! document of its share at every prefix, exactly-once across save → merge → resume chains
//! that change the world size and the weights, `start_step` and `skip_steps`, stop rules,
//! the fields and rows of a real pipeline with `locate` read back from the shards, states
//! that know their shards' contents, and bad input.

// The single-source model of modded-nanogpt's walk (its data and shuffles), shared with
// the documents tests.
mod content;
#[allow(dead_code)]
#[path = "../../documents/model.rs"]
mod data;
mod errors;
#[path = "../../documents/field_values.rs"]
mod field_values;
mod helpers;
mod model;
mod pipeline;
mod resume;
#[path = "../../documents/sizes.rs"]
mod sizes;
// `kept_from` and `records` serve the documents tests only.
#[allow(dead_code)]
#[path = "../../documents/skips.rs"]
mod skips;
mod steps;
mod stop;
mod walk;
