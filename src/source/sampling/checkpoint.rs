//! Checkpoints: where a run stands in its epoch, counted over all ranks together, and what
//! a sampler needs to check before it resumes from one.

use std::path::Path;

use serde::{Deserialize, Serialize};

use super::checkpoint_text::{other_version, read_text};
use super::difference::{against_rank_0, Difference, FirstDifference};
use super::order::Order;
use crate::error::source::SourceError;
use crate::error::Result;

/// The version of the [`Checkpoint`] layout and of the sampling it describes. A sampler
/// refuses a checkpoint of another version.
///
/// Version 2 added `step` and `skip` (steps and skipped steps, issue 22); version 3
/// `contents`, each file's content fingerprint ([`Fingerprint::contents`]), so that a
/// state resumes only on the data it was saved on.
///
/// The rule: it goes up by one whenever a field is added, removed, renamed or changes
/// meaning, or the sampling changes which window a position or an id stands for (the
/// orders, the shares of the ranks, the grid), so that an old checkpoint is refused by
/// name instead of resuming at the wrong place. It does not change for anything else.
/// The text form ([`Checkpoint::to_text`]) and the Python state dict carry it as
/// `version`.
///
/// ```
/// use pinring::source::{write_shard, TokenShards, CHECKPOINT_VERSION};
/// # let dir = std::env::temp_dir().join(format!("pinring-version-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// write_shard(dir.join("a.bin"), &[0; 100])?;
/// let state = TokenShards::open([dir.join("a.bin")])?.windows(9).build()?.checkpoint(0, 0);
/// assert_eq!(state.version, CHECKPOINT_VERSION);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
pub const CHECKPOINT_VERSION: u32 = 3;

/// What identifies a dataset in a [`Checkpoint`]: its format, and each file's name, size
/// and content fingerprint, in the sampler's order. Made by
/// [`Segmented::fingerprint`](crate::source::Segmented).
///
/// Files are named by their *file name* (the last component of the path, `train_000.bin`),
/// not by the path as given: a checkpoint must resume on another machine or cluster, where
/// the same shards sit under another directory, so the same files moved to (or copied into)
/// another folder resume. A file renamed does not: the names are part of the fingerprint
/// (they fix the files' order, which a pattern's sorted names give, and what states and
/// [`Location`](crate::Location)s call the files). Names and sizes in order pin down the
/// window grid (which windows exist and their ids); the content fingerprints pin down the
/// bytes: each is a 64-bit hash of the file's size, its first KiB (a token shard's header)
/// and 32 eight-byte words spread evenly to its end, read by position when the source opens
/// the file (about 1.3 KiB a file, whatever its size). So another tokenization with the same
/// naming and sizes (llm.c's shards are all 100M tokens), or other files under the same
/// names, is refused, naming the file; what a sample cannot see is a change between the
/// sampled bytes (a few tokens rewritten in place) — hashing every byte of a
/// multi-terabyte dataset at each start is not worth it.
///
/// ```
/// use pinring::source::{write_shard, Segmented, TokenShard, TokenShards};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-fingerprint-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// write_shard(dir.join("train_000.bin"), &[1, 2, 3])?;
/// let print = TokenShards::open([dir.join("train_000.bin")])?.fingerprint();
/// assert_eq!(print.format, "u16");
/// assert_eq!(print.files, ["train_000.bin"]);
/// assert_eq!(print.sizes, [1024 + 3 * 2]); // the header, then 3 tokens of 2 bytes
/// assert_eq!(print.contents, [TokenShard::open(dir.join("train_000.bin"))?.content()]);
/// // Other tokens of the same count: the same name and size, another content.
/// write_shard(dir.join("train_000.bin"), &[3, 2, 1])?;
/// let other = TokenShards::open([dir.join("train_000.bin")])?.fingerprint();
/// assert_eq!((&other.files, &other.sizes), (&print.files, &print.sizes));
/// assert_ne!(other.contents, print.contents);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fingerprint {
    /// The source's format: `"u16"` or `"u32"` for llm.c token shards of one width,
    /// `"raw-u16"` or `"raw-u32"` for raw token files ([`RawTokens`](crate::source::RawTokens)),
    /// the distinct ones sorted and joined by `+` when a set mixes them (`"u16+u32"`),
    /// `"records"` for fixed-size records, `"custom"` for a
    /// [`Segmented`](crate::source::Segmented) source that does not say.
    pub format: String,
    /// Bytes per record for `"records"`; 0 otherwise.
    pub record_bytes: u64,
    /// Each file's name (the path's last component, lossily UTF-8), in order.
    pub files: Vec<String>,
    /// Each file's size in bytes, in the same order as `files` (for a `"custom"` source,
    /// each segment's units).
    pub sizes: Vec<u64>,
    /// Each file's content fingerprint, in the same order as `files`
    /// ([`TokenShard::content`](crate::source::TokenShard::content),
    /// [`RecordFile::content`](crate::source::RecordFile::content)): a hash of its size and
    /// of bytes sampled at offsets that depend on the size alone. Empty for a source that
    /// gives none (the default [`Segmented::fingerprint`](crate::source::Segmented)); it
    /// has one per file or none.
    pub contents: Vec<u64>,
}

