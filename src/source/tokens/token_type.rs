//! [`TokenType`]: the integer type the token decoders write.

use std::fmt;

use super::format::ShardFormat;

/// The integer type tokens are written as in the batch.
///
/// The token decoders read shards of either [`ShardFormat`]. From a `u32` shard:
/// [`U32`](Self::U32) and [`I64`](Self::I64) hold every token; [`I32`](Self::I32) holds every token up to
/// `i32::MAX` (llm.c's vocabularies are far below it) and a larger token is a
/// [`DecodeError`](crate::DecodeError) naming it, never wrapped into a negative id; [`U16`](Self::U16) is
/// refused for every window (a `DecodeError`; check up front with
/// [`TokenShards::check_token_type`](crate::source::TokenShards::check_token_type)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenType {
    /// `u16`: a plain copy of a `u16` shard's tokens. Cannot hold a `u32` shard's.
    U16,
    /// `u32` (what candle's `index_select` and `gather` take): a plain copy of a `u32`
    /// shard's tokens, and holds every token of either format.
    U32,
    /// `i32` (what embedding lookups in most frameworks take). A `u32` shard's token
    /// above `i32::MAX` is a [`DecodeError`](crate::DecodeError), not a wrapped value.
    I32,
    /// `i64` (PyTorch's default index type): holds every token of either format.
    I64,
}

impl TokenType {
    /// Bytes per token.
    pub const fn bytes(self) -> usize {
        match self {
            TokenType::U16 => 2,
            TokenType::U32 | TokenType::I32 => 4,
            TokenType::I64 => 8,
        }
    }

    /// Whether this type holds every token a shard of `format` may store: false only
    /// for [`U16`](Self::U16) from [`ShardFormat::U32`]. ([`I32`](Self::I32) is accepted
    /// for `u32` shards; a token above `i32::MAX` fails at decode time.)
    pub const fn holds(self, format: ShardFormat) -> bool {
        !matches!((self, format), (TokenType::U16, ShardFormat::U32))
    }

    /// The type's name, as in Rust.
    pub const fn name(self) -> &'static str {
        match self {
            TokenType::U16 => "u16",
            TokenType::U32 => "u32",
            TokenType::I32 => "i32",
            TokenType::I64 => "i64",
        }
    }
}

impl fmt::Display for TokenType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
