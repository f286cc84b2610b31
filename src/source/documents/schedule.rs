//! Step sizes over a run: the tokens a rank packs per step, where documents are cut, and
//! how long `cu_seqlens` is, changing at steps known up front ([`Schedule`]), and
//! modded-nanogpt's rule for the length of `cu_seqlens` ([`modded_max_docs`]).

use crate::error::source::SourceError;

/// The most tokens of inputs a step may pack per rank: `N + 1` tokens and every value of
/// `cu_seqlens` must fit an `i32`.
pub const MAX_TOKENS_PER_BATCH: u64 = i32::MAX as u64 - 1;

/// The sizes of one step of one rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StepSizes {
    /// Tokens of inputs (`N`, tokens_per_batch): the step packs `N + 1` tokens, the inputs
    /// are the first `N`, the targets the last `N`.
    pub tokens: u64,
    /// A document longer than this is cut to this many tokens (its tail is dropped).
    pub max_seq_len: u64,
    /// The length of `cu_seqlens`: the step holds at most `max_docs - 1` documents.
    pub max_docs: u64,
}

impl StepSizes {
    /// Checks that a step of these sizes, step `step`, where the rank packing the most
    /// documents packs `needed` (`most_pieces`: `(needed, rank)`, the first such rank),
    /// fits every rank's `cu_seqlens`: [`SourceError::TooManyDocuments`] otherwise.
    pub(crate) fn check_pieces(
        self,
        step: u64,
        (needed, rank): (u64, u64),
    ) -> Result<(), SourceError> {
        if needed > self.max_docs.saturating_sub(1) {
            return Err(SourceError::TooManyDocuments {
                step,
                rank,
                needed,
                max_docs: self.max_docs,
            });
        }
        Ok(())
    }
}

/// modded-nanogpt's `max_num_docs` for `tokens` tokens per rank: its table for the
/// speedrun's three sizes (`TRAIN_MAX_NUM_DOCS`: 64, 96 and 128 for 16384, 32768 and 49152
/// tokens), else the next multiple of 128 of `tokens / 300`, at least 128 (below 300
/// tokens modded-nanogpt's rule gives 0, which no step can use).
///
/// ```
/// use pinring::source::modded_max_docs;
/// assert_eq!(modded_max_docs(49152), 128);
/// assert_eq!(modded_max_docs(16384), 64);
/// assert_eq!(modded_max_docs(1024), 128);
/// assert_eq!(modded_max_docs(40_000), 256); // 133 → the next multiple of 128
/// ```
pub const fn modded_max_docs(tokens: u64) -> u64 {
    match tokens {
        16384 => 64,
        32768 => 96,
        49152 => 128,
        t => modded_max_docs_formula(t),
    }
}

/// modded-nanogpt's formula for `max_num_docs` alone, without the table: the next multiple
/// of 128 of `tokens / 300`, at least 128 — what the medium track (`train_gpt_medium.py`)
/// uses (128, 128, 256, 256 at its sizes).
///
/// ```
/// use pinring::source::modded_max_docs_formula;
/// assert_eq!(modded_max_docs_formula(49152), 256); // the table says 128
/// assert_eq!(modded_max_docs_formula(16384), 128);
/// ```
pub const fn modded_max_docs_formula(tokens: u64) -> u64 {
    let m = (tokens / 300).div_ceil(128) * 128;
    if m < 128 {
        128
    } else {
        m
    }
}

/// How the length of `cu_seqlens` is chosen for each step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum MaxDocsRule {
    /// modded-nanogpt's rule: its table, else the formula ([`modded_max_docs`]).
    Modded,
    /// The formula alone ([`modded_max_docs_formula`]).
    Formula,
    /// The same every step.
    Fixed(u64),
}

impl MaxDocsRule {
    /// The rule for `max_docs` given (`None`: modded-nanogpt's, or the formula alone when
    /// `formula`).
    pub(crate) fn of(max_docs: Option<u64>, formula: bool) -> Self {
        match (max_docs, formula) {
            (Some(n), _) => MaxDocsRule::Fixed(n),
            (None, false) => MaxDocsRule::Modded,
            (None, true) => MaxDocsRule::Formula,
        }
    }

    fn for_tokens(self, tokens: u64) -> u64 {
        match self {
            MaxDocsRule::Modded => modded_max_docs(tokens),
            MaxDocsRule::Formula => modded_max_docs_formula(tokens),
            MaxDocsRule::Fixed(n) => n,
        }
    }
}