impl Fingerprint {
    /// An empty fingerprint of `format` (with `record_bytes`, 0 unless records).
    ///
    /// ```
    /// use pinring::source::Fingerprint;
    /// let print = Fingerprint::new("records", 64);
    /// assert_eq!((print.format.as_str(), print.record_bytes, print.files.len()), ("records", 64, 0));
    /// ```
    pub fn new(format: impl Into<String>, record_bytes: u64) -> Self {
        Fingerprint {
            format: format.into(),
            record_bytes,
            files: Vec::new(),
            sizes: Vec::new(),
            contents: Vec::new(),
        }
    }

    /// The fingerprint a checkpoint's serde record holds, where its `files`, `sizes` and
    /// `contents` pair up (`contents` may be empty); else why not.
    pub(crate) fn from_record(
        format: String,
        record_bytes: u64,
        files: Vec<String>,
        sizes: Vec<u64>,
        contents: Vec<u64>,
    ) -> Result<Self, String> {
        if files.len() != sizes.len() {
            return Err(format!(
                "`files` names {} file(s) but `sizes` gives {} size(s)",
                files.len(),
                sizes.len()
            ));
        }
        if !contents.is_empty() && contents.len() != files.len() {
            return Err(format!(
                "`files` names {} file(s) but `contents` gives {} content fingerprint(s)",
                files.len(),
                contents.len()
            ));
        }
        Ok(Fingerprint {
            format,
            record_bytes,
            files,
            sizes,
            contents,
        })
    }

    /// Adds the file at `path`, named by its last component, of `size` bytes, without a
    /// content fingerprint (a fingerprint has one for every file or none:
    /// [`push_file_with_content`](Self::push_file_with_content) gives them).
    ///
    /// ```
    /// use pinring::source::Fingerprint;
    /// let mut print = Fingerprint::new("u16", 0);
    /// print.push_file("/data/fineweb/train_000.bin".as_ref(), 200_001_024);
    /// assert_eq!((print.files, print.sizes), (vec!["train_000.bin".to_owned()], vec![200_001_024]));
    /// ```
    pub fn push_file(&mut self, path: &Path, size: u64) {
        let name = path
            .file_name()
            .unwrap_or(path.as_os_str())
            .to_string_lossy()
            .into_owned();
        self.files.push(name);
        self.sizes.push(size);
    }

    /// Adds the file at `path`, named by its last component, of `size` bytes and content
    /// fingerprint `content` (what [`TokenShard::content`](crate::source::TokenShard::content)
    /// and [`RecordFile::content`](crate::source::RecordFile::content) give, or a custom
    /// source's own hash of its bytes).
    ///
    /// ```
    /// use pinring::source::Fingerprint;
    /// let mut print = Fingerprint::new("u16", 0);
    /// print.push_file_with_content("/data/fineweb/train_000.bin".as_ref(), 200_001_024, 0x5eed);
    /// assert_eq!((print.files.len(), print.contents), (1, vec![0x5eed]));
    /// ```
    pub fn push_file_with_content(&mut self, path: &Path, size: u64, content: u64) {
        self.push_file(path, size);
        self.contents.push(content);
    }

