//! [`DocumentsCheckpoint`]: where a packed-documents run stands, the same on every rank,
//! and what a source checks before it resumes from it.

use serde::{Deserialize, Serialize};

use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::sampling::checkpoint::Fingerprint;
use crate::source::sampling::checkpoint_text::{other_version, read_text};
use crate::source::sampling::difference::{against_rank_0, Difference, FirstDifference};

use super::order::DocOrder;
use super::walk::Cursor;

/// The version of the [`DocumentsCheckpoint`] layout and of the walk it describes: it goes
/// up whenever a field is added, removed or changes meaning, or the walk changes which
/// documents a cursor or a step stands for. A source refuses a checkpoint of another
/// version, and [`DocumentsCheckpoint::from_text`] names the version of one it cannot
/// read.
///
/// Version 2 added `skip` (the skipped steps, issue 22); version 3 `contents`, each
/// file's content fingerprint ([`Fingerprint::contents`]), so that a state resumes only on
/// the data it was saved on. Issue 31 added two keys within version 3, written only when
/// not at their default — `align_to_bos: false` (contiguous windows, whose cursor `doc` is
/// a token) and `max_docs_formula: true` — so that every text written before them reads
/// and means the same, and a build before them refuses a text that has them (an unknown
/// key).
pub const DOCUMENTS_CHECKPOINT_VERSION: u32 = 3;

/// Where a packed-documents run stands, independent of rank and world size: the walk's
/// cursor after the steps every rank popped, and the step count — plus what a source
/// checks before it resumes from it.
///
/// After `k` steps every rank's checkpoint is the same ([`merge`](Self::merge) checks
/// that): the ranks walk one walk, each packing its share of each step. A
/// [`Documents`](crate::source::Documents) of any rank and world size resumes from it
/// ([`iter_from`](crate::source::Documents::iter_from)) if the dataset (file names, sizes and
/// contents: the same files, in any folder), `bos`, order, seed, schedule and `max_docs`
/// are the same: the walk goes on from the cursor with the new
/// world size, so every document is delivered at most once across the runs and none is
/// skipped but those the walk itself drops (a shard's tail too short for a step, the
/// cut-off tails of long documents) and those of the skipped steps
/// ([`DocumentsBuilder::skip_steps`](crate::source::DocumentsBuilder::skip_steps), which it
/// records, so a resumed run keeps skipping them).
///
/// Plain data. Through serde it is one flat record of the keys `version`, `format`,
/// `files`, `sizes`, `contents` (the dataset's [`Fingerprint`]), `bos`, `order`, `seed`, `schedule`
/// (a list of `[from_step, tokens_per_batch, max_seq_len]`, the first from step 0),
/// `max_docs` (0: modded-nanogpt's rule), `max_docs_formula` and `align_to_bos` (each only
/// when not at its default: `false`, `true`), `epoch`, `shard`, `doc`, `step`, `world_size`
/// and `skip` (a list of `[start, end]`), read back strictly (no key missing but those two, none
/// unknown);
/// [`to_text`](Self::to_text) and [`from_text`](Self::from_text) give it as JSON.
///
/// ```
/// use pinring::source::{write_shard, Documents, DocumentsCheckpoint, TokenShards};
/// # let dir = std::env::temp_dir().join(format!("pinring-docckpt-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// // Documents of 10 tokens: 50256, then 9 others.
/// let tokens: Vec<u16> = (0..1000u16).map(|i| if i % 10 == 0 { 50256 } else { i }).collect();
/// write_shard(dir.join("train_000.bin"), &tokens)?;
/// let shards = TokenShards::open([dir.join("train_000.bin")])?;
/// let rank = |r| Documents::builder(shards.clone()).tokens_per_batch(19).max_seq_len(64)
///     .shard(r, 2).build();
/// // Each rank popped 3 steps: both say the same.
/// let (a, b) = (rank(0)?.checkpoint_after(None, 3)?, rank(1)?.checkpoint_after(None, 3)?);
/// let state = DocumentsCheckpoint::merge(&[a, b])?;
/// // A step gives each of 2 ranks 20 tokens: 2 documents each, 4 in all.
/// assert_eq!((state.step, state.epoch, state.shard, state.doc), (3, 0, 0, 12));
/// assert_eq!(DocumentsCheckpoint::from_text(&state.to_text())?, state);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "Record", try_from = "Record")]
pub struct DocumentsCheckpoint {
    /// The layout's version: [`DOCUMENTS_CHECKPOINT_VERSION`] when made by this crate.
    pub version: u32,
    /// The dataset: format, file names, sizes and content fingerprints (`record_bytes` 0).
    pub dataset: Fingerprint,
    /// The token that starts a document.
    pub bos: u32,
    /// The order's name: `"sequential"` or `"shuffled"` ([`DocOrder::name`]).
    pub order: String,
    /// The order's seed (0 for `"sequential"`).
    pub seed: u64,
    /// The schedule: `(from_step, tokens_per_batch, max_seq_len)` entries, the first from
    /// step 0, strictly increasing.
    pub schedule: Vec<(u64, u64, u64)>,
    /// The `max_docs` given; 0 when each step's is modded-nanogpt's rule.
    pub max_docs: u64,
    /// With `max_docs` 0: whether the rule is modded-nanogpt's formula alone (no table).
    pub max_docs_formula: bool,
    /// The walk: whole documents from their `bos` (`true`), or contiguous windows
    /// (`false`: `doc` is then the next window's first token in `shard`).
    pub align_to_bos: bool,
    /// The walk's epoch.
    pub epoch: u64,
    /// The walk's shard (sequential order; 0 in shuffled order).
    pub shard: u64,
    /// The walk's cursor: the next document of `shard` (sequential order), or the next
    /// position of the epoch's permutation (shuffled order), or the next window's first
    /// token in `shard` (contiguous windows).
    pub doc: u64,
    /// Steps done: the next step's number (optimizer steps: with `grad_accum_steps` `G`
    /// each is `G` pops; a resume may use another `G`).
    pub step: u64,
    /// The world size it was saved at (informative: a resume may use another).
    pub world_size: u64,
    /// The skipped steps in force, as half-open ranges `(start, end)`, sorted and
    /// disjoint ([`DocumentsBuilder::skip_steps`](crate::source::DocumentsBuilder::skip_steps)):
    /// a run resumed from here skips them too (and any its own builder adds). Always
    /// empty in a source's part of a mixture's state: the mixture's skipped steps are its
    /// own.
    pub skip: Vec<(u64, u64)>,
}

