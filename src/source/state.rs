//! [`State`]: where a run of any source stands, rank-agnostic — one serde record, tagged by
//! the kind of source (`"kind"`) and versioned by it — with its one merge, its one text
//! form and its one check that a text is of this build's format.
//!
//! A state is one of the sources' own records: a [`Checkpoint`] (token windows, records),
//! a [`DocumentsCheckpoint`] (packed documents) or a [`MixtureState`] whose `sources` are
//! its members' states, each a `State` of its own. The Python layer's `state_dict()` is the
//! same record as a dict.

use serde::{Deserialize, Serialize};

use super::documents::DocumentsCheckpoint;
use super::mixture::MixtureState;
use super::sampling::checkpoint::Checkpoint;
use super::sampling::checkpoint_text::read_text;
use super::sampling::difference::against_rank_0;
use crate::error::source::SourceError;
use crate::error::Result;

/// Where a run stands, for any source: what [`Loader::state`](crate::Loader::state)
/// returns and [`LoaderBuilder::resume`](crate::LoaderBuilder::resume) takes.
///
/// Rank-agnostic: after the same number of pops every rank's state is the same, and a run
/// resumed from it on any world size continues the same walk. Its serde form is one record
/// with a `"kind"` key (`"windows"`, `"documents"` or `"mixture"`) beside the kind's own
/// keys (each with its `version`); [`to_text`](Self::to_text) writes it as JSON.
///
/// ```
/// # use pinring::source::{write_shard, TokenShards};
/// # use pinring::{Loader, State};
/// # let dir = std::env::temp_dir().join(format!("pinring-state-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// # write_shard(dir.join("a.bin"), &(0..4000u16).collect::<Vec<_>>())?;
/// let source = TokenShards::glob(dir.join("*.bin"))?.windows(65).build()?;
/// let mut loader = Loader::builder(source.clone()).batch_size(4).build()?;
/// for _ in 0..3 {
///     loader.pop()?.expect("a batch");
/// }
/// let text = loader.state().to_text();
/// let state = State::from_text(&text)?;
/// assert_eq!(state.step(), 3);
/// // Resumed on two ranks, each goes on from step 3.
/// let mut rank1 = Loader::builder(source).batch_size(4).rank(1).world_size(2).resume(&state).build()?;
/// assert_eq!(rank1.pop()?.expect("a batch").step(), Some(3));
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum State {
    /// Token windows or records: the sampler's [`Checkpoint`].
    Windows(Checkpoint),
    /// Packed documents: the walk's [`DocumentsCheckpoint`].
    Documents(DocumentsCheckpoint),
    /// A mixture: its [`MixtureState`], each source's state a `State`.
    Mixture(MixtureState<State>),
}