    /// The first way `saved` differs from `here`: (what, saved value, value here).
    pub(crate) fn difference(saved: &Self, here: &Self) -> Option<Difference> {
        if saved.format != here.format {
            return Some((
                "the dataset's format".into(),
                format!("{:?}", saved.format),
                format!("{:?}", here.format),
            ));
        }
        if saved.record_bytes != here.record_bytes {
            return Some((
                "the record size".into(),
                saved.record_bytes.to_string(),
                here.record_bytes.to_string(),
            ));
        }
        if saved.files.len() != here.files.len() || saved.sizes.len() != here.sizes.len() {
            return Some((
                "the number of files".into(),
                saved.files.len().to_string(),
                here.files.len().to_string(),
            ));
        }
        for (i, (a, b)) in saved.files.iter().zip(&here.files).enumerate() {
            if a != b {
                return Some((
                    format!("file {i}'s name"),
                    format!("{a:?}"),
                    format!("{b:?}"),
                ));
            }
        }
        for (i, (a, b)) in saved.sizes.iter().zip(&here.sizes).enumerate() {
            if a != b {
                return Some((
                    format!("the size of file {i} ({:?})", here.files[i]),
                    a.to_string(),
                    b.to_string(),
                ));
            }
        }
        if saved.contents.len() != here.contents.len() {
            let count = |print: &Self| match print.contents.len() {
                0 => "none".to_owned(),
                n => format!("{n} (one per file)"),
            };
            return Some((
                "the files' content fingerprints".into(),
                count(saved),
                count(here),
            ));
        }
        for (i, (a, b)) in saved.contents.iter().zip(&here.contents).enumerate() {
            if a != b {
                return Some((
                    format!(
                        "the content of {} (file {i}: the same name and size, other bytes)",
                        here.files[i]
                    ),
                    format!("{a:#018x}"),
                    format!("{b:#018x}"),
                ));
            }
        }
        None
    }
}

