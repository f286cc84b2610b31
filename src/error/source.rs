//! What can go wrong opening a data source, reading it, or setting up a sampler: the
//! problems every format shares. A format's own problems (a token shard's header, ...)
//! live with the format and ride in [`FileProblem::Format`].

use std::path::{Path, PathBuf};

/// A data source could not be opened or read, or a sampler was set up wrong.
///
/// Reached through [`Error::Source`](crate::Error::Source). Every file problem names the
/// file; match on [`FileProblem`] to tell the cases apart, and on [`ReadProblem`] for a
/// file that changed under the loader. [`path`](Self::path) gives the file (or pattern) an
/// error is about, whatever the variant.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SourceError {
    /// One file is unreadable or malformed.
    #[error("{}: {problem}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        problem: FileProblem,
    },
    /// A file that opened fine failed while a sample was read from it: it changed under
    /// the loader (shrank, was written to, replaced or deleted), or the system could not
    /// read it ([`ReadProblem::Io`]; [`is_retryable`](Self::is_retryable) tells the two
    /// apart). A pipeline reports it from `pop`, after the batches before it, with the
    /// batch and sample it hit ([`at`](Self::Read::at)).
    #[error(
        "{}: {problem}{}{}",
        path.display(),
        at.map_or_else(String::new, |a| format!(" (batch {}, sample {})", a.seq, a.sample)),
        if problem.is_change() { CHANGED_FIX } else if at.is_some() { IO_FIX_POP } else { IO_FIX }
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        problem: ReadProblem,
        /// The batch and sample being decoded, when a pipeline reports it.
        at: Option<SampleAt>,
    },
    /// A pattern given to a `glob` constructor matched no file.
    #[error("no file matches `{pattern}`")]
    NoMatch {
        /// The pattern as given.
        pattern: PathBuf,
    },
    /// A pattern has a wildcard outside its last component, or is not valid UTF-8.
    #[error("unsupported pattern `{}`: {why}", pattern.display())]
    BadPattern {
        /// The pattern as given.
        pattern: PathBuf,
        /// What is unsupported about it.
        why: &'static str,
    },
    /// A source was given no files.
    #[error("no files given")]
    NoFiles,
    /// A sampler or source setting that must be at least 1 was 0.
    #[error("`{0}` must be at least 1")]
    Zero(&'static str),
    /// `rank` is not below `world_size`.
    #[error("rank {rank} is not below world_size {world_size}")]
    BadRank {
        /// The rank given.
        rank: u64,
        /// The world size given.
        world_size: u64,
    },
    /// No segment (file) of the source is long enough for a single window, so an epoch
    /// is empty. Names the longest file, measured in the format's units.
    #[error("{}", no_windows(*window, *longest, unit, path.as_deref()))]
    NoWindows {
        /// Units per window.
        window: u64,
        /// Units in the longest segment.
        longest: u64,
        /// What the units are, plural: `"tokens"`, `"records"` (`"units"` for a source
        /// that does not say; see [`Segmented::unit_name`](crate::source::Segmented::unit_name)).
        unit: &'static str,
        /// The longest segment's file, when the source's segments are files.
        path: Option<PathBuf>,
    },
    /// The source has windows, but this rank's share of an epoch is empty: there are
    /// fewer windows than ranks (or [`even_ranks`](crate::source::SamplerBuilder::even_ranks)
    /// drops them all to keep the ranks equal).
    #[error("{}", empty_share(*rank, *world_size, *windows, *even_ranks))]
    EmptyShare {
        /// The rank given.
        rank: u64,
        /// The world size given.
        world_size: u64,
        /// Windows in one epoch over all ranks, before `even_ranks` drops any.
        windows: u64,
        /// Whether `even_ranks` was set.
        even_ranks: bool,
    },
    /// With a [`batch_size`](crate::source::SamplerBuilder::batch_size), an epoch has too few
    /// windows to give every rank a batch: fewer than `world_size × batch_size` with
    /// [`drop_last`](crate::source::SamplerBuilder::drop_last), fewer than `world_size` without.
    #[error("{}", too_few_for_batches(*windows, *world_size, *batch_size, *drop_last))]
    TooFewForBatches {
        /// Windows in one epoch over all ranks, before any is dropped.
        windows: u64,
        /// The world size given.
        world_size: u64,
        /// The batch size given.
        batch_size: u64,
        /// Whether `drop_last` was set.
        drop_last: bool,
    },
    /// A [`Checkpoint`](crate::source::Checkpoint) belongs to another run: another checkpoint
    /// version, dataset (format, file names, sizes or contents), window, stride, order or
    /// seed — or,
    /// from [`Checkpoint::merge`](crate::source::Checkpoint::merge), ranks of different runs.
    /// Resuming from it would silently repeat or skip windows, so it is refused.
    #[error(
        "the checkpoint does not match: {what} is {saved} in the checkpoint but {here} \
        here; a checkpoint resumes only the same dataset, window, stride, order and seed \
        (the world size and batch size may change)"
    )]
    CheckpointMismatch {
        /// What differs.
        what: String,
        /// Its value in the checkpoint (with `merge`: in rank 0's).
        saved: String,
        /// Its value in this sampler (with `merge`: in the other rank's).
        here: String,
    },
    /// A [`Checkpoint`](crate::source::Checkpoint) says more windows of its epoch were consumed
    /// than the epoch has.
    #[error(
        "the checkpoint is past its epoch: it says {consumed} windows of epoch {epoch} were \
        consumed, but an epoch has {windows}"
    )]
    CheckpointPastEpoch {
        /// The checkpoint's epoch.
        epoch: u64,
        /// The checkpoint's consumed count.
        consumed: u64,
        /// Windows in one epoch's order.
        windows: u64,
    },
    /// The ranks' checkpoints given to [`Checkpoint::merge`](crate::source::Checkpoint::merge)
    /// stand at different places: the ranks consumed unequal counts, so no single global
    /// position describes them (resuming would repeat or skip windows).
    #[error("{}", unequal_ranks(positions))]
    UnequalRanks {
        /// Each rank's (epoch, consumed), indexed by rank.
        positions: Vec<(u64, u64)>,
    },
    /// A checkpoint's text form (or a field of it) could not be read.
    #[error("{}", bad_text(*line, *column, why))]
    BadCheckpointText {
        /// The line, from 1 (0: a field of a checkpoint value, not a line of text).
        line: usize,
        /// The column, from 1 (0 with line 0).
        column: usize,
        /// What is wrong.
        why: String,
    },
    /// A step schedule's entry is wrong: it does not start after the entry before it (the
    /// entries must be strictly increasing in step), or one of its sizes is 0 or too large.
    #[error("schedule entry {index} (from step {from_step}): {why}")]
    BadSchedule {
        /// The entry's index in the schedule as given, from 0.
        index: usize,
        /// The step it starts at.
        from_step: u64,
        /// What is wrong with it.
        why: String,
    },
    /// A setting of packed documents that cannot be used as given, or with the others
    /// given: names the setting and says what to do.
    #[error("`{setting}`: {why}")]
    BadPacking {
        /// The setting, as the builder spells it.
        setting: &'static str,
        /// What is wrong, and what to do.
        why: String,
    },
    /// A source setting is larger than the source supports.
    #[error("`{setting}` is {value}, over the most this source supports ({most}): {why}")]
    OutOfRange {
        /// The setting, as the builder spells it.
        setting: &'static str,
        /// The value given.
        value: u64,
        /// The largest value allowed.
        most: u64,
        /// Why that is the limit.
        why: &'static str,
    },
    /// A step of packed documents needs more documents on a rank than its `cu_seqlens`
    /// holds (`max_docs - 1`: the first entry is 0). Reported by `pop` at that step, after
    /// the steps before it, on every rank alike.
    #[error(
        "step {step} needs {needed} documents on rank {rank}, more than max_docs - 1 = {} \
         (cu_seqlens holds max_docs = {max_docs} entries, the first of them 0): raise \
         max_docs to at least {}",
        max_docs.saturating_sub(1),
        needed + 1
    )]
    TooManyDocuments {
        /// The step, from 0.
        step: u64,
        /// The rank that needs the most documents in that step.
        rank: u64,
        /// Documents (pieces of documents) that rank packs into the step.
        needed: u64,
        /// The step's `max_docs`: the length of its `cu_seqlens`.
        max_docs: u64,
    },
    /// No whole step of packed documents fits anywhere in an epoch: no shard (in sequential
    /// order; the whole epoch in shuffled order) holds documents enough to give every rank
    /// `tokens_per_batch + 1` tokens once documents are cut at `max_seq_len`. At build for
    /// the first step; from `pop` for a later step whose sizes (a schedule) grow past the
    /// data.
    #[error(
        "no step fits in a whole epoch: step {step} gives each of {world_size} rank(s) \
         {tokens_per_batch} + 1 tokens of documents cut at max_seq_len {max_seq_len}, and no \
         shard (in shuffled order: no epoch) holds documents enough; use a smaller \
         tokens_per_batch, fewer ranks, a larger max_seq_len or longer shards"
    )]
    NoStepFits {
        /// The step, from 0.
        step: u64,
        /// Tokens of inputs per rank in that step.
        tokens_per_batch: u64,
        /// Where documents are cut in that step.
        max_seq_len: u64,
        /// The world size.
        world_size: u64,
    },
    /// A [`DocumentsCheckpoint`](crate::source::DocumentsCheckpoint) belongs to another
    /// run: another checkpoint version, dataset (format, file names, sizes or contents),
    /// bos, order,
    /// seed, schedule or max_docs, or a cursor outside this dataset — or, from
    /// [`DocumentsCheckpoint::merge`](crate::source::DocumentsCheckpoint::merge), ranks of
    /// different runs. Resuming from it would silently repeat or skip documents, so it is
    /// refused.
    #[error(
        "the documents checkpoint does not match: {what} is {saved} in the checkpoint but \
        {here} here; it resumes only the same dataset, bos, order, seed, schedule and \
        max_docs (the world size may change)"
    )]
    DocumentsCheckpointMismatch {
        /// What differs.
        what: String,
        /// Its value in the checkpoint (with `merge`: in rank 0's).
        saved: String,
        /// Its value here (with `merge`: in the other rank's).
        here: String,
    },
    /// The ranks' checkpoints given to
    /// [`DocumentsCheckpoint::merge`](crate::source::DocumentsCheckpoint::merge) stand at
    /// different steps: the ranks popped unequal numbers of steps, so no single position
    /// describes them.
    #[error("{}", unequal_steps(steps))]
    UnequalSteps {
        /// Each rank's step count, indexed by rank.
        steps: Vec<u64>,
    },
    /// A position to resume from lies past the end of its epoch.
    #[error("position index {index} is past the end of the epoch ({len} samples for this rank)")]
    BadPosition {
        /// The index given.
        index: u64,
        /// Samples per epoch for this rank.
        len: u64,
    },
    /// A range of steps to skip ends before it starts (`skip_steps` takes half-open
    /// ranges `start..end`, as Rust's and Python's ranges are).
    #[error(
        "the skipped steps {start}..{end} end before they start: give half-open ranges \
         start..end with start <= end"
    )]
    BadSkip {
        /// The range's first step.
        start: u64,
        /// The step after the range's last.
        end: u64,
    },
    /// `start_step` or `skip_steps` was set on a source that does not number steps: steps
    /// are a run's batches, so they need a batch size.
    #[error("`{0}` needs a batch size: steps are the batches of a run (set batch_size)")]
    StepsNeedBatchSize(&'static str),
    /// A mixture's saved state does not fit the mixture resuming from it: its number of
    /// sources, seed, stop rule or current weights differ. (A source's own part of the
    /// state is checked as that source checks its checkpoints: [`CheckpointMismatch`](Self::CheckpointMismatch).)
    #[error(
        "the mixture's state does not match: {what} is {saved} in the state but {here} \
         here{}",
        if what.as_str() == "the weights" { WEIGHTS_FIX } else { "" }
    )]
    MixtureMismatch {
        /// What differs.
        what: String,
        /// Its value in the state (with `merge`: in rank 0's).
        saved: String,
        /// Its value in this mixture (with `merge`: in the other rank's).
        here: String,
    },
    /// [`Batch::locate`](crate::Batch::locate) on a pipeline built without a locator.
    #[error(
        "this pipeline has no locator: set one with ConfigBuilder::locator (a Sampler and a \
         Mixture are locators) to locate a batch's rows"
    )]
    NoLocator,
    /// The locator could not place a row of a batch: the locator is not the source the
    /// pipeline reads (another dataset, or another mixture).
    #[error(
        "row {row} (id {id} of source {source_index}) is not a row of the locator's source: \
         give ConfigBuilder::locator the source the pipeline reads"
    )]
    Unlocated {
        /// The row's index in its batch.
        row: usize,
        /// The row's id.
        id: u64,
        /// The row's source (its index in a mixture).
        source_index: u16,
    },
}

