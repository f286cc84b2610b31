//! Packed documents from llm.c token shards, as modded-nanogpt feeds its model: each
//! batch is one step of one rank — `tokens_per_batch + 1` tokens of whole documents (each
//! starting at a `bos` token, cut at `max_seq_len`), with `inputs`, `targets`,
//! `cu_seqlens` and optionally `positions` as fields of one slot — walked exactly as
//! `distributed_data_generator(align_to_bos=True)` walks them, resumable on another world
//! size. [`Documents`] is the source; the rest is how it works:
//!
//! - `packed.rs`: [`Documents`], the handle; `builder.rs`: its builder and defaults;
//!   `packing.rs`: the step sizes, schedule, token type and `positions` as a builder (of
//!   one source or of a mixture) holds them, checked; `inner.rs`: what the source, its
//!   steps and its decoder share; `order.rs`: sequential or shuffled;
//! - `index.rs`, `scan.rs`, `ahead.rs`, `cache.rs`: where each shard's documents start
//!   (its `bos` positions, or its format's own index of them), found once per shard off
//!   the steps' path, and kept across runs if asked (`ahead_tests.rs`: the thread ahead's tests, driven through a gate);
//! - `walk.rs`, `walker.rs`, `permutation.rs`, `schedule.rs`: which pieces of which
//!   documents every rank packs into each step;
//! - `steps.rs`, `step.rs`, `decoder.rs`, `pack.rs`, `layout.rs`: the steps a pipeline
//!   pulls, and how one is packed into its slot (`pack.rs` packs any rank's pieces, a
//!   mixture's too);
//! - `fill.rs`, `by_count.rs`: the packing rule apart from any walk, and a source's
//!   documents by count (the `n`-th of its order across epochs) — what a mixture of
//!   documents walks and packs;
//! - `packing.rs`: the public [`Packing`], how steps are sized and laid out (one value a
//!   source's builder or a mixture's holds); `modes.rs`: the public [`StepModes`], how a
//!   source's steps are walked (whole documents or contiguous windows, pops per optimizer
//!   step) and what is derived into them (int64 `targets`, `bigram_inputs`, the cap);
//! - `checkpoint.rs`: the rank-agnostic state, and resuming from it; `as_source.rs`:
//!   `Documents` as a `Source` (a batch a step, its state the walk's checkpoint);
//! - `located.rs`: a row's place from its document id; `problem.rs`: what is wrong with a
//!   shard as a source of documents.

mod ahead;
mod as_source;
#[cfg(test)]
mod ahead_tests;
pub(crate) mod builder;
pub(crate) mod by_count;
mod cache;
pub(crate) mod checkpoint;
mod decoder;
pub(crate) mod fill;
pub(crate) mod index;
mod inner;
pub(crate) mod layout;
mod located;
pub(crate) mod modes;
pub(crate) mod order;
pub(crate) mod pack;
pub(crate) mod packed;
pub(crate) mod packing;
mod permutation;
mod problem;
mod scan;
pub(crate) mod schedule;
mod step;
mod steps;
pub(crate) mod walk;
mod walker;

pub use builder::{DocumentsBuilder, FILE_INDEX_BOS, GPT2_BOS, LLAMA3_BOS};
pub use checkpoint::{DocumentsCheckpoint, DOCUMENTS_CHECKPOINT_VERSION};
pub use decoder::PackDocuments;
pub use packed::Documents;
pub use packing::Packing;
pub use modes::StepModes;
pub use index::IndexStats;
pub use order::DocOrder;
pub use problem::DocumentProblem;
pub use schedule::{modded_max_docs, modded_max_docs_formula, Schedule, StepSizes, MAX_TOKENS_PER_BATCH};
pub use step::DocStep;
pub use steps::Steps;
pub use walk::{Cursor, Piece};