impl State {
    /// The kind's name, as the `"kind"` key holds it.
    pub fn kind(&self) -> &'static str {
        match self {
            State::Windows(_) => "windows",
            State::Documents(_) => "documents",
            State::Mixture(_) => "mixture",
        }
    }

    /// The kind in words, for errors: "a state of token windows or records", ...
    pub(crate) fn described(&self) -> &'static str {
        match self {
            State::Windows(_) => "a state of token windows or records",
            State::Documents(_) => "a state of packed documents",
            State::Mixture(_) => "a state of a mixture",
        }
    }

    /// The steps every rank completed: the step of the next batch.
    pub fn step(&self) -> u64 {
        match self {
            State::Windows(c) => c.step,
            State::Documents(c) => c.step,
            State::Mixture(m) => m.step,
        }
    }

    /// The skipped step ranges in force, as `(start, end)` pairs.
    pub fn skip(&self) -> &[(u64, u64)] {
        match self {
            State::Windows(c) => &c.skip,
            State::Documents(c) => &c.skip,
            State::Mixture(m) => &m.skip,
        }
    }

    /// The epoch the run stands in (a mixture has none of its own: 0).
    pub fn epoch(&self) -> u64 {
        match self {
            State::Windows(c) => c.epoch,
            State::Documents(c) => c.epoch,
            State::Mixture(_) => 0,
        }
    }

    /// The world size of the run that saved it (informative: a resume may change it).
    pub fn world_size(&self) -> u64 {
        match self {
            State::Windows(c) => c.world_size,
            State::Documents(c) => c.world_size,
            State::Mixture(m) => m.world_size,
        }
    }

    /// Combines every rank's state of one run, indexed by rank, into the one rank-agnostic
    /// state: they must be of one kind and equal (each kind's own merge says what differs,
    /// naming the first rank that differs from rank 0). None at all is
    /// [`SourceError::Zero`]`("states")`.
    pub fn merge(states: &[State]) -> Result<State> {
        let Some(first) = states.first() else {
            return Err(SourceError::Zero("states").into());
        };
        if let Some((what, saved, here)) = against_rank_0(states, |a, b| {
            (a.kind() != b.kind()).then(|| {
                (
                    "the kind of source".to_owned(),
                    a.kind().to_owned(),
                    b.kind().to_owned(),
                )
            })
        }) {
            return Err(SourceError::CheckpointMismatch { what, saved, here }.into());
        }
        Ok(match first {
            State::Windows(_) => {
                State::Windows(Checkpoint::merge(&collect(states, |s| match s {
                    State::Windows(c) => Some(c.clone()),
                    _ => None,
                }))?)
            }
            State::Documents(_) => {
                State::Documents(DocumentsCheckpoint::merge(&collect(states, |s| match s {
                    State::Documents(c) => Some(c.clone()),
                    _ => None,
                }))?)
            }
            State::Mixture(_) => {
                State::Mixture(MixtureState::merge(&collect(states, |s| match s {
                    State::Mixture(m) => Some(m.clone()),
                    _ => None,
                }))?)
            }
        })
    }

    /// The text form: the serde record as JSON (pretty-printed).
    pub fn to_text(&self) -> String {
        serde_json::to_string_pretty(self)
            .expect("a state is numbers, strings and lists of them, which serialize")
    }

    /// Reads the form [`to_text`](Self::to_text) writes. Anything else is
    /// [`SourceError::BadCheckpointText`] naming the line and column; a state of an earlier
    /// format (before states were tagged by kind, or of another version) says which
    /// version it is.
    pub fn from_text(text: &str) -> Result<State> {
        read_text(text, |bare| {
            untagged(text).unwrap_or_else(|| bare.to_owned())
        })
    }

    /// A state from its serde record as a JSON value (what the Python layer's dicts are);
    /// errors as [`from_text`](Self::from_text)'s, at line 0.
    pub fn from_value(value: serde_json::Value) -> Result<State> {
        let untagged = untagged_value(&value);
        serde_json::from_value(value).map_err(|e| {
            SourceError::BadCheckpointText {
                line: 0,
                column: 0,
                why: untagged.unwrap_or_else(|| e.to_string()),
            }
            .into()
        })
    }

    /// The state's serde record as a JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self)
            .expect("a state is numbers, strings and lists of them, which serialize")
    }
}

/// The states' records of the one kind `pick` takes (every state is of it: checked first).
fn collect<T>(states: &[State], pick: impl Fn(&State) -> Option<T>) -> Vec<T> {
    states.iter().filter_map(pick).collect()
}

/// Why a text without a `"kind"` key did not read: a state of the format before states were
/// tagged, by its version.
fn untagged(text: &str) -> Option<String> {
    untagged_value(&serde_json::from_str(text).ok()?)
}

/// As [`untagged`], for a JSON value.
fn untagged_value(value: &serde_json::Value) -> Option<String> {
    let map = value.as_object()?;
    if map.contains_key("kind") {
        return None;
    }
    let version = map.get("version").and_then(serde_json::Value::as_u64);
    Some(match version {
        Some(v) => format!(
            "a state of version {v} of an earlier pinring, before states named their kind \
             (\"kind\"), which this build cannot read: save the state again with this build, \
             or resume with the build that saved it"
        ),
        None => "not a pinring state: it has no \"kind\" key (\"windows\", \"documents\" or \
                 \"mixture\")"
            .to_owned(),
    })
}
