//! [`Packing`]: how steps of packed documents are sized and laid out — the tokens per
//! step, where documents are cut, `max_docs`, the schedule, the token type and
//! `positions` — as one public value that a builder of one source or of a mixture holds
//! whole, and its check into a [`Schedule`] and a [`Layout`].

use super::layout::{Derived, Layout};
use super::modes::StepModes;
use super::schedule::{MaxDocsRule, Schedule};
use crate::error::source::SourceError;
use crate::source::sampling::difference::FirstDifference;
use crate::source::tokens::TokenType;

/// How the steps of packed documents are sized and laid out: what
/// [`DocumentsBuilder::packing`](crate::source::DocumentsBuilder::packing) and a mixture of
/// documents' [`packing`](crate::source::MixtureBuilder::packing) take whole (their
/// `tokens_per_batch`, `max_seq_len`, `max_docs`, `schedule`, `token_type` and `positions`
/// setters each set one field of it). `Default`: nothing set.
///
/// ```
/// use pinring::source::{write_shard, Documents, Packing, TokenShards, TokenType};
/// # let dir = std::env::temp_dir().join(format!("pinring-packing-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// let tokens: Vec<u16> = (0..2000u16).map(|i| if i % 10 == 0 { 50256 } else { 1 }).collect();
/// write_shard(dir.join("train_000.bin"), &tokens)?;
/// let packing = Packing {
///     tokens_per_batch: 19,
///     max_seq_len: 64,
///     token_type: Some(TokenType::U16),
///     ..Packing::default()
/// };
/// let docs = Documents::builder(TokenShards::open([dir.join("train_000.bin")])?)
///     .packing(packing.clone())
///     .build()?;
/// assert_eq!(docs.token_type(), TokenType::U16);
/// // What it was built with, every field given (the defaults filled in).
/// assert_eq!(docs.packing(), Packing { positions: Some(false), ..packing });
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Packing {
    /// Tokens of inputs per rank per step (`N`): each step of each rank packs `N + 1`
    /// tokens (modded-nanogpt's `num_tokens` is this times the world size). 0: not set,
    /// which the schedule must then give from step 0.
    pub tokens_per_batch: u64,
    /// Where documents are cut: a document longer than this gives its first
    /// `max_seq_len` tokens, and its tail is dropped (0: not set, as `tokens_per_batch`).
    pub max_seq_len: u64,
    /// The length of `cu_seqlens` in every step: a step holds at most `max_docs - 1`
    /// documents per rank, and one needing more is an error at that step. `None`: each
    /// step's is modded-nanogpt's rule for its tokens
    /// ([`modded_max_docs`](crate::source::modded_max_docs)).
    pub max_docs: Option<u64>,
    /// Changes of the step sizes, known up front: `(from_step, tokens_per_batch,
    /// max_seq_len)` entries, strictly increasing in step; step `k` uses the last entry
    /// with `from_step <= k` (the base sizes before the first; an entry at step 0 replaces
    /// them). The slot is sized for the largest step. Empty: the same sizes every step.
    pub schedule: Vec<(u64, u64, u64)>,
    /// The type tokens are written as (`tokens`, `inputs`, `targets`). `None`:
    /// [`TokenType::I32`].
    pub token_type: Option<TokenType>,
    /// Whether batches carry `positions`, each input token's position in its document.
    /// `None`: off.
    pub positions: Option<bool>,
}

/// The setters of a builder's `packing` field, a [`Packing`]: `packing` (all of it), then
/// one setter a field. A new field of [`Packing`] gets its setter here, and every builder
/// that packs documents has it.
macro_rules! packing_setters {
    () => {
        $crate::setters::setters! {
            /// How steps are sized and laid out, every field at once (see
            /// [`Packing`](crate::source::Packing); the setters that follow each set one
            /// of its fields, and the last one given wins).
            packing(packing: $crate::source::documents::packing::Packing) => packing = packing;
            /// Tokens of inputs per rank per step:
            /// [`Packing::tokens_per_batch`](crate::source::Packing::tokens_per_batch).
            tokens_per_batch(n: u64) => packing.tokens_per_batch = n;
            /// Where documents are cut:
            /// [`Packing::max_seq_len`](crate::source::Packing::max_seq_len).
            max_seq_len(n: u64) => packing.max_seq_len = n;
            /// The length of `cu_seqlens` in every step:
            /// [`Packing::max_docs`](crate::source::Packing::max_docs).
            max_docs(n: u64) => packing.max_docs = Some(n);
            /// Changes of the step sizes, known up front:
            /// [`Packing::schedule`](crate::source::Packing::schedule).
            schedule(entries: Vec<(u64, u64, u64)>) => packing.schedule = entries;
            /// The type tokens are written as:
            /// [`Packing::token_type`](crate::source::Packing::token_type).
            token_type(ty: $crate::source::tokens::TokenType) => packing.token_type = Some(ty);
            /// Whether batches carry `positions`:
            /// [`Packing::positions`](crate::source::Packing::positions).
            positions(on: bool) => packing.positions = Some(on);
        }
    };
}

pub(crate) use packing_setters;

impl Packing {
    /// The packing `schedule` and `layout` were checked from, every field given, so that
    /// checking it again (with [`StepModes::of`] them) gives the same.
    pub(crate) fn of(schedule: &Schedule, layout: &Layout) -> Self {
        let entries = schedule.triples();
        let (_, tokens_per_batch, max_seq_len) = entries[0];
        Packing {
            tokens_per_batch,
            max_seq_len,
            max_docs: schedule.max_docs(),
            schedule: entries[1..].to_vec(),
            token_type: Some(layout.token_type),
            positions: Some(layout.derived.positions),
        }
    }

