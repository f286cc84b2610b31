//! [`StepModes`]: how the steps of a [`Documents`](crate::source::Documents) source are
//! walked (whole documents or modded-nanogpt's contiguous validation windows; pops per
//! optimizer step) and what the decode workers derive into each slot besides the tokens
//! (`targets` as int64, `bigram_inputs`, `cu_seqlens` split at a cap, `max_docs` by the
//! formula alone) — modded-nanogpt's loader, both of its modes, every output (issue 31).
//! Beside [`Packing`](crate::source::Packing), whose fields stay as they were.

use super::layout::Layout;
use super::schedule::Schedule;
use crate::source::tokens::TokenType;

/// How a source's steps are walked and what is derived into them, beyond its
/// [`Packing`](crate::source::Packing): what
/// [`DocumentsBuilder::modes`](crate::source::DocumentsBuilder::modes) takes whole (its
/// `align_to_bos`, `grad_accum_steps`, `targets_dtype`, `bigram_vocab_size`, `seq_cap` and
/// `max_docs_formula` setters each set one field). `Default`: nothing set, the walk and
/// fields of a source built without them.
///
/// ```
/// use pinring::source::{write_shard, Documents, StepModes, TokenShards, TokenType};
/// # let dir = std::env::temp_dir().join(format!("pinring-modes-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let tokens: Vec<u16> = (0..4000u16).map(|i| if i % 10 == 0 { 50256 } else { i }).collect();
/// write_shard(dir.join("train_000.bin"), &tokens)?;
/// let modes = StepModes {
///     grad_accum_steps: Some(2),
///     targets_dtype: Some(TokenType::I64),
///     bigram_vocab_size: Some(50304 * 15 / 2),
///     ..StepModes::default()
/// };
/// let docs = Documents::builder(TokenShards::open([dir.join("train_000.bin")])?)
///     .tokens_per_batch(19).max_seq_len(64).modes(modes.clone()).build()?;
/// assert_eq!(docs.modes(), modes);
/// let fields = docs.fields();
/// assert!(fields.get("bigram_inputs").is_some() && fields.get("targets").is_some());
/// // Two pops a step: the steps' numbers repeat, their micro-steps count 0, 1.
/// let steps: Vec<(u64, u64)> = docs.iter().take(4).map(|s| (s.step(), s.micro_step())).collect();
/// assert_eq!(steps, [(0, 0), (0, 1), (1, 0), (1, 1)]);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StepModes {
    /// With `max_docs` `None`: `Some(true)` makes each step's `max_docs` modded-nanogpt's
    /// formula alone ([`modded_max_docs_formula`](crate::source::modded_max_docs_formula):
    /// the medium track's), not its table. `None`: the table, else the formula.
    pub max_docs_formula: Option<bool>,
    /// `Some(false)`: modded-nanogpt's validation walk (`align_to_bos=False`) — each step
    /// contiguous windows of a shard, rank `r` the `N + 1` tokens from `pos + r·N`, `pos`
    /// moving on `W·N` a step, the next shard when `pos + W·N + 1` reaches the shard's end;
    /// `cu_seqlens` the positions of `bos` in the inputs (padded with `N` to `max_docs`).
    /// Sequential order only. `None`: whole documents from their `bos` (`true`).
    pub align_to_bos: Option<bool>,
    /// `G`: pops per optimizer step, each of the step's sizes (so `tokens_per_batch` is
    /// modded-nanogpt's `num_tokens / (world_size · G)`). A batch's step is the optimizer
    /// step (what `schedule`, `start_step`, `skip_steps` and states count) and its
    /// micro-step `0..G` its `dims()[3]`. `None`: 1.
    pub grad_accum_steps: Option<u64>,
    /// `Some(TokenType::I64)`: `targets` an int64 array of its own (`N`), as modded-nanogpt
    /// hands them to its loss; `Some(TokenType::I32)` or `None`: a view of `tokens`. Other
    /// types are refused.
    pub targets_dtype: Option<TokenType>,
    /// `V`: batches carry `bigram_inputs` (int32, `N`), modded-nanogpt's
    /// `get_bigram_hash(inputs)` with `M = V - 1`: `out[0] = M`, then `out[i] = ((36313 ·
    /// x[i]) XOR (27191 · prev)) mod M` with `prev = M` at `i = 1` and `x[i - 1]` after
    /// (int32 products wrapping, `mod` non-negative). `2..=2^31`. `None`: no such field.
    pub bigram_vocab_size: Option<u64>,
    /// `C`: after packing, every `cu_seqlens` segment longer than `C` is split, from its
    /// start, into pieces of `C` (the last shorter); the tokens are unchanged and the
    /// pieces must fit `max_docs`. At least 1. `None`: no cap.
    pub seq_cap: Option<u64>,
}

