//! llm.c token shards (the `.bin` files of llm.c and the modded-nanogpt speedrun): the
//! format and its problems, one shard and the set of shards, what a window of one reads,
//! the writer, and the token decoders.

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