impl DocumentsCheckpoint {
    /// The walk's cursor.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            epoch: self.epoch,
            shard: self.shard,
            doc: self.doc,
        }
    }

    /// The order it was saved with; an unknown name is
    /// [`SourceError::BadCheckpointText`].
    pub fn order(&self) -> Result<DocOrder> {
        DocOrder::from_name(&self.order, self.seed)
            .ok_or_else(|| SourceError::bad_state(unknown_order(&self.order)).into())
    }

    /// Combines the checkpoints of all ranks of one run, indexed by rank, into the one
    /// rank-agnostic state: they must be equal. Ranks at different steps are
    /// [`SourceError::UnequalSteps`], naming each rank's step; checkpoints of different
    /// runs (another world size or other skipped steps too, or at the same step but
    /// different cursors) are [`SourceError::DocumentsCheckpointMismatch`]; none at all is
    /// [`SourceError::Zero`]`("checkpoints")`.
    pub fn merge(states: &[DocumentsCheckpoint]) -> Result<DocumentsCheckpoint> {
        let Some(first) = states.first() else {
            return Err(SourceError::Zero("checkpoints").into());
        };
        let differs = against_rank_0(states, |first, state| {
            FirstDifference::new()
                .then(|| first.run_difference(state))
                .shown("the world size", first.world_size, state.world_size)
                .debug("the skipped steps", &first.skip, &state.skip)
                .first()
        });
        if let Some((what, saved, here)) = differs {
            return Err(SourceError::DocumentsCheckpointMismatch { what, saved, here }.into());
        }
        if states.iter().any(|s| s.step != first.step) {
            return Err(SourceError::UnequalSteps {
                steps: states.iter().map(|s| s.step).collect(),
            }
            .into());
        }
        if let Some((rank, state)) = states
            .iter()
            .enumerate()
            .find(|(_, s)| s.cursor() != first.cursor())
        {
            return Err(SourceError::DocumentsCheckpointMismatch {
                what: format!("the cursor at step {} (rank {rank} against rank 0)", first.step),
                saved: cursor_text(first.cursor()),
                here: cursor_text(state.cursor()),
            }
            .into());
        }
        Ok(first.clone())
    }

    /// The first difference in what a resume must match (everything but the position, the
    /// world size and the skipped steps), as (what, value in `self`, value in `other`).
    pub(crate) fn run_difference(&self, other: &Self) -> Option<Difference> {
        FirstDifference::new()
            .shown("the checkpoint version", self.version, other.version)
            .then(|| Fingerprint::difference(&self.dataset, &other.dataset))
            .shown("bos", self.bos, other.bos)
            .debug("the order", &self.order, &other.order)
            .shown("the seed", self.seed, other.seed)
            .debug("the schedule", &self.schedule, &other.schedule)
            .shown(
                "max_docs",
                max_docs_text(self.max_docs, self.max_docs_formula),
                max_docs_text(other.max_docs, other.max_docs_formula),
            )
            .shown("align_to_bos", self.align_to_bos, other.align_to_bos)
            .first()
    }

    /// The text form: the serde record (see [`DocumentsCheckpoint`]) as JSON, one key a
    /// line (a schedule entry's numbers on lines of their own).
    /// [`from_text`](Self::from_text) reads it back.
    pub fn to_text(&self) -> String {
        serde_json::to_string_pretty(self)
            .expect("a checkpoint is integers and strings, which always serialize")
    }

    /// Reads the form [`to_text`](Self::to_text) writes. Anything else — not JSON, a key
    /// missing, unknown or given twice, a value of the wrong type, more files than sizes
    /// (or than contents), an unknown order, a schedule entry that is not three numbers, a skipped range
    /// that is not two numbers — is [`SourceError::BadCheckpointText`] naming the line
    /// and column. A checkpoint of another [`DOCUMENTS_CHECKPOINT_VERSION`] reads if its
    /// keys do (a source then refuses it); if they do not, the error says which version
    /// it is.
    ///
    /// ```
    /// use pinring::source::{DocumentsCheckpoint, SourceError};
    /// use pinring::Error;
    /// let text = "{\n  \"version\": 3,\n  \"window\": 3\n}";
    /// let err = DocumentsCheckpoint::from_text(text).unwrap_err();
    /// let Error::Source(SourceError::BadCheckpointText { line, .. }) = err else { panic!() };
    /// assert_eq!(line, 3); // an unknown key
    /// // Version 2 had no `contents`:
    /// let text = "{\"version\": 2, \"format\": \"u16\"}";
    /// let err = DocumentsCheckpoint::from_text(text).unwrap_err();
    /// assert!(err.to_string().contains("a documents checkpoint of version 2, which this build \
    ///     (version 3) cannot read"), "{err}");
    /// ```
    pub fn from_text(text: &str) -> Result<DocumentsCheckpoint> {
        read_text(text, |bare| {
            other_version(
                text,
                "a documents checkpoint",
                DOCUMENTS_CHECKPOINT_VERSION,
                bare,
            )
            .unwrap_or_else(|| bare.to_owned())
        })
    }
}

