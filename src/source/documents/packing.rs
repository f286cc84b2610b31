//! [`PackingSettings`]: how steps of packed documents are sized and laid out — the tokens
//! per step, where documents are cut, `max_docs`, the schedule, the token type and
//! `positions` — as a builder of one source or of a mixture holds them, and their check
//! into a [`Schedule`] and a [`Layout`].

use super::layout::Layout;
use super::schedule::Schedule;
use crate::error::source::SourceError;
use crate::source::tokens::TokenType;

/// The packing settings as a [`DocumentsBuilder`](crate::source::DocumentsBuilder) or a
/// [`DocumentMixtureBuilder`](crate::source::DocumentMixtureBuilder) was given them
/// (`Default`: none set).
#[derive(Debug, Clone, Default)]
pub(crate) struct PackingSettings {
    pub(crate) tokens_per_batch: u64,
    pub(crate) max_seq_len: u64,
    pub(crate) max_docs: Option<u64>,
    pub(crate) schedule: Vec<(u64, u64, u64)>,
    /// The token type, if set (default [`TokenType::I32`]).
    pub(crate) token_type: Option<TokenType>,
    /// Whether batches carry `positions`, if set (default off).
    pub(crate) positions: Option<bool>,
}

impl PackingSettings {
    /// The settings `schedule` and `layout` were checked from, so that checking them again
    /// gives the same.
    pub(crate) fn of(schedule: &Schedule, layout: &Layout) -> Self {
        let entries = schedule.triples();
        let (_, tokens_per_batch, max_seq_len) = entries[0];
        PackingSettings {
            tokens_per_batch,
            max_seq_len,
            max_docs: schedule.max_docs(),
            schedule: entries[1..].to_vec(),
            token_type: Some(layout.token_type),
            positions: Some(layout.positions.is_some()),
        }
    }

    /// Checks the sizes ([`Schedule::new`]'s errors) and lays out the largest step.
    pub(crate) fn check(&self) -> Result<(Schedule, Layout), SourceError> {
        let schedule = Schedule::new(
            self.tokens_per_batch,
            self.max_seq_len,
            &self.schedule,
            self.max_docs,
        )?;
        let layout = Layout::new(
            schedule.largest(),
            self.token_type.unwrap_or(TokenType::I32),
            self.positions.unwrap_or(false),
        );
        Ok((schedule, layout))
    }

    /// The first setting given, in the order `"tokens_per_batch"`, `"max_seq_len"`,
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