/// What to do about a mixture state saved with other weights.
const WEIGHTS_FIX: &str = ": build the mixture with the saved weights to continue as saved, \
     or switch to this mixture's weights from the saved point with Mixture::reweight";

/// What is wrong with one file. Carried by [`SourceError::File`], which names the file.
///
/// The variants are those of every format; what a format itself demands (a token shard's
/// header, say) is [`Format`](Self::Format), the format's own problem type, which
/// [`format_problem`](Self::format_problem) gives back.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FileProblem {
    /// The system could not open, read or write it.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The path names a directory, not a file.
    #[error("is a directory, not a file: name the files in it, or a pattern such as `DIR/*.bin`")]
    IsDirectory,
    /// The path names something other than a regular file (a device, a pipe, a socket).
    #[error("not a regular file (a device, pipe or socket): sources read plain files")]
    NotAFile,
    /// The file has no bytes at all.
    #[error("file is empty (0 bytes)")]
    Empty,
    /// The file's length is not a whole number of records.
    #[error("length {len} is not a multiple of the record size {record_bytes}")]
    PartialRecord {
        /// The file's length in bytes.
        len: u64,
        /// Bytes per record.
        record_bytes: u64,
    },
    /// The file does not fit in this process's address space.
    #[error("file of {len} bytes does not fit in the address space")]
    TooLarge {
        /// The file's length in bytes.
        len: u64,
    },
    /// The file is not what its format demands: the format's own problem (for llm.c token
    /// shards a `ShardProblem`: a bad header, a size that does not match it, ...). Get it
    /// back with [`format_problem`](Self::format_problem).
    #[error(transparent)]
    Format(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl FileProblem {
    /// The format's own problem, when this is a [`Format`](Self::Format) problem of type
    /// `P` (`file_problem.format_problem::<ShardProblem>()` for a token shard).
    pub fn format_problem<P: std::error::Error + 'static>(&self) -> Option<&P> {
        match self {
            FileProblem::Format(problem) => problem.downcast_ref(),
            _ => None,
        }
    }
}

