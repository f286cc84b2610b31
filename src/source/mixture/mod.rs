//! Mixtures: several sources of one kind mixed by weight into one global sequence that
//! every rank shards, with rank-agnostic states that resume on any world size (and with
//! new weights), steps to start at and skip, and rows that say where they came from.
//!
//! The parts that do not depend on the kind of source — the blend rule ([`Blend`], over
//! the weights' history), the walk of the global sequence with its stop rule, and the
//! state's layout ([`MixtureState`], generic over a source's own state) — are apart from
//! [`Mixture`], which mixes samplers' windows sample by sample. A mixture of packed
//! documents mixes per document with the same rule and state, then packs.

mod blend;
mod builder;
mod decoder;
mod inner;
mod located;
mod member;
mod mix;
mod samples;
mod state;
mod stop;
mod walk;

pub use blend::Blend;
pub use builder::MixtureBuilder;
pub use decoder::MixedDecoder;
pub use mix::Mixture;
pub use samples::{MixedSample, MixedSamples};
pub use state::{MixtureState, WeightSpan, MIXTURE_STATE_VERSION};
pub use stop::Stop;