/// Where a run stands, independent of how many ranks it runs on: the epoch, and how many
/// of that epoch's windows all ranks together have *consumed* (popped from their
/// pipelines — not merely decoded or in flight), plus what a sampler checks before it
/// resumes from it.
///
/// Plain data: integers and strings (and lists of them). Through serde it is one flat
/// record of the keys `version`, `format`, `record_bytes`, `files`, `sizes`, `contents`
/// (the dataset's [`Fingerprint`]), `window`, `stride`, `order`, `seed`, `windows`,
/// `epoch`, `consumed`, `world_size`, `batch_size`, `step` and `skip`, read back strictly
/// (no key missing, none unknown, as many sizes as files and contents as files or none, a
/// known order): [`to_text`](Self::to_text) and
/// [`from_text`](Self::from_text) give it as JSON, and the Python layer as the dict that
/// `torch.save` and `json` hold.
///
/// Made by [`Sampler::checkpoint`](crate::source::Sampler::checkpoint) (or
/// [`checkpoint_after`](crate::source::Sampler::checkpoint_after), after a resume) from the count
/// of samples this rank consumed; in a data-parallel run whose ranks pop in step, every
/// rank makes the same checkpoint ([`merge`](Self::merge) checks that). A sampler of any
/// rank and world size resumes from it with
/// [`iter_from_checkpoint`](crate::source::Sampler::iter_from_checkpoint) if the dataset
/// (file names, sizes and contents: the same files, in any folder), window, stride, order
/// and seed are the same; the world size and batch size may change.
///
/// `consumed` is a global position `c` in the epoch's order (see
/// [`Sampler`](crate::source::Sampler)): positions `0..c` were delivered and consumed, and a
/// resumed run delivers the rest of the epoch from `c` on.
///
/// ```
/// use pinring::source::{write_shard, Checkpoint, Order, TokenShards};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-checkpoint-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// write_shard(dir.join("train_000.bin"), &(0..1000u16).collect::<Vec<_>>())?;
/// let shards = TokenShards::open([dir.join("train_000.bin")])?;
/// let rank = |r| shards.clone().windows(9).order(Order::Shuffled { seed: 7 })
///     .shard(r, 2).batch_size(4).build();
/// // Two ranks popped 3 batches of 4 each in epoch 0: 24 windows consumed in all.
/// let (a, b) = (rank(0)?.checkpoint(0, 12), rank(1)?.checkpoint(0, 12));
/// let state = Checkpoint::merge(&[a, b])?;
/// assert_eq!((state.epoch, state.consumed, state.world_size), (0, 24, 2));
/// assert_eq!(Checkpoint::from_text(&state.to_text())?, state);
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "Fields", try_from = "Fields")]
pub struct Checkpoint {
    /// The layout's version: [`CHECKPOINT_VERSION`] when made by this crate.
    pub version: u32,
    /// The dataset: format, file names, sizes and content fingerprints.
    pub dataset: Fingerprint,
    /// Units (tokens, records) per window: `T + 1` for next-token training.
    pub window: u64,
    /// Units between grid windows' starts.
    pub stride: u64,
    /// The order's name: `"sequential"`, `"shuffled"` or `"random"` ([`Order::name`]).
    pub order: String,
    /// The order's seed (0 for `"sequential"`, which has none).
    pub seed: u64,
    /// Windows (draws, for `"random"`) in one epoch's order before any is dropped: `N`.
    pub windows: u64,
    /// The epoch, from 0.
    pub epoch: u64,
    /// How many windows of the epoch all ranks together consumed: the global position
    /// `c` in the epoch's order where the rest of the epoch starts (below `windows`;
    /// a finished epoch is the next one's start, `consumed` 0).
    pub consumed: u64,
    /// The world size it was saved at (informative: a resume may use another).
    pub world_size: u64,
    /// The sampler's batch size it was saved at, 0 if none was set (informative).
    pub batch_size: u64,
    /// Steps all ranks completed: the step number of the next batch (0 without a batch
    /// size, which numbers no steps). A resumed run numbers its batches on from here,
    /// whatever its world size and batch size.
    pub step: u64,
    /// The skipped steps in force, as half-open ranges `(start, end)`, sorted and
    /// disjoint ([`SamplerBuilder::skip_steps`](crate::source::SamplerBuilder::skip_steps)):
    /// a run resumed from here skips them too (and any its own builder adds).
    pub skip: Vec<(u64, u64)>,
}

