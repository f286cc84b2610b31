//! Mixtures: several sources of one kind mixed by weight into one global sequence that
//! every rank shards, with rank-agnostic states that resume on any world size (and with
//! new weights), steps to start at and skip, and rows that say where they came from.
//!
//! One implementation for every kind of source, written over [`Member`](member::Member)
//! (`member.rs`), what one source of a kind does inside a mixture; [`Mixable`] names the
//! kinds and their members:
//!
//! - what every kind does alike: the blend rule ([`Blend`], `blend.rs`) and the walk of
//!   the global sequence with its stop rule (`walk.rs`, `stop.rs`, `run_origin.rs`); the
//!   settings (`settings.rs`) and the builder that checks them ([`MixtureBuilder`],
//!   `builder.rs`); what the mixture shares with its iterators and the walk of a run over
//!   whole steps (`inner.rs`, `step_walk.rs`); the state ([`MixtureState`], `state.rs`);
//!   [`Mixture`] itself, its accessors, state checks, reweighting and `Locate` (`mix.rs`);
//!   and the `Source` impl (`as_source.rs`);
//! - samplers of windows, `Mixture<S>` over segments `S`, mixed sample by sample: the
//!   member (`windows_member.rs`), its builder, run and states (`windows_mix.rs`), its
//!   samples (`windows_samples.rs`) and decoder (`windows_decoder.rs`);
//! - packed documents, `Mixture<Documents>`, mixed document by document and packed into
//!   steps as one source packs its own: the member and its packing of a step
//!   (`documents_member.rs`), its builder, run and states (`documents_mix.rs`), its steps
//!   (`documents_steps.rs`, `documents_step.rs`, their pieces `mixed_piece.rs`,
//!   `piece_lists.rs`) and decoder
//!   (`documents_decoder.rs`).

mod as_source;
pub(crate) mod blend;
mod builder;
mod documents_decoder;
mod documents_member;
mod documents_mix;
mod documents_step;
mod documents_steps;
pub(crate) mod inner;
pub(crate) mod member;
pub(crate) mod mix;
mod mixable;
mod mixed_piece;
mod piece_lists;
pub(crate) mod run_origin;
pub(crate) mod settings;
pub(crate) mod state;
mod step_walk;
pub(crate) mod stop;
pub(crate) mod stream;
pub(crate) mod walk;
mod windows_decoder;
mod windows_member;
mod windows_mix;
mod windows_samples;

pub use blend::Blend;
pub use builder::{DocumentMixtureBuilder, MixtureBuilder};
pub use documents_decoder::PackMixedDocuments;
pub use documents_step::MixedDocStep;
pub use documents_steps::MixedSteps;
pub use mix::Mixture;
pub use mixable::Mixable;
pub use mixed_piece::MixedPiece;
pub use state::{MixtureState, SourceRecord, WeightSpan, MIXTURE_STATE_VERSION};
pub use stop::Stop;
pub use windows_decoder::MixedDecoder;
pub use windows_samples::{MixedSample, MixedSamples};
