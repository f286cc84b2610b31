//! llm.c token shards (the `.bin` files of llm.c and the modded-nanogpt speedrun): the
//! format and its problems, one shard and the set of shards, what a window of one reads,
//! the writer, and the token decoders.
//!
//! - `format.rs`: `ShardFormat` and the header's constants; `problem.rs`: `ShardProblem`,
//!   what is wrong with a file as a shard;
//! - `shard.rs`: one shard (`TokenShard`), checked when opened, read by position;
//!   `shards.rs`: the set (`TokenShards`), a `Segmented` source and its `WindowFormat`;
//! - `window.rs`: what a window of a shard reads (`Window<TokenShard>`'s methods);
//! - `token_type.rs`: the integer type the decoders write (`TokenType`); `decoders.rs`:
//!   `Tokens` and `NextToken`; `widen.rs`: widening from the read chunk into the slot;
//! - `writer.rs`: `ShardWriter`, `write_shard`, `write_shard_u32`.

mod decoders;
mod format;
mod problem;
mod shard;
mod shards;
mod token_type;
pub(crate) mod widen;
mod window;
mod writer;

pub use decoders::{NextToken, Tokens};
pub use format::{
    ShardFormat, SHARD_HEADER_BYTES, SHARD_MAGIC, SHARD_MAGIC_U32, SHARD_VERSION,
    SHARD_VERSION_U32,
};
pub use problem::ShardProblem;
pub use shard::TokenShard;
pub use shards::TokenShards;
pub use token_type::TokenType;
pub use writer::{write_shard, write_shard_u32, ShardToken, ShardWriter};
