//! [`Layout`]: where a step's fields lie in its slot — `tokens` (with `inputs` and
//! `targets` as views of it, or `targets` an int64 array of its own), `cu_seqlens` and, if
//! asked for, `positions` and `bigram_inputs` — sized for the schedule's largest step; and
//! [`Derived`], what the decoder computes into the slot besides the tokens.

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
pub(super) const BIGRAM_INPUTS: &str = "bigram_inputs";

/// What a step's slot holds besides its tokens and `cu_seqlens`, computed by the decode
/// workers into the slot (never on the consumer's thread), and how the tokens are walked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Derived {
    /// `positions`: each input's position in its document.
    pub(crate) positions: bool,
    /// `targets` as an int64 array of its own (modded-nanogpt's), not a view of `tokens`.
    pub(crate) targets_i64: bool,
    /// `bigram_inputs` (int32, `N`): modded-nanogpt's bigram hash of the inputs, with this
    /// modulus (`bigram_vocab_size - 1`).
    pub(crate) bigram_modulus: Option<i32>,
    /// Every `cu_seqlens` segment longer than this split into pieces of it.
    pub(crate) seq_cap: Option<u64>,
    /// `cu_seqlens` from the documents the walk packed (`true`), or from the positions of
    /// `bos` in the inputs of a contiguous window (`false`: modded-nanogpt's validation
    /// walk).
    pub(crate) align_to_bos: bool,
}
/// The fields of a step and their offsets in its slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) fields: Fields,
    pub(crate) token_type: TokenType,
    /// Byte offsets of the arrays.
    pub(super) tokens: usize,
    pub(super) cu_seqlens: usize,
    pub(crate) positions: Option<usize>,
    /// `targets`' offset when it is an int64 array of its own.
    pub(crate) targets: Option<usize>,
    /// `bigram_inputs`' offset, when the slot has them.
    pub(crate) bigram: Option<usize>,
    /// What the decoder computes besides the tokens.
    pub(crate) derived: Derived,
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
    /// `largest.tokens` (`dims[2]`, `N`) when `positions`; with `targets_i64`, `targets`
    /// an int64 array of `N` (`dims[2]`) in place of the view; with a bigram modulus,
    /// `bigram_inputs` (int32, `N`, `dims[2]`).
    pub(crate) fn new(largest: StepSizes, token_type: TokenType, derived: Derived) -> Self {
        let max_tokens = largest.tokens + 1;
        let as_len = |n: u64| usize::try_from(n).unwrap_or(usize::MAX);
        let mut fields = Fields::new()
            .array(TOKENS, dtype(token_type), as_len(max_tokens), 0)
            .view(INPUTS, TOKENS, 0, 1);
        fields = if derived.targets_i64 {
            fields.array(TARGETS, Dtype::I64, as_len(largest.tokens), 2)
        } else {
            fields.view(TARGETS, TOKENS, 1, 1)
        };
        fields = fields.array(CU_SEQLENS, Dtype::I32, as_len(largest.max_docs), 1);
        if derived.positions {
            fields = fields.array(POSITIONS, Dtype::I32, as_len(largest.tokens), 2);
        }
        if derived.bigram_modulus.is_some() {
            fields = fields.array(BIGRAM_INPUTS, Dtype::I32, as_len(largest.tokens), 2);
        }
        let offset = |name: &str| fields.get(name).map_or(0, |f| f.offset);
        Layout {
            tokens: offset(TOKENS),
            cu_seqlens: offset(CU_SEQLENS),
            positions: derived.positions.then(|| offset(POSITIONS)),
            targets: derived.targets_i64.then(|| offset(TARGETS)),
            bigram: derived.bigram_modulus.map(|_| offset(BIGRAM_INPUTS)),
            derived,
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

    /// A batch's extents for micro-step `micro` of a step of `sizes`: `[N + 1, max_docs,
    /// N, micro]` — the fourth is not an extent of a field but the batch's micro-step
    /// (`0..grad_accum_steps`), which a trainer reads as `batch.dims()[3]`.
    pub(super) fn dims(sizes: StepSizes, micro: u64) -> [u64; 4] {
        [sizes.tokens + 1, sizes.max_docs, sizes.tokens, micro]
    }
}
