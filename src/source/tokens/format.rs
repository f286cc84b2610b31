//! llm.c's two token-shard formats: [`ShardFormat`] and the header's constants.
//!
//! A shard is a header of 256 little-endian `i32` — a magic number, a version, the token
//! count, then zeros — followed by exactly that many little-endian tokens. llm.c has two
//! formats, told apart by the header:
//!
//! | format | magic | version | tokens | llm.c's name |
//! | --- | --- | --- | --- | --- |
//! | [`ShardFormat::U16`] | [`SHARD_MAGIC`] (20240520) | [`SHARD_VERSION`] (1) | `u16` | GPT-2 |
//! | [`ShardFormat::U32`] | [`SHARD_MAGIC_U32`] (20240801) | [`SHARD_VERSION_U32`] (7) | `u32` | LLaMA-3 |

use std::fmt;

/// The first header word of a shard of `u16` tokens (llm.c's GPT-2 format).
pub const SHARD_MAGIC: i32 = 20240520;
/// The header version of a shard of `u16` tokens.
pub const SHARD_VERSION: i32 = 1;
/// The first header word of a shard of `u32` tokens (llm.c's LLaMA-3 format).
pub const SHARD_MAGIC_U32: i32 = 20240801;
/// The header version of a shard of `u32` tokens.
pub const SHARD_VERSION_U32: i32 = 7;
/// Bytes of a shard's header (256 `i32`), in both formats.
pub const SHARD_HEADER_BYTES: usize = 256 * 4;

/// Which of llm.c's two shard formats a file is: the header's magic and version, and the
/// width of its tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ShardFormat {
    /// `u16` tokens: magic [`SHARD_MAGIC`], version [`SHARD_VERSION`] (llm.c's GPT-2
    /// shards, and modded-nanogpt's).
    U16,
    /// `u32` tokens: magic [`SHARD_MAGIC_U32`], version [`SHARD_VERSION_U32`] (llm.c's
    /// LLaMA-3 shards).
    U32,
}

impl ShardFormat {
    /// The format whose magic number is `magic`, if any.
    pub const fn from_magic(magic: i32) -> Option<Self> {
        match magic {
            SHARD_MAGIC => Some(ShardFormat::U16),
            SHARD_MAGIC_U32 => Some(ShardFormat::U32),
            _ => None,
        }
    }

    /// The header's first word.
    pub const fn magic(self) -> i32 {
        match self {
            ShardFormat::U16 => SHARD_MAGIC,
            ShardFormat::U32 => SHARD_MAGIC_U32,
        }
    }

    /// The header's second word.
    pub const fn version(self) -> i32 {
        match self {
            ShardFormat::U16 => SHARD_VERSION,
            ShardFormat::U32 => SHARD_VERSION_U32,
        }
    }

    /// Bytes per token: 2 or 4.
    pub const fn token_bytes(self) -> usize {
        match self {
            ShardFormat::U16 => 2,
            ShardFormat::U32 => 4,
        }
    }

    /// The token type's name, as in Rust: `u16` or `u32`.
    pub const fn name(self) -> &'static str {
        match self {
            ShardFormat::U16 => "u16",
            ShardFormat::U32 => "u32",
        }
    }

    /// The name with llm.c's: `u16 (llm.c GPT-2)` or `u32 (llm.c LLaMA-3)`.
    pub const fn describe(self) -> &'static str {
        match self {
            ShardFormat::U16 => "u16 (llm.c GPT-2)",
            ShardFormat::U32 => "u32 (llm.c LLaMA-3)",
        }
    }
}

impl fmt::Display for ShardFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