/// What went wrong reading a sample from a file that opened fine: it changed under the
/// loader, or the system could not read it. Carried by [`SourceError::Read`].
///
/// A source checks its file after every read (its size, modification time and links, as
/// the system reports them for the open file once the read is done), so a sample is
/// never built from bytes of a file that changed while it was read. What the check cannot
/// see (`ARCHITECTURE.md`, "Files that change under the loader", has the details): a
/// same-size rewrite that leaves the modification time as it was (within one timestamp
/// tick of the previous write, on coarse-timestamp filesystems); writes through another
/// process's shared mapping until the page is made writable; a rename over or deletion of
/// a file with another hard link, or on an NFS client that keeps a deleted open file (the
/// loader then reads the file it opened, whole); and a change is found at the next read
/// of that file, not when it happens.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadProblem {
    /// The file is shorter than when it was opened: truncated, or being rewritten.
    #[error("it shrank to {len} bytes from the {opened} it had when opened (truncated, or being rewritten)")]
    Shrank {
        /// Its length now, in bytes.
        len: u64,
        /// Its length when it was opened.
        opened: u64,
    },
    /// Its size or modification time changed since it was opened: it was written to (a
    /// `touch` that moves the time counts too).
    #[error("it was written to since it was opened (now {len} bytes, {opened} when opened; its modification time {})", if *modified { "changed" } else { "is the same" })]
    Rewritten {
        /// Its length now, in bytes.
        len: u64,
        /// Its length when it was opened.
        opened: u64,
        /// Whether its modification time changed.
        modified: bool,
    },
    /// Its path names another file now: it was replaced (renamed over, or deleted and
    /// written anew). The loader had been reading the file it opened.
    #[error("it was replaced: the path names another file now")]
    Replaced,
    /// It was deleted: its path names no file now.
    #[error("it was deleted")]
    Removed,
    /// The system could not read it: the read (or the look at the open file after it)
    /// failed with this OS error — an `EIO` from a disk, or from a network or FUSE file
    /// system (NFS, Lustre, gcsfuse, s3fs) whose read failed — while the file itself did
    /// not change. Nothing the failed read brought in is delivered or kept: a retry (a new
    /// run over the same source, from the last checkpoint) reads the file again
    /// ([`is_retryable`](Self::is_retryable)).
    #[error("it could not be read: {0}")]
    Io(std::io::Error),
}

