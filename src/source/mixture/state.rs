//! [`MixtureState`]: where a mixture's run stands, rank-agnostic — the global count, each
//! source's own place, the weights' history and the skipped steps — and its text form.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::blend::normalized;
use super::stop::Stop;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::documents::checkpoint::DocumentsCheckpoint;
use crate::source::sampling::checkpoint::Checkpoint;
use crate::source::sampling::checkpoint_text::{other_version, read_text};
use crate::source::sampling::difference::{against_rank_0, Difference, FirstDifference};

/// The version of the [`MixtureState`] layout and of the mixing it describes (the blend
/// rule, the sharding of the global sequence, the sources' keyed orders). A mixture
/// refuses a state of another version. It goes up by one whenever a field is added,
/// removed or changes meaning (its sources' own records included), or the mixing changes
/// which sample a position stands for.
///
/// Version 2: each source's record holds its files' content fingerprints (`contents`, in
/// [`Checkpoint`] version 3 and
/// [`DocumentsCheckpoint`](crate::source::DocumentsCheckpoint) version 3).
pub const MIXTURE_STATE_VERSION: u32 = 2;

/// One stretch of a mixture's global sequence under one set of weights: from global
/// position `from` on, the blend rule ([`Blend`](crate::source::Blend)) runs with
/// `weights` over the counts since `from` (each source's count at `from` is `counts`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WeightSpan {
    /// The global position where these weights start (0, or a resume point).
    pub from: u64,
    /// The weights, as given (the rule normalizes them).
    pub weights: Vec<f64>,
    /// Each source's samples before `from`.
    pub counts: Vec<u64>,
}

/// Where a [`Mixture`](crate::source::Mixture)'s run stands, independent of how many ranks
/// it runs on: how many positions of the global sequence all ranks together consumed,
/// each source's own place at that point (its own state, `C`: a sampler's
/// [`Checkpoint`] at world size 1, whose `epoch` and `consumed` say how far that source has
/// walked its own order), the weights' history (so that the source of every position,
/// before and after a change of weights, is known), the step, and the skipped steps.
///
/// Plain data; through serde one record of the keys `version`, `seed`, `stop`, `weights`
/// (a list of [`WeightSpan`] records: `from`, `weights`, `counts`), `consumed`, `step`,
/// `skip` (a list of `[start, end]`), `world_size`, `batch_size` (both informative) and
/// `sources` (each source's own record), read back strictly; [`to_text`](Self::to_text)
/// and [`from_text`](Self::from_text) give it as JSON.
///
/// Made by [`Mixture::checkpoint_after`](crate::source::Mixture::checkpoint_after) from the
/// count of samples this rank popped; in a data-parallel run every rank makes the same
/// state ([`merge`](Self::merge) checks that). A mixture of any rank, world size and batch
/// size resumes from it ([`Mixture::iter_from`](crate::source::Mixture::iter_from)), with
/// the same sources, seed, stop rule and weights — or new weights from this point on
/// ([`Mixture::reweight`](crate::source::Mixture::reweight)).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MixtureState<C = Checkpoint> {
    /// The layout's version: [`MIXTURE_STATE_VERSION`] when made by this crate.
    pub version: u32,
    /// The mixture's seed ([`MixtureBuilder::seed`](crate::source::MixtureBuilder::seed)).
    pub seed: u64,
    /// The stop rule.
    pub stop: Stop,
    /// The weights' history, oldest first: the first span starts at 0, each later one at
    /// the resume point where new weights took over. The last one is in force.
    pub weights: Vec<WeightSpan>,
    /// Positions of the global sequence all ranks together consumed: `0..consumed` were
    /// delivered, and a resumed run goes on from `consumed`.
    pub consumed: u64,
    /// Steps all ranks completed: the step number of the next batch (0 without a batch
    /// size).
    pub step: u64,
    /// The skipped steps in force, half-open `(start, end)` ranges, sorted and disjoint.
    pub skip: Vec<(u64, u64)>,
    /// The world size it was saved at (informative: a resume may use another).
    pub world_size: u64,
    /// The batch size it was saved at, 0 if none (informative).
    pub batch_size: u64,
    /// Each source's own state at `consumed`, by source index.
    pub sources: Vec<C>,
}

impl<C> MixtureState<C> {
    /// The weights in force (the last span's, as given).
    pub fn current_weights(&self) -> &[f64] {
        self.weights.last().map_or(&[], |span| &span.weights)
    }