    /// Checks the sizes ([`Schedule::new`]'s errors) and the walk's and derived fields'
    /// settings ([`SourceError::BadPacking`] naming the setting), and lays out the largest
    /// step.
    pub(crate) fn check(&self) -> Result<(Schedule, Layout), SourceError> {
        self.check_with(&StepModes::default())
    }

    /// As [`check`](Self::check), the steps walked and their derived fields as `modes`
    /// say.
    pub(crate) fn check_with(&self, modes: &StepModes) -> Result<(Schedule, Layout), SourceError> {
        let bad = |setting: &'static str, why: String| SourceError::BadPacking { setting, why };
        if self.max_docs.is_some() && modes.max_docs_formula == Some(true) {
            return Err(bad(
                "max_docs_formula",
                "max_docs is given too: give a number of max_docs or the formula, not both"
                    .to_owned(),
            ));
        }
        let grad_accum = modes.grad_accum_steps.unwrap_or(1);
        if grad_accum == 0 {
            return Err(bad(
                "grad_accum_steps",
                "it is 0: give the pops per optimizer step, 1 or more".to_owned(),
            ));
        }
        if modes.seq_cap == Some(0) {
            return Err(bad(
                "seq_cap",
                "it is 0: give the longest cu_seqlens segment, 1 or more tokens (or no cap)"
                    .to_owned(),
            ));
        }
        let targets_i64 = match modes.targets_dtype {
            None | Some(TokenType::I32) => false,
            Some(TokenType::I64) => true,
            Some(other) => {
                return Err(bad(
                    "targets_dtype",
                    format!("{other} is not supported: give int32 (a view of tokens) or int64"),
                ))
            }
        };
        let most = i32::MAX as u64 + 1;
        let bigram_modulus = match modes.bigram_vocab_size {
            None => None,
            Some(v) if (2..=most).contains(&v) => Some((v - 1) as i32),
            Some(v) => {
                return Err(bad(
                    "bigram_vocab_size",
                    format!(
                        "it is {v}: give 2 to {most} (the hash is taken mod V - 1, an int32 \
                         above 0)"
                    ),
                ))
            }
        };
        let align_to_bos = modes.align_to_bos.unwrap_or(true);
        let schedule = Schedule::with_rule(
            self.tokens_per_batch,
            self.max_seq_len,
            &self.schedule,
            MaxDocsRule::of(self.max_docs, modes.max_docs_formula == Some(true)),
        )?
        .walked(grad_accum, align_to_bos);
        let derived = Derived {
            positions: self.positions.unwrap_or(false),
            targets_i64,
            bigram_modulus,
            seq_cap: modes.seq_cap,
            align_to_bos,
        };
        let layout = Layout::new(
            schedule.largest(),
            self.token_type.unwrap_or(TokenType::I32),
            derived,
        );
        Ok((schedule, layout))
    }

    /// The first field in which `other` is set differently, as (the field's name, its value
    /// here, there), the unset fields read as their defaults; `None` when every field is
    /// alike. What a mixture's sources must share, compared in the order of the fields
    /// (as given: an unset `max_docs` differs from the number its rule gives).
    ///
    /// ```
    /// use pinring::source::{Packing, TokenType};
    ///
    /// let base = Packing { tokens_per_batch: 256, max_seq_len: 64, ..Packing::default() };
    /// let wide = Packing { token_type: Some(TokenType::I64), ..base.clone() };
    /// assert_eq!(
    ///     base.difference(&wide),
    ///     Some(("token_type".to_owned(), "i32".to_owned(), "i64".to_owned()))
    /// );
    /// // An unset field is its default.
    /// assert_eq!(base.difference(&Packing { positions: Some(false), ..base.clone() }), None);
    /// ```
    pub fn difference(&self, other: &Packing) -> Option<(String, String, String)> {
        let max_docs = |p: &Packing| {
            p.max_docs
                .map_or_else(|| "modded-nanogpt's rule".to_owned(), |m| m.to_string())
        };
        let token_type = |p: &Packing| p.token_type.unwrap_or(TokenType::I32);
        let positions = |p: &Packing| p.positions.unwrap_or(false);
        FirstDifference::new()
            .shown("tokens_per_batch", self.tokens_per_batch, other.tokens_per_batch)
            .shown("max_seq_len", self.max_seq_len, other.max_seq_len)
            .shown("max_docs", max_docs(self), max_docs(other))
            .debug("schedule", &self.schedule, &other.schedule)
            .shown("token_type", token_type(self), token_type(other))
            .shown("positions", positions(self), positions(other))
            .first()
    }

    /// The first field given, in the order `"tokens_per_batch"`, `"max_seq_len"`,
    /// `"max_docs"`, `"schedule"`, `"token_type"`, `"positions"`; `None` when none is.
    pub(crate) fn first_given(&self) -> Option<&'static str> {
        [
            (self.tokens_per_batch != 0, "tokens_per_batch"),
            (self.max_seq_len != 0, "max_seq_len"),
            (self.max_docs.is_some(), "max_docs"),
            (!self.schedule.is_empty(), "schedule"),
            (self.token_type.is_some(), "token_type"),
            (self.positions.is_some(), "positions"),
        ]
        .into_iter()
        .find_map(|(set, name)| set.then_some(name))
    }
}