impl ReadProblem {
    /// Whether the file changed under the loader (every problem but [`Io`](Self::Io)).
    pub fn is_change(&self) -> bool {
        !matches!(self, ReadProblem::Io(_))
    }

    /// Whether trying again may succeed: an I/O error ([`Io`](Self::Io)) is the file
    /// system's failure, of the file as it was opened, and a new run reads it anew; a
    /// change ([`is_change`](Self::is_change)) stays, and only new data (under a new
    /// name) and a new source fix it.
    ///
    /// ```
    /// use pinring::source::ReadProblem;
    /// let eio = ReadProblem::Io(std::io::Error::from_raw_os_error(5));
    /// assert!(eio.is_retryable() && !eio.is_change());
    /// assert!(eio.to_string().starts_with("it could not be read"));
    /// assert!(!ReadProblem::Removed.is_retryable());
    /// ```
    pub fn is_retryable(&self) -> bool {
        !self.is_change()
    }

    /// The OS error of an [`Io`](Self::Io) problem.
    pub fn io_error(&self) -> Option<&std::io::Error> {
        match self {
            ReadProblem::Io(e) => Some(e),
            _ => None,
        }
    }
}

/// Where a failed read happened in a pipeline: the batch (its sequence number) and the
/// sample's index in it. Set on [`SourceError::Read`] when the pipeline reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SampleAt {
    /// Sequence number of the batch that could not be built.
    pub seq: u64,
    /// Index of the sample within that batch.
    pub sample: usize,
}