impl Checkpoint {
    /// The order it was saved with, rebuilt from [`order`](Self::order) and
    /// [`seed`](Self::seed); an unknown name is [`SourceError::BadCheckpointText`].
    ///
    /// ```
    /// use pinring::source::{write_shard, Order, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-order-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 100])?;
    /// let order = Order::Random { seed: 11 };
    /// let state = TokenShards::open([dir.join("a.bin")])?.windows(9).order(order).build()?
    ///     .checkpoint(0, 5);
    /// assert_eq!((state.order.as_str(), state.seed), ("random", 11));
    /// assert_eq!(state.order()?, order);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn order(&self) -> Result<Order> {
        Order::from_name(&self.order, self.seed).ok_or_else(|| {
            SourceError::bad_state(format!(
                "unknown order {:?}: expected \"sequential\", \"shuffled\" or \"random\"",
                self.order
            ))
            .into()
        })
    }

    /// Combines the checkpoints of all ranks of one run, indexed by rank, into the one
    /// rank-agnostic state: they must be equal. Ranks at different positions are
    /// [`SourceError::UnequalRanks`], naming each rank's epoch and count (ranks that
    /// popped unequal numbers of samples cannot resume exactly); checkpoints of different
    /// runs are [`SourceError::CheckpointMismatch`]; none at all is
    /// [`SourceError::Zero`]`("checkpoints")`.
    ///
    /// ```
    /// use pinring::source::{write_shard, Checkpoint, SourceError, TokenShards};
    /// use pinring::Error;
    ///
    /// # let dir = std::env::temp_dir().join(format!("pinring-merge-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("a.bin"), &[0; 1000])?;
    /// let sampler = |r| TokenShards::open([dir.join("a.bin")]).unwrap()
    ///     .windows(9).shard(r, 2).batch_size(4).build().unwrap();
    /// // Rank 1 popped one batch more than rank 0.
    /// let err = Checkpoint::merge(&[sampler(0).checkpoint(0, 8), sampler(1).checkpoint(0, 12)])
    ///     .unwrap_err();
    /// let Error::Source(SourceError::UnequalRanks { positions }) = &err else { panic!("{err}") };
    /// assert_eq!(positions, &[(0, 16), (0, 24)]);
    /// assert!(err.to_string().contains("rank 0 at epoch 0 consumed 16"), "{err}");
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn merge(states: &[Checkpoint]) -> Result<Checkpoint> {
        let Some(first) = states.first() else {
            return Err(SourceError::Zero("checkpoints").into());
        };
        let run = |s: &Checkpoint| Checkpoint {
            epoch: 0,
            consumed: 0,
            step: 0,
            ..s.clone()
        };
        let differs = against_rank_0(states, |first, state| {
            (run(state) != run(first)).then(|| {
                first.difference(state).unwrap_or_else(|| {
                    (
                        "the checkpoint".into(),
                        format!("{first:?}"),
                        format!("{state:?}"),
                    )
                })
            })
        });
        if let Some((what, saved, here)) = differs {
            return Err(SourceError::CheckpointMismatch { what, saved, here }.into());
        }
        if states
            .iter()
            .any(|s| (s.epoch, s.consumed, s.step) != (first.epoch, first.consumed, first.step))
        {
            return Err(SourceError::UnequalRanks {
                positions: states.iter().map(|s| (s.epoch, s.consumed)).collect(),
            }
            .into());
        }
        Ok(first.clone())
    }

    /// The first difference in what identifies the run (everything but the position),
    /// as (what, value in `self`, value in `other`).
    pub(crate) fn difference(&self, other: &Checkpoint) -> Option<Difference> {
        FirstDifference::new()
            .shown("the checkpoint version", self.version, other.version)
            .then(|| Fingerprint::difference(&self.dataset, &other.dataset))
            .shown(
                "the window (units per window, T + 1)",
                self.window,
                other.window,
            )
            .shown("the stride", self.stride, other.stride)
            .debug("the order", &self.order, &other.order)
            .shown("the seed", self.seed, other.seed)
            .shown("windows per epoch", self.windows, other.windows)
            .shown("the world size", self.world_size, other.world_size)
            .shown("the batch size", self.batch_size, other.batch_size)
            .debug("the skipped steps", &self.skip, &other.skip)
            .first()
    }

    /// The text form: the serde record (see [`Checkpoint`]) as JSON, one key a line.
    /// [`from_text`](Self::from_text) reads it back.
    ///
    /// ```
    /// use pinring::source::{write_shard, Order, TokenShards};
    /// # let dir = std::env::temp_dir().join(format!("pinring-text-doc-{}", std::process::id()));
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// write_shard(dir.join("train_000.bin"), &[0; 1001])?;
    /// let state = TokenShards::open([dir.join("train_000.bin")])?.windows(11)
    ///     .order(Order::Shuffled { seed: 1337 }).shard(1, 2).batch_size(8).build()?
    ///     .checkpoint(0, 16);
    /// assert_eq!(state.to_text(), r#"{
    ///   "version": 3,
    ///   "format": "u16",
    ///   "record_bytes": 0,
    ///   "files": [
    ///     "train_000.bin"
    ///   ],
    ///   "sizes": [
    ///     3026
    ///   ],
    ///   "contents": [
    ///     2463523610455766474
    ///   ],
    ///   "window": 11,
    ///   "stride": 10,
    ///   "order": "shuffled",
    ///   "seed": 1337,
    ///   "windows": 100,
    ///   "epoch": 0,
    ///   "consumed": 32,
    ///   "world_size": 2,
    ///   "batch_size": 8,
    ///   "step": 2,
    ///   "skip": []
    /// }"#);
    /// # std::fs::remove_dir_all(&dir).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn to_text(&self) -> String {
        serde_json::to_string_pretty(self)
            .expect("a checkpoint is integers and strings, which always serialize")
    }

    /// Reads the form [`to_text`](Self::to_text) writes. Anything else — not JSON, a key
    /// missing, unknown or given twice, a value of the wrong type, more files than sizes,
    /// an unknown order — is [`SourceError::BadCheckpointText`] naming the line and
    /// column. A checkpoint of another [`CHECKPOINT_VERSION`] reads if its keys do (a
    /// sampler then refuses it); if they do not, the error says which version it is.
    ///
    /// ```
    /// use pinring::source::{Checkpoint, SourceError};
    /// use pinring::Error;
    /// let err = Checkpoint::from_text("{\n  \"version\": 3,\n  \"window\": \"ten\"\n}").unwrap_err();
    /// assert!(matches!(err, Error::Source(SourceError::BadCheckpointText { line: 3, .. })));
    /// assert_eq!(
    ///     err.to_string(),
    ///     "bad checkpoint text (line 3, column 17): invalid type: string \"ten\", expected u64"
    /// );
    /// ```
    pub fn from_text(text: &str) -> Result<Checkpoint> {
        read_text(text, |bare| {
            other_version(text, "a checkpoint", CHECKPOINT_VERSION, bare)
                .or_else(|| {
                    text.starts_with("pinring-checkpoint ").then(|| {
                        format!(
                            "the line form of earlier builds (`pinring-checkpoint 1`), which is \
                             no longer read: the text form is JSON ({bare})"
                        )
                    })
                })
                .unwrap_or_else(|| bare.to_owned())
        })
    }
}

