//! Token files: llm.c's shards (the `.bin` files of llm.c and the modded-nanogpt speedrun)
//! — their format and problems, and the writer — and what every token format shares: one
//! file of tokens ([`TokenShard`], whatever its [`TokenFileFormat`]), the set of them
//! ([`TokenShards`]), what a window of one is, the token types and the token decoders.
//! Other token formats are folders of their own (`raw/`), each a [`TokenFileFormat`].
//!
//! - `file_format.rs`: `TokenFileFormat` and `Llmc`; `format.rs`: `ShardFormat` and the
//!   header's constants; `problem.rs`: `ShardProblem`, what is wrong with a file as a shard;
//! - `document_index.rs`: a token file's own index of its documents (`DocumentIndex`),
//!   and the rule its document ends become starts by;
//! - `shard.rs`: one file of tokens (`TokenShard`), checked when opened, read by position;
//!   `shards.rs`: the set (`TokenShards`), a `FileSet` and its `WindowFormat`;
//! - `window.rs`: what a window of a token file is (`Window<TokenShard>`'s own methods);
//! - `token_type.rs`: the integer type the decoders write (`TokenType`); `decoders.rs`:
//!   `Tokens` and `NextToken`; `widen.rs`: widening from the read chunk into the slot;
//! - `writer.rs`: `ShardWriter`, `write_shard`, `write_shard_u32`.

mod decoders;
pub(crate) mod document_index;
mod file_format;
mod format;
mod problem;
pub(crate) mod shard;
pub(crate) mod shards;
mod token_type;
pub(crate) mod widen;
mod window;
mod writer;

pub use decoders::{NextToken, Tokens};
pub use file_format::{Llmc, TokenFileFormat};
pub use format::{
    ShardFormat, SHARD_HEADER_BYTES, SHARD_MAGIC, SHARD_MAGIC_U32, SHARD_VERSION,
    SHARD_VERSION_U32,
};
pub use problem::ShardProblem;
pub use shard::TokenShard;
pub(crate) use shard::TokenLayout;
pub use shards::TokenShards;
pub use token_type::TokenType;
pub use writer::{write_shard, write_shard_u32, ShardToken, ShardWriter};