/// What a failed read means (the file did not change).
const IO_FIX: &str = ": the file system failed the read (the file did not change); a retry reads \
     the file again";

/// What a failed read means for a pipeline's run.
const IO_FIX_POP: &str = ": the file system failed the read (the file did not change); the \
     batches before it were delivered, and a retry reads the file again";

/// What to do about a file that changed under the loader.
const CHANGED_FIX: &str =
    ": a file must not change while a loader reads it; write new data under a \
     new name (or to a temporary name renamed into place once the loader is stopped)";

impl SourceError {
    /// A [`SourceError::BadCheckpointText`] about a field of a state read as a value (line
    /// 0, column 0): `why` says what is wrong.
    pub(crate) fn bad_state(why: impl Into<String>) -> Self {
        SourceError::BadCheckpointText {
            line: 0,
            column: 0,
            why: why.into(),
        }
    }

    /// A [`SourceError::File`] for `path`.
    pub(crate) fn file(path: impl Into<PathBuf>, problem: impl Into<FileProblem>) -> Self {
        SourceError::File {
            path: path.into(),
            problem: problem.into(),
        }
    }

    /// The file's problem, when this is a [`SourceError::File`].
    pub fn file_problem(&self) -> Option<&FileProblem> {
        match self {
            SourceError::File { problem, .. } => Some(problem),
            _ => None,
        }
    }

    /// The file (or pattern) the error is about: the file of [`File`](Self::File) and
    /// [`Read`](Self::Read), the longest file of [`NoWindows`](Self::NoWindows), the
    /// pattern of [`NoMatch`](Self::NoMatch) and [`BadPattern`](Self::BadPattern); `None`
    /// for the others (and for `NoWindows` over a source without files).
    pub fn path(&self) -> Option<&Path> {
        match self {
            SourceError::File { path, .. } | SourceError::Read { path, .. } => Some(path),
            SourceError::NoMatch { pattern } | SourceError::BadPattern { pattern, .. } => {
                Some(pattern)
            }
            SourceError::NoWindows { path, .. } => path.as_deref(),
            _ => None,
        }
    }