/// A [`Checkpoint`]'s serde form: one flat record of plain values (what JSON and a Python
/// dict hold), read strictly.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Fields {
    version: u32,
    format: String,
    record_bytes: u64,
    files: Vec<String>,
    sizes: Vec<u64>,
    contents: Vec<u64>,
    window: u64,
    stride: u64,
    order: String,
    seed: u64,
    windows: u64,
    epoch: u64,
    consumed: u64,
    world_size: u64,
    batch_size: u64,
    step: u64,
    skip: Vec<(u64, u64)>,
}

impl From<Checkpoint> for Fields {
    fn from(c: Checkpoint) -> Self {
        Fields {
            version: c.version,
            format: c.dataset.format,
            record_bytes: c.dataset.record_bytes,
            files: c.dataset.files,
            sizes: c.dataset.sizes,
            contents: c.dataset.contents,
            window: c.window,
            stride: c.stride,
            order: c.order,
            seed: c.seed,
            windows: c.windows,
            epoch: c.epoch,
            consumed: c.consumed,
            world_size: c.world_size,
            batch_size: c.batch_size,
            step: c.step,
            skip: c.skip,
        }
    }
}

impl TryFrom<Fields> for Checkpoint {
    type Error = String;

    fn try_from(f: Fields) -> Result<Self, String> {
        let dataset =
            Fingerprint::from_record(f.format, f.record_bytes, f.files, f.sizes, f.contents)?;
        if Order::from_name(&f.order, f.seed).is_none() {
            return Err(format!(
                "unknown order {:?}: expected \"sequential\", \"shuffled\" or \"random\"",
                f.order
            ));
        }
        Ok(Checkpoint {
            version: f.version,
            dataset,
            window: f.window,
            stride: f.stride,
            order: f.order,
            seed: f.seed,
            windows: f.windows,
            epoch: f.epoch,
            consumed: f.consumed,
            world_size: f.world_size,
            batch_size: f.batch_size,
            step: f.step,
            skip: f.skip,
        })
    }
}
