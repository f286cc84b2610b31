//! Mixtures: several sources of one kind mixed by weight into one global sequence that
//! every rank shards, with rank-agnostic states that resume on any world size (and with
//! new weights), steps to start at and skip, and rows that say where they came from.
//!
//! The parts that do not depend on the kind of source — the blend rule ([`Blend`], over
//! the weights' history), the walk of the global sequence with its stop rule, and the
//! state's layout ([`MixtureState`], generic over a source's own state) — are apart from
//! [`Mixture`]'s two kinds: `Mixture<S>` over samplers of segments `S` (`mix.rs`,
//! `builder.rs`, `samples.rs`, `decoder.rs`) mixes windows sample by sample, and
//! `Mixture<Documents>` (`documents/`) mixes packed documents document by document with
//! the same rule and state, then packs the mixed documents into steps. [`Mixable`] names
//! the kinds. Both kinds hold the same checked settings (`settings.rs`: the weights, seed,
//! ranks, stop rule and steps, with the accessors both share in `mix.rs`), given to either
//! builder as one struct with one check (`builder_settings.rs`).

mod as_source;
pub(crate) mod blend;
mod builder;
mod builder_settings;
mod decoder;
mod documents;
pub(crate) mod inner;
mod located;
mod member;
pub(crate) mod mix;
mod mixable;
pub(crate) mod run_origin;
mod samples;
pub(crate) mod settings;
pub(crate) mod state;
pub(crate) mod stop;
pub(crate) mod walk;

pub use blend::Blend;
pub use builder::MixtureBuilder;
pub use decoder::MixedDecoder;
pub use documents::{
    DocumentMixtureBuilder, MixedDocStep, MixedPiece, MixedSteps, PackMixedDocuments,
};
pub use mix::Mixture;
pub use mixable::Mixable;
pub use samples::{MixedSample, MixedSamples};
pub use state::{MixtureState, SourceRecord, WeightSpan, MIXTURE_STATE_VERSION};
pub use stop::Stop;