/// The setters of a builder's `modes` field, a [`StepModes`]: `modes` (all of it), then
/// one setter a field.
macro_rules! step_mode_setters {
    () => {
        $crate::setters::setters! {
            /// How steps are walked and what is derived into them, every field at once (see
            /// [`StepModes`](crate::source::StepModes); the setters that follow each set one
            /// of its fields, and the last one given wins).
            modes(modes: $crate::source::documents::modes::StepModes) => modes = modes;
            /// `max_docs` by modded-nanogpt's formula alone:
            /// [`StepModes::max_docs_formula`](crate::source::StepModes::max_docs_formula).
            max_docs_formula(on: bool) => modes.max_docs_formula = Some(on);
            /// Whole documents or contiguous windows:
            /// [`StepModes::align_to_bos`](crate::source::StepModes::align_to_bos).
            align_to_bos(on: bool) => modes.align_to_bos = Some(on);
            /// Pops per optimizer step:
            /// [`StepModes::grad_accum_steps`](crate::source::StepModes::grad_accum_steps).
            grad_accum_steps(g: u64) => modes.grad_accum_steps = Some(g);
            /// `targets` as an array of its own in this type:
            /// [`StepModes::targets_dtype`](crate::source::StepModes::targets_dtype).
            targets_dtype(ty: $crate::source::tokens::TokenType) => modes.targets_dtype = Some(ty);
            /// Adds `bigram_inputs`:
            /// [`StepModes::bigram_vocab_size`](crate::source::StepModes::bigram_vocab_size).
            bigram_vocab_size(v: u64) => modes.bigram_vocab_size = Some(v);
            /// Splits long `cu_seqlens` segments:
            /// [`StepModes::seq_cap`](crate::source::StepModes::seq_cap).
            seq_cap(c: u64) => modes.seq_cap = Some(c);
        }
    };
}

pub(crate) use step_mode_setters;

impl StepModes {
    /// The modes `schedule` and `layout` were checked with, each field `None` where it is
    /// at its default, so that checking again gives the same.
    pub(crate) fn of(schedule: &Schedule, layout: &Layout) -> Self {
        let derived = layout.derived;
        StepModes {
            max_docs_formula: schedule.formula_only().then_some(true),
            align_to_bos: (!schedule.align_to_bos()).then_some(false),
            grad_accum_steps: Some(schedule.grad_accum_steps()).filter(|&g| g != 1),
            targets_dtype: derived.targets_i64.then_some(TokenType::I64),
            bigram_vocab_size: derived.bigram_modulus.map(|m| m as u64 + 1),
            seq_cap: derived.seq_cap,
        }
    }

    /// The first field given (its name), in the order of the fields; `None` when none is.
    pub fn first_given(&self) -> Option<&'static str> {
        [
            (self.max_docs_formula.is_some(), "max_docs_formula"),
            (self.align_to_bos.is_some(), "align_to_bos"),
            (self.grad_accum_steps.is_some(), "grad_accum_steps"),
            (self.targets_dtype.is_some(), "targets_dtype"),
            (self.bigram_vocab_size.is_some(), "bigram_vocab_size"),
            (self.seq_cap.is_some(), "seq_cap"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }
}