    /// Checks what every mixture checks alike before it resumes from the state: its
    /// version, seed, stop rule and number of sources against a mixture's.
    pub(crate) fn check_mixture(&self, seed: u64, stop: Stop, sources: usize) -> Result<()> {
        let differs = FirstDifference::new()
            .shown("the state version", self.version, MIXTURE_STATE_VERSION)
            .shown("the seed", self.seed, seed)
            .shown("the stop rule", self.stop.name(), stop.name())
            .shown("the number of sources", self.sources.len(), sources)
            .first();
        match differs {
            Some((what, saved, here)) => {
                Err(SourceError::MixtureMismatch { what, saved, here }.into())
            }
            None => Ok(()),
        }
    }

    /// Checks the weights' history against each source's count at the state's position,
    /// `counts`: one weight and one count per source in every span, spans in order, the
    /// weights in force valid, and the counts since the last span's start adding up to the
    /// positions consumed since.
    pub(crate) fn check_history(&self, counts: &[u64]) -> Result<()> {
        let n = counts.len();
        let bad = |why: String| -> crate::error::Error { SourceError::bad_state(why).into() };
        let Some(last) = self.weights.last() else {
            return Err(bad("the state has no weights".into()));
        };
        for (k, span) in self.weights.iter().enumerate() {
            if span.weights.len() != n || span.counts.len() != n {
                return Err(bad(format!(
                    "weight span {k} gives {} weight(s) and {} count(s) for {n} source(s)",
                    span.weights.len(),
                    span.counts.len()
                )));
            }
            if k > 0 && span.from < self.weights[k - 1].from {
                return Err(bad(format!(
                    "weight span {k} starts before the one before it"
                )));
            }
        }
        normalized(&last.weights, Some(n))
            .map_err(|p| bad(format!("the weights in force: {p}")))?;
        let since: Option<u64> = counts
            .iter()
            .zip(&last.counts)
            .try_fold(0u64, |sum, (c, b)| sum.checked_add(c.checked_sub(*b)?));
        if last.from > self.consumed || since != Some(self.consumed - last.from) {
            return Err(bad(format!(
                "the sources' counts ({counts:?}) do not add up to the {} positions consumed",
                self.consumed
            )));
        }
        Ok(())
    }

    /// Checks that the weights in force are `weights` (normalized to `norm`), else
    /// [`SourceError::MixtureMismatch`] about the weights.
    pub(crate) fn check_weights(&self, weights: &[f64], norm: &[f64]) -> Result<()> {
        if self.weights_in_force_are(norm) {
            return Ok(());
        }
        Err(SourceError::MixtureMismatch {
            what: "the weights".into(),
            saved: format!("{:?}", self.current_weights()),
            here: format!("{weights:?}"),
        }
        .into())
    }

    /// Whether the weights in force, normalized, are `norm`, bit for bit.
    pub(crate) fn weights_in_force_are(&self, norm: &[f64]) -> bool {
        normalized(self.current_weights(), None).is_ok_and(|w| {
            w.len() == norm.len() && w.iter().zip(norm).all(|(x, y)| x.to_bits() == y.to_bits())
        })
    }

    /// The weights' history with `weights` in force from the state's position on, where
    /// each source's count is `counts` (replacing a span that starts there already).
    pub(crate) fn history_with(&self, weights: &[f64], counts: &[u64]) -> Vec<WeightSpan> {
        let mut history = self.weights.clone();
        if history
            .last()
            .is_some_and(|span| span.from == self.consumed)
        {
            history.pop();
        }
        history.push(WeightSpan {
            from: self.consumed,
            weights: weights.to_vec(),
            counts: counts.to_vec(),
        });
        history
    }
}

impl<C: SourceRecord> MixtureState<C> {
    /// Combines the states of all ranks of one run, indexed by rank, into the one
    /// rank-agnostic state: they must be equal. States of different runs are
    /// [`SourceError::MixtureMismatch`] naming the first thing that differs — the version,
    /// seed, stop rule, weights' history, skipped steps, world size, batch size, or what
    /// identifies a source's own run (its dataset, order, seed, ...) — found before the
    /// counts are compared, as [`Checkpoint::merge`] and
    /// [`DocumentsCheckpoint::merge`](crate::source::DocumentsCheckpoint::merge) do; ranks
    /// of one run that consumed unequal counts are [`SourceError::UnequalRanks`] (each
    /// rank's `(0, consumed)`: a mixture has no epoch of its own); ranks at one count whose
    /// sources stand apart, [`SourceError::MixtureMismatch`] about that source's state;
    /// none at all [`SourceError::Zero`]`("states")`.
    pub fn merge(states: &[Self]) -> Result<Self> {
        let Some(first) = states.first() else {
            return Err(SourceError::Zero("states").into());
        };
        let mismatch =
            |(what, saved, here): Difference| SourceError::MixtureMismatch { what, saved, here };
        if let Some(differs) = against_rank_0(states, Self::run_difference) {
            return Err(mismatch(differs).into());
        }
        if states
            .iter()
            .any(|s| (s.consumed, s.step) != (first.consumed, first.step))
        {
            return Err(SourceError::UnequalRanks {
                positions: states.iter().map(|s| (0, s.consumed)).collect(),
            }
            .into());
        }
        if let Some(differs) = against_rank_0(states, Self::sources_difference) {
            return Err(mismatch(differs).into());
        }
        Ok(first.clone())
    }