/// A cursor in words.
pub(super) fn cursor_text(c: Cursor) -> String {
    format!("epoch {}, shard {}, document {}", c.epoch, c.shard, c.doc)
}

fn max_docs_text(max_docs: u64, formula: bool) -> String {
    if max_docs == 0 && formula {
        "modded-nanogpt's formula (0, max_docs_formula)".to_owned()
    } else if max_docs == 0 {
        "modded-nanogpt's rule (0)".to_owned()
    } else {
        max_docs.to_string()
    }
}

fn unknown_order(name: &str) -> String {
    format!("unknown order {name:?}: expected \"sequential\" or \"shuffled\"")
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_true(b: &bool) -> bool {
    *b
}

fn yes() -> bool {
    true
}

/// A [`DocumentsCheckpoint`]'s serde form: one flat record of plain values, read strictly.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Record {
    version: u32,
    format: String,
    files: Vec<String>,
    sizes: Vec<u64>,
    contents: Vec<u64>,
    bos: u32,
    order: String,
    seed: u64,
    schedule: Vec<(u64, u64, u64)>,
    max_docs: u64,
    #[serde(default, skip_serializing_if = "is_false")]
    max_docs_formula: bool,
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    align_to_bos: bool,
    epoch: u64,
    shard: u64,
    doc: u64,
    step: u64,
    world_size: u64,
    skip: Vec<(u64, u64)>,
}

impl From<DocumentsCheckpoint> for Record {
    fn from(c: DocumentsCheckpoint) -> Self {
        Record {
            version: c.version,
            format: c.dataset.format,
            files: c.dataset.files,
            sizes: c.dataset.sizes,
            contents: c.dataset.contents,
            bos: c.bos,
            order: c.order,
            seed: c.seed,
            schedule: c.schedule,
            max_docs: c.max_docs,
            max_docs_formula: c.max_docs_formula,
            align_to_bos: c.align_to_bos,
            epoch: c.epoch,
            shard: c.shard,
            doc: c.doc,
            step: c.step,
            world_size: c.world_size,
            skip: c.skip,
        }
    }
}

impl TryFrom<Record> for DocumentsCheckpoint {
    type Error = String;

    fn try_from(r: Record) -> Result<Self, String> {
        let dataset = Fingerprint::from_record(r.format, 0, r.files, r.sizes, r.contents)?;
        if DocOrder::from_name(&r.order, r.seed).is_none() {
            return Err(unknown_order(&r.order));
        }
        Ok(DocumentsCheckpoint {
            version: r.version,
            dataset,
            bos: r.bos,
            order: r.order,
            seed: r.seed,
            schedule: r.schedule,
            max_docs: r.max_docs,
            max_docs_formula: r.max_docs_formula,
            align_to_bos: r.align_to_bos,
            epoch: r.epoch,
            shard: r.shard,
            doc: r.doc,
            step: r.step,
            world_size: r.world_size,
            skip: r.skip,
        })
    }
}