/// Step sizes for every step of a run: the base sizes from step 0, then each entry's from
/// its step on, as modded-nanogpt's training loop `.send()`s new sizes to its generator
/// (the sizes sent at step `k` are step `k`'s). Sizes may go up or down (a taper). A step
/// is an optimizer step: with `grad_accum_steps` `G` ([`grad_accum_steps`](Self::grad_accum_steps))
/// each step is `G` pops of these sizes.
///
/// ```
/// use pinring::source::Schedule;
/// let s = Schedule::new(1024, 256, &[(5, 2048, 512)], None)?;
/// assert_eq!((s.at(4).tokens, s.at(5).tokens, s.at(99).max_seq_len), (1024, 2048, 512));
/// assert_eq!(s.largest().tokens, 2048);
/// assert_eq!(s.at(0).max_docs, 128); // modded-nanogpt's rule for 1024 tokens
/// # Ok::<(), pinring::source::SourceError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Schedule {
    /// `(from_step, sizes)`, the first from step 0, strictly increasing.
    entries: Vec<(u64, StepSizes)>,
    /// How each step's `max_docs` is chosen.
    rule: MaxDocsRule,
    /// Pops per step (`G`, at least 1).
    grad_accum: u64,
    /// Whether the walk packs whole documents (`align_to_bos`), or contiguous windows
    /// (modded-nanogpt's validation walk).
    align_to_bos: bool,
}

impl Schedule {
    /// Sizes `(tokens, max_seq_len)` from step 0, changed by `changes`
    /// (`(from_step, tokens, max_seq_len)`, strictly increasing in step; an entry at step
    /// 0 replaces the base sizes). `max_docs`: the length of `cu_seqlens` in every step,
    /// or `None` for modded-nanogpt's per step ([`modded_max_docs`]).
    ///
    /// A base size of 0 is [`SourceError::Zero`] (`"tokens_per_batch"`, `"max_seq_len"`,
    /// `"max_docs"`), unless an entry at step 0 replaces the base; more than
    /// [`MAX_TOKENS_PER_BATCH`] tokens is [`SourceError::OutOfRange`]. An entry that does
    /// not start after the one before it, or with a size of 0 or too large, is
    /// [`SourceError::BadSchedule`] naming it.
    pub fn new(
        tokens: u64,
        max_seq_len: u64,
        changes: &[(u64, u64, u64)],
        max_docs: Option<u64>,
    ) -> Result<Self, SourceError> {
        Self::with_rule(tokens, max_seq_len, changes, MaxDocsRule::of(max_docs, false))
    }

    /// As [`new`](Self::new), each step's `max_docs` by `rule`.
    pub(crate) fn with_rule(
        tokens: u64,
        max_seq_len: u64,
        changes: &[(u64, u64, u64)],
        rule: MaxDocsRule,
    ) -> Result<Self, SourceError> {
        if rule == MaxDocsRule::Fixed(0) {
            return Err(SourceError::Zero("max_docs"));
        }
        let sizes = |tokens: u64, max_seq_len: u64| StepSizes {
            tokens,
            max_seq_len,
            max_docs: rule.for_tokens(tokens),
        };
        let mut entries = Vec::with_capacity(changes.len() + 1);
        if changes.first().is_none_or(|&(from, _, _)| from > 0) {
            if tokens == 0 {
                return Err(SourceError::Zero("tokens_per_batch"));
            }
            if max_seq_len == 0 {
                return Err(SourceError::Zero("max_seq_len"));
            }
            if tokens > MAX_TOKENS_PER_BATCH {
                return Err(too_many_tokens(tokens));
            }
            entries.push((0, sizes(tokens, max_seq_len)));
        }
        for (index, &(from_step, t, m)) in changes.iter().enumerate() {
            let bad = |why: String| SourceError::BadSchedule {
                index,
                from_step,
                why,
            };
            if index > 0 && from_step <= changes[index - 1].0 {
                return Err(bad(format!(
                    "it does not start after entry {} (from step {}): entries must be strictly \
                     increasing in step",
                    index - 1,
                    changes[index - 1].0
                )));
            }
            if t == 0 || m == 0 {
                let what = if t == 0 { "tokens_per_batch" } else { "max_seq_len" };
                return Err(bad(format!("its {what} is 0; it must be at least 1")));
            }
            if t > MAX_TOKENS_PER_BATCH {
                return Err(bad(format!(
                    "its tokens_per_batch {t} is over {MAX_TOKENS_PER_BATCH}, the most a step \
                     packs (N + 1 tokens and cu_seqlens are int32)"
                )));
            }
            entries.push((from_step, sizes(t, m)));
        }
        Ok(Schedule {
            entries,
            rule,
            grad_accum: 1,
            align_to_bos: true,
        })
    }

    /// This schedule walked with `grad_accum_steps` pops per step (at least 1), packing
    /// whole documents (`align_to_bos`) or contiguous windows.
    pub(crate) fn walked(mut self, grad_accum_steps: u64, align_to_bos: bool) -> Self {
        self.grad_accum = grad_accum_steps.max(1);
        self.align_to_bos = align_to_bos;
        self
    }

    /// Pops per (optimizer) step: `G`, each of [`at`](Self::at)'s sizes.
    pub fn grad_accum_steps(&self) -> u64 {
        self.grad_accum
    }

    /// Whether the walk packs whole documents, each from its `bos` (modded-nanogpt's
    /// `align_to_bos=True`), or contiguous windows of the shards (`False`, its validation
    /// walk).
    pub fn align_to_bos(&self) -> bool {
        self.align_to_bos
    }

