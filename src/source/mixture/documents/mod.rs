//! A mixture of packed documents: `Mixture<Documents>`. Sources of packed documents are
//! mixed document by document — the `g`-th document of the mixture's global document
//! sequence comes from the source the blend rule picks at `g`, the next document of that
//! source's own walk — and the mixed stream is packed into steps exactly as one
//! [`Documents`](crate::source::Documents) source packs its own.
//!
//! - `builder.rs`: the sources and the mixture's settings (the weights, the ranks, the
//!   step sizes: the packing belongs to the mixture);
//! - `inner.rs`: what the mixture shares with its steps and decoder; each source as walked;
//! - `stream.rs`: the mixed document stream, and one step walked over it for every rank;
//! - `steps.rs`, `step.rs`, `piece.rs`, `lists.rs`, `decoder.rs`: the steps a pipeline
//!   pulls (each a list of pieces, recycled), and their packing;
//! - `mix.rs`: runs, states and resumes; `located.rs`: a row's place.

pub(crate) mod builder;
mod decoder;
pub(crate) mod inner;
mod lists;
mod located;
mod mix;
mod piece;
mod step;
mod steps;
mod stream;

pub use builder::DocumentMixtureBuilder;
pub use decoder::PackMixedDocuments;
pub use piece::MixedPiece;
pub use step::MixedDocStep;
pub use steps::MixedSteps;