    /// Whether trying again may succeed: a [`Read`](Self::Read) that failed with an I/O
    /// error ([`ReadProblem::is_retryable`]), not because the file changed. Every other
    /// source error (a missing or malformed file, a setting, a change under the loader)
    /// stays on a retry.
    pub fn is_retryable(&self) -> bool {
        matches!(self, SourceError::Read { problem, .. } if problem.is_retryable())
    }

    /// The error with the batch and sample a pipeline was decoding: sets
    /// [`Read`](Self::Read)'s `at`; the other variants carry no place and stay as they are.
    pub(crate) fn at_sample(self, seq: u64, sample: usize) -> Self {
        match self {
            SourceError::Read { path, problem, .. } => SourceError::Read {
                path,
                problem,
                at: Some(SampleAt { seq, sample }),
            },
            other => other,
        }
    }
}

/// The message of [`SourceError::BadCheckpointText`].
fn bad_text(line: usize, column: usize, why: &str) -> String {
    if line == 0 {
        format!("bad checkpoint: {why}")
    } else {
        format!("bad checkpoint text (line {line}, column {column}): {why}")
    }
}

/// The message of [`SourceError::NoWindows`].
fn no_windows(window: u64, longest: u64, unit: &str, path: Option<&Path>) -> String {
    let longest_file = match path {
        Some(p) => format!("the longest file, {},", p.display()),
        None => "the longest segment".to_owned(),
    };
    format!(
        "no window of {window} {unit} fits: {longest_file} holds {longest} {unit}; use a \
         shorter window (a smaller sequence length) or longer files"
    )
}

/// The rest of a [`SourceError::EmptyShare`] message.
fn empty_share(rank: u64, world_size: u64, windows: u64, even_ranks: bool) -> String {
    let fix = "use fewer ranks, shorter windows or more data";
    if even_ranks {
        format!(
            "every rank's share of the epoch is empty: the epoch has {windows} window(s) for \
             {world_size} ranks, and even_ranks drops them all to keep the ranks equal; {fix}"
        )
    } else {
        format!(
            "rank {rank}'s share of the epoch is empty: the epoch has {windows} window(s) for \
             {world_size} ranks, so ranks {windows} to {} get none; {fix}",
            world_size - 1
        )
    }
}

/// The message of [`SourceError::TooFewForBatches`].
fn too_few_for_batches(windows: u64, world_size: u64, batch_size: u64, drop_last: bool) -> String {
    if drop_last {
        format!(
            "an epoch has {windows} window(s), fewer than one full batch for each of \
            {world_size} rank(s) (world_size × batch_size = {world_size} × {batch_size}): use \
            fewer ranks, smaller batches, shorter windows, more data, or drop_last(false)"
        )
    } else {
        format!(
            "an epoch has {windows} window(s), fewer than one for each of {world_size} ranks: \
            use fewer ranks, shorter windows or more data"
        )
    }
}

/// The message of [`SourceError::UnequalSteps`].
fn unequal_steps(steps: &[u64]) -> String {
    let each: Vec<String> = steps
        .iter()
        .enumerate()
        .map(|(r, s)| format!("rank {r} at step {s}"))
        .collect();
    format!(
        "the ranks' checkpoints stand at different steps ({}): every rank must have popped \
        the same number of steps when it saves, so that one position describes them all",
        each.join(", ")
    )
}

/// The message of [`SourceError::UnequalRanks`].
fn unequal_ranks(positions: &[(u64, u64)]) -> String {
    let each: Vec<String> = positions
        .iter()
        .enumerate()
        .map(|(r, (e, c))| format!("rank {r} at epoch {e} consumed {c}"))
        .collect();
    format!(
        "the ranks' checkpoints differ ({}): every rank must have popped the same number of \
        samples when it saves (data-parallel training keeps the ranks in step), so that \
        one global position describes them all",
        each.join(", ")
    )
}
