//! [`State`]: where a run of any source stands, rank-agnostic — one serde record, tagged by
//! the kind of source (`"kind"`) and versioned by it — with its one merge, its one text
//! form and its one check that a text is of this build's format.
//!
//! A state is one of the sources' own records: a [`Checkpoint`] (token windows, records),
//! a [`DocumentsCheckpoint`] (packed documents) or a [`MixtureState`] whose `sources` are
//! its members' states, each a `State` of its own. The Python layer's `state_dict()` is the
//! same record as a dict.

use serde::{Deserialize, Serialize};

use super::documents::checkpoint::{DocumentsCheckpoint, DOCUMENTS_CHECKPOINT_VERSION};
use super::mixture::state::sealed::Sealed;
use super::mixture::state::{MixtureState, SourceRecord, MIXTURE_STATE_VERSION};
use super::sampling::checkpoint::{Checkpoint, CHECKPOINT_VERSION};
use super::sampling::checkpoint_text::read_text;
use super::sampling::difference::{against_rank_0, Difference};
use crate::error::source::SourceError;
use crate::error::Result;

/// Where a run stands, for any source: what [`Loader::state`](crate::Loader::state)
/// returns and [`LoaderBuilder::resume`](crate::LoaderBuilder::resume) takes.
///
/// Rank-agnostic: after the same number of pops every rank's state is the same, and a run
/// resumed from it on any world size continues the same walk. Its serde form is one record
/// with a `"kind"` key (`"windows"`, `"documents"` or `"mixture"`) beside the kind's own
/// keys (each with its `version`), placed before the record's `"step"` (after the keys
/// that say what run it is of); [`to_text`](Self::to_text) writes it as JSON.
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
#[derive(Debug, Clone, PartialEq, Deserialize)]
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
                    "the kind of source (the states are of different kinds: not of one run)"
                        .to_owned(),
                    a.described().to_owned(),
                    b.described().to_owned(),
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

    /// Reads the form [`to_text`](Self::to_text) writes. Text that is not JSON is
    /// [`SourceError::BadCheckpointText`] naming the line and column; JSON that is not a
    /// state is refused as [`from_value`](Self::from_value) refuses it.
    pub fn from_text(text: &str) -> Result<State> {
        let value: serde_json::Value = read_text(text, str::to_owned)?;
        Self::from_value(value)
    }

    /// A state from its serde record as a JSON value (what the Python layer's dicts are).
    /// Anything else is [`SourceError::BadCheckpointText`] (at line 0) saying what is wrong
    /// in the words of a record: a key missing or unknown by name, a value by its place
    /// (`state["skip"][0]: ...`); a state of another version names that version, and one
    /// of the format before states were tagged (no `"kind"`) says so.
    pub fn from_value(value: serde_json::Value) -> Result<State> {
        let bad = |why: String| -> crate::error::Error { SourceError::bad_state(why).into() };
        let serde_json::Value::Object(mut map) = value else {
            return Err(bad(
                "not a pinring state: a state is a record (a JSON object, a dict) of named \
                 values"
                    .to_owned(),
            ));
        };
        let Some(kind) = map.remove("kind") else {
            return Err(bad(untagged_value(&map)));
        };
        let version = map.get("version").and_then(serde_json::Value::as_u64);
        let record = serde_json::Value::Object(map);
        let (named, current, read) = match kind.as_str() {
            Some("windows") => (
                "a TokenWindows or FixedRecords",
                CHECKPOINT_VERSION,
                serde_path_to_error::deserialize(record).map(State::Windows),
            ),
            Some("documents") => (
                "a Documents",
                DOCUMENTS_CHECKPOINT_VERSION,
                serde_path_to_error::deserialize(record).map(State::Documents),
            ),
            Some("mixture") => (
                "a Mixture",
                MIXTURE_STATE_VERSION,
                serde_path_to_error::deserialize(record).map(State::Mixture),
            ),
            _ => {
                return Err(bad(format!(
                    "not a pinring state: its kind is {kind}, not \"windows\", \"documents\" \
                     or \"mixture\""
                )))
            }
        };
        read.map_err(|e| {
            let why = in_words(&e, named);
            bad(match version {
                Some(v) if v != u64::from(current) => format!(
                    "{named} state of version {v}, which this build (version {current}) cannot \
                     read: {why}"
                ),
                _ => why,
            })
        })
    }

    /// The state's serde record as a JSON value.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self)
            .expect("a state is numbers, strings and lists of them, which serialize")
    }
}

