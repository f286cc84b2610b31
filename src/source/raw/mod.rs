//! Raw headerless token files: little-endian `u16` or `u32` tokens and nothing else, as
//! numpy's `tofile` writes an array (llama2.c's and candle's `.bin` and nanoGPT's
//! `train.bin` hold `u16`, OLMo-core's and MaxText's token arrays `u32`). A file has no
//! header to say its token type, so the type is said ([`RawTokens::U16`],
//! [`RawTokens::U32`]); [`RawTokens`] is a [`TokenFileFormat`](crate::source::TokenFileFormat),
//! so [`TokenShards::open_as`](crate::source::TokenShards::open_as) opens the files and
//! everything token shards feed (windows, documents, mixtures) reads them. What is wrong
//! with a file as raw tokens is a [`RawProblem`].

mod format;
mod problem;

pub use format::RawTokens;
pub use problem::RawProblem;
