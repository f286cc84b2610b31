//! datatrove's tokenized files (HuggingFace's `DocumentTokenizer` and `TokenizedFile`):
//! `<name>.ds`, the tokens and nothing else, and `<name>.ds.index` beside it, every
//! document's end in tokens. [`Datatrove`] is a
//! [`TokenFileFormat`](crate::source::TokenFileFormat): windows, documents and mixtures
//! read it as they read llm.c shards, and [`Documents`](crate::source::Documents) built
//! without a `bos` take the documents from the `.ds.index` (datatrove ends each document
//! with `eos`; nothing starts one). What is wrong with a pair of files as datatrove's is a
//! [`DatatroveProblem`].
//!
//! - `format.rs`: [`Datatrove`], how the pair is opened and checked, and its document
//!   starts;
//! - `problem.rs`: [`DatatroveProblem`].

mod format;
mod problem;

pub use format::Datatrove;
pub use problem::DatatroveProblem;