/// A mixture's state holds its members' states as `State`s.
impl SourceRecord for State {}

impl Sealed for State {
    fn run_difference(&self, other: &Self) -> Option<Difference> {
        match (self, other) {
            (State::Windows(a), State::Windows(b)) => a.run_difference(b),
            (State::Documents(a), State::Documents(b)) => a.run_difference(b),
            (State::Mixture(a), State::Mixture(b)) => {
                (a != b).then(|| ("the mixture".to_owned(), format!("{a:?}"), format!("{b:?}")))
            }
            (a, b) => Some((
                "the kind of source".to_owned(),
                a.kind().to_owned(),
                b.kind().to_owned(),
            )),
        }
    }
}

impl Serialize for State {
    /// The kind's record with its `"kind"` key before `"step"`.
    fn serialize<S: serde::Serializer>(
        &self,
        serializer: S,
    ) -> std::result::Result<S::Ok, S::Error> {
        let record = match self {
            State::Windows(c) => serde_json::to_value(c),
            State::Documents(c) => serde_json::to_value(c),
            State::Mixture(m) => serde_json::to_value(m),
        }
        .map_err(serde::ser::Error::custom)?;
        let serde_json::Value::Object(fields) = record else {
            return Err(serde::ser::Error::custom("a state's record is a map"));
        };
        let mut out = serde_json::Map::with_capacity(fields.len() + 1);
        for (key, value) in fields {
            if key == "step" {
                out.insert("kind".to_owned(), self.kind().into());
            }
            out.insert(key, value);
        }
        out.serialize(serializer)
    }
}

/// The states' records of the one kind `pick` takes (every state is of it: checked first).
fn collect<T>(states: &[State], pick: impl Fn(&State) -> Option<T>) -> Vec<T> {
    states.iter().filter_map(pick).collect()
}

/// serde's complaint about a state record of a `named` kind ("a Documents"), in the words
/// of a record: keys by name, values by their place (`state["skip"][0]`).
fn in_words(e: &serde_path_to_error::Error<serde_json::Error>, named: &str) -> String {
    use serde_path_to_error::Segment;
    let mut at = String::new();
    for segment in e.path().iter() {
        match segment {
            Segment::Map { key } => at.push_str(&format!("[{key:?}]")),
            Segment::Seq { index } => at.push_str(&format!("[{index}]")),
            Segment::Enum { .. } | Segment::Unknown => {}
        }
    }
    let text = e.inner().to_string();
    let quoted = |rest: &str| rest.split('`').nth(1).unwrap_or_default().to_owned();
    let inside = if at.is_empty() {
        String::new()
    } else {
        format!(" in state{at}")
    };
    if let Some(rest) = text.strip_prefix("missing field ") {
        format!(
            "not a pinring state: the key {:?} is missing{inside}",
            quoted(rest)
        )
    } else if let Some(rest) = text.strip_prefix("unknown field ") {
        format!(
            "not a pinring state: unknown key {:?}{inside} ({named} state has the keys its \
             loader's state() writes, no others)",
            quoted(rest)
        )
    } else if let Some((got, want)) = text
        .strip_prefix("invalid type: ")
        .or_else(|| text.strip_prefix("invalid value: "))
        .and_then(|rest| rest.split_once(", expected "))
    {
        let want = match want {
            "u64" => "an int in 0..2**64",
            "u32" => "an int in 0..2**32",
            "a string" => "a str",
            "a sequence" => "a list",
            other => other,
        };
        format!("state{at} must be {want}, got {got}")
    } else if at.is_empty() {
        format!("{named} state that does not read: {text}")
    } else {
        format!("state{at}: {text}")
    }
}

/// Why a record without a `"kind"` key did not read: a state of the format before states
/// were tagged, by its version, or no state at all.
fn untagged_value(map: &serde_json::Map<String, serde_json::Value>) -> String {
    let version = map.get("version").and_then(serde_json::Value::as_u64);
    match version {
        Some(v) => format!(
            "a state of version {v} of an earlier pinring, before states named their kind \
             (\"kind\"), which this build cannot read: save the state again with this build, \
             or resume with the build that saved it"
        ),
        None => "not a pinring state: it has no \"kind\" key (\"windows\", \"documents\" or \
                 \"mixture\")"
            .to_owned(),
    }
}