    /// Whether each step's `max_docs` is modded-nanogpt's formula alone (no table).
    pub(crate) fn formula_only(&self) -> bool {
        self.rule == MaxDocsRule::Formula
    }

    /// The sizes of step `step`: the last entry's with `from_step <= step`.
    pub fn at(&self, step: u64) -> StepSizes {
        let i = self.entries.partition_point(|&(from, _)| from <= step);
        self.entries[i.saturating_sub(1)].1
    }

    /// The largest of each size over the run: what a slot is sized for.
    pub fn largest(&self) -> StepSizes {
        let mut out = self.entries[0].1;
        for &(_, s) in &self.entries[1..] {
            out.tokens = out.tokens.max(s.tokens);
            out.max_seq_len = out.max_seq_len.max(s.max_seq_len);
            out.max_docs = out.max_docs.max(s.max_docs);
        }
        out
    }

    /// The entries, `(from_step, sizes)`: the first from step 0, strictly increasing.
    pub fn entries(&self) -> &[(u64, StepSizes)] {
        &self.entries
    }

    /// The entries as `(from_step, tokens, max_seq_len)`, the first from step 0: what a
    /// [`DocumentsCheckpoint`](crate::source::DocumentsCheckpoint) records.
    pub fn triples(&self) -> Vec<(u64, u64, u64)> {
        self.entries
            .iter()
            .map(|&(from, s)| (from, s.tokens, s.max_seq_len))
            .collect()
    }

    /// The `max_docs` given, if any (`None`: modded-nanogpt's rule, step by step).
    pub fn max_docs(&self) -> Option<u64> {
        match self.rule {
            MaxDocsRule::Fixed(n) => Some(n),
            MaxDocsRule::Modded | MaxDocsRule::Formula => None,
        }
    }
}

fn too_many_tokens(tokens: u64) -> SourceError {
    SourceError::OutOfRange {
        setting: "tokens_per_batch",
        value: tokens,
        most: MAX_TOKENS_PER_BATCH,
        why: "a step packs N + 1 tokens, and N and cu_seqlens are int32",
    }
}

#[cfg(test)]
mod tests {
    use crate::error::source::SourceError;
    use crate::source::documents::schedule::{modded_max_docs, Schedule, StepSizes};

    #[test]
    fn modded_rule() {
        assert_eq!(modded_max_docs(16384), 64);
        assert_eq!(modded_max_docs(32768), 96);
        assert_eq!(modded_max_docs(49152), 128);
        assert_eq!(modded_max_docs(1024), 128);
        assert_eq!(modded_max_docs(38_400), 128); // 128 exactly
        assert_eq!(modded_max_docs(38_700), 256); // 129
        assert_eq!(modded_max_docs(100), 128);
        assert_eq!(modded_max_docs(0), 128);
    }

    #[test]
    fn entries_replace_and_follow() {
        let s = Schedule::new(100, 10, &[(5, 200, 20), (9, 300, 5)], None).unwrap();
        assert_eq!(s.at(0).tokens, 100);
        assert_eq!(s.at(4).tokens, 100);
        assert_eq!(s.at(5).tokens, 200);
        assert_eq!(s.at(8).max_seq_len, 20);
        assert_eq!(s.at(1000).tokens, 300);
        assert_eq!(s.largest().tokens, 300);
        assert_eq!(s.largest().max_seq_len, 20);
        assert_eq!(
            s.triples(),
            [(0, 100, 10), (5, 200, 20), (9, 300, 5)]
        );
        // An entry at 0 replaces the base, which may then be unset.
        let s = Schedule::new(0, 0, &[(0, 7, 3)], Some(4)).unwrap();
        assert_eq!(s.at(0), StepSizes { tokens: 7, max_seq_len: 3, max_docs: 4 });
        assert_eq!(s.entries().len(), 1);
    }

    #[test]
    fn bad_schedules_name_the_entry() {
        let e = Schedule::new(100, 10, &[(5, 1, 1), (5, 1, 1)], None).unwrap_err();
        assert!(matches!(e, SourceError::BadSchedule { index: 1, from_step: 5, .. }), "{e}");
        assert!(e.to_string().contains("strictly increasing"), "{e}");
        let e = Schedule::new(100, 10, &[(5, 0, 1)], None).unwrap_err();
        assert!(matches!(e, SourceError::BadSchedule { index: 0, .. }), "{e}");
        assert!(matches!(
            Schedule::new(0, 10, &[], None),
            Err(SourceError::Zero("tokens_per_batch"))
        ));
        assert!(matches!(
            Schedule::new(10, 0, &[(3, 5, 5)], None),
            Err(SourceError::Zero("max_seq_len"))
        ));
        assert!(matches!(
            Schedule::new(10, 10, &[], Some(0)),
            Err(SourceError::Zero("max_docs"))
        ));
        assert!(matches!(
            Schedule::new(1 << 31, 10, &[], None),
            Err(SourceError::OutOfRange { setting: "tokens_per_batch", .. })
        ));
    }
}
