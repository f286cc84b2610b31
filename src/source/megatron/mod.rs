//! Megatron-LM's indexed datasets (`MMIDIDX`), which Megatron-LM's and NeMo's
//! `preprocess_data.py` and datatrove's `MegatronDocumentTokenizer` write: a `.bin` of
//! tokens, nothing else, and a `.idx` beside it that says their type and where every
//! sequence and document lies. [`Megatron`] is a
//! [`TokenFileFormat`](crate::source::TokenFileFormat): windows, documents and mixtures
//! read it as they read llm.c shards, and [`Documents`](crate::source::Documents) built
//! without a `bos` take the documents from the `.idx`. What is wrong with a pair of files
//! as Megatron's is a [`MegatronProblem`].
//!
//! - `format.rs`: [`Megatron`], where the two files are and how they are opened;
//! - `index.rs`: the `.idx`: its header, checked when opened, and its document starts;
//! - `problem.rs`: [`MegatronProblem`].

mod format;
mod index;
mod problem;

pub use format::Megatron;
pub use problem::MegatronProblem;