    /// The first field of what identifies the run (everything but where it stands: the
    /// count, the step and each source's place) in which `other` differs, as (what, value
    /// here, value there).
    fn run_difference(&self, other: &Self) -> Option<Difference> {
        FirstDifference::new()
            .shown("the state version", self.version, other.version)
            .shown("the seed", self.seed, other.seed)
            .shown("the stop rule", self.stop.name(), other.stop.name())
            .shown(
                "the number of sources",
                self.sources.len(),
                other.sources.len(),
            )
            .debug("the weights' history", &self.weights, &other.weights)
            .debug("the skipped steps", &self.skip, &other.skip)
            .shown("the world size", self.world_size, other.world_size)
            .shown("the batch size", self.batch_size, other.batch_size)
            .then(|| {
                (self.sources.iter().zip(&other.sources))
                    .enumerate()
                    .find_map(|(i, (a, b))| {
                        let (what, saved, here) = a.run_difference(b)?;
                        Some((format!("{what} of source {i}"), saved, here))
                    })
            })
            .first()
    }

    /// The first source whose state differs, as (what, value here, value there).
    fn sources_difference(&self, other: &Self) -> Option<Difference> {
        let i = (self.sources.iter().zip(&other.sources)).position(|(a, b)| a != b)?;
        Some((
            format!("source {i}'s state"),
            format!("{:?}", self.sources[i]),
            format!("{:?}", other.sources[i]),
        ))
    }
}

/// A source's own state inside a [`MixtureState`]: a sampler's [`Checkpoint`], a
/// [`DocumentsCheckpoint`](crate::source::DocumentsCheckpoint), or a
/// [`State`](crate::source::State) of any of them (implemented in its own file). Sealed:
/// only these implement it.
pub trait SourceRecord: Clone + PartialEq + std::fmt::Debug + sealed::Sealed {}

impl SourceRecord for Checkpoint {}

impl SourceRecord for DocumentsCheckpoint {}

pub(crate) mod sealed {
    use crate::source::documents::checkpoint::DocumentsCheckpoint;
    use crate::source::sampling::checkpoint::Checkpoint;
    use crate::source::sampling::difference::Difference;

    /// Keeps [`SourceRecord`](super::SourceRecord) to the crate's states, and says what
    /// identifies a source's run apart from where it stands.
    pub trait Sealed {
        /// The first field of what identifies the run (not where it stands) in which
        /// `other` differs.
        fn run_difference(&self, other: &Self) -> Option<Difference>;
    }

    impl Sealed for Checkpoint {
        fn run_difference(&self, other: &Self) -> Option<Difference> {
            self.difference(other)
        }
    }

    impl Sealed for DocumentsCheckpoint {
        fn run_difference(&self, other: &Self) -> Option<Difference> {
            DocumentsCheckpoint::run_difference(self, other)
        }
    }
}

impl<C: Serialize> MixtureState<C> {
    /// The text form: the serde record (see [`MixtureState`]) as JSON.
    pub fn to_text(&self) -> String {
        serde_json::to_string_pretty(self)
            .expect("a mixture state is numbers, strings and lists of them, which serialize")
    }
}

impl<C: DeserializeOwned> MixtureState<C> {
    /// Reads the form [`to_text`](Self::to_text) writes; anything else (not JSON, a key
    /// missing, unknown or twice, a value of the wrong type, a source's record that does
    /// not read) is [`SourceError::BadCheckpointText`] naming the line and column. A state
    /// of another [`MIXTURE_STATE_VERSION`] reads if its keys do (a mixture then refuses
    /// it); if they do not, the error says which version it is.
    pub fn from_text(text: &str) -> Result<Self> {
        read_text(text, |bare| {
            other_version(text, "a mixture state", MIXTURE_STATE_VERSION, bare)
                .unwrap_or_else(|| bare.to_owned())
        })
    }
}
