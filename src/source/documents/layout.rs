//! [`Layout`]: where a step's fields lie in its slot — `tokens` (with `inputs` and
//! `targets` as views of it), `cu_seqlens` and, if asked for, `positions` — sized for the
//! schedule's largest step.

use super::schedule::StepSizes;
use crate::config::{Config, ConfigBuilder};
use crate::fields::{Dtype, Fields};
use crate::source::tokens::TokenType;

/// The field names, as [`Batch::field`](crate::Batch::field) takes them.
pub(super) const TOKENS: &str = "tokens";
pub(super) const INPUTS: &str = "inputs";
pub(super) const TARGETS: &str = "targets";
pub(super) const CU_SEQLENS: &str = "cu_seqlens";
pub(super) const POSITIONS: &str = "positions";

/// The fields of a step and their offsets in its slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) fields: Fields,
    pub(crate) token_type: TokenType,
    /// Byte offsets of the arrays.
    pub(super) tokens: usize,
    pub(super) cu_seqlens: usize,
    pub(crate) positions: Option<usize>,
    /// What the slot holds at most: `N + 1` tokens, `max_docs` entries of `cu_seqlens`.
    pub(super) max_tokens: u64,
    pub(crate) max_docs: u64,
}

/// The dtype a batch holds tokens of `ty` as.
const fn dtype(ty: TokenType) -> Dtype {
    match ty {
        TokenType::U16 => Dtype::U16,
        TokenType::U32 => Dtype::U32,
        TokenType::I32 => Dtype::I32,
        TokenType::I64 => Dtype::I64,
    }
}

impl Layout {
    /// A config builder for batches of this layout: batch size 1 (a batch is a step of a
    /// rank), its fields (which size the slot), and `rows_per_batch` its `max_docs` (a row
    /// per document).
    pub(crate) fn config(&self) -> ConfigBuilder {
        let rows = usize::try_from(self.max_docs).unwrap_or(usize::MAX);
        Config::builder()
            .batch_size(1)
            .fields(self.fields.clone())
            .rows_per_batch(rows)
    }

    /// The layout for steps of at most `largest`: `tokens` of `largest.tokens + 1` (its
    /// length in a batch is `dims[0]`, `N + 1`), `inputs` and `targets` views one shorter,
    /// `cu_seqlens` of `largest.max_docs` (`dims[1]`), and `positions` of
    /// `largest.tokens` (`dims[2]`, `N`) when `positions`.
    pub(crate) fn new(largest: StepSizes, token_type: TokenType, positions: bool) -> Self {
        let max_tokens = largest.tokens + 1;
        let as_len = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let mut fields = Fields::new()
            .array(TOKENS, dtype(token_type), as_len(max_tokens), 0)
            .view(INPUTS, TOKENS, 0, 1)
            .view(TARGETS, TOKENS, 1, 1)
            .array(CU_SEQLENS, Dtype::I32, as_len(largest.max_docs), 1);
        if positions {
            fields = fields.array(POSITIONS, Dtype::I32, as_len(largest.tokens), 2);
        }
        let offset = |name: &str| fields.get(name).map_or(0, |f| f.offset);
        Layout {
            tokens: offset(TOKENS),
            cu_seqlens: offset(CU_SEQLENS),
            positions: positions.then(|| offset(POSITIONS)),
            fields,
            token_type,
            max_tokens,
            max_docs: largest.max_docs,
        }
    }

    /// Bytes of slot the fields take.
    pub(super) fn bytes(&self) -> usize {
        self.fields.bytes()
    }

    /// A batch's extents for a step of `sizes`: `[N + 1, max_docs, N]`.
    pub(super) fn dims(sizes: StepSizes) -> [u64; 3] {
        [sizes.tokens + 1, sizes.max_docs, sizes.tokens]
    }
}
