//! The crate's one error type and its kinds: [`Error`], [`ConfigError`], [`DecodeError`]
//! and [`Stage`] here; `rank.rs`: [`RankError`], the ranks a `RankGuard` names;
//! `source.rs`: what can go wrong with a data source, shared by every
//! format (`SourceError`, `FileProblem`, `ReadProblem`, `SampleAt`, `MixtureProblem`; a
//! format's own problems live in its folder).

use std::fmt;
use std::time::Duration;

pub(crate) mod mixture;
pub(crate) mod rank;
pub(crate) mod source;
pub(crate) mod view;

use mixture::MixtureProblem;
use rank::RankError;
use source::SourceError;

/// Everything that can go wrong in pinring.
///
/// Match on the variant to decide what to do; the `Display` text is for people.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A [`Config`](crate::Config) value was rejected; nothing was started.
    #[error("invalid config: {0}")]
    Config(#[from] ConfigError),

    /// The decoder returned an error for one sample.
    #[error("decode failed for batch {seq}, sample {sample}: {message}")]
    Decode {
        /// Sequence number of the batch that could not be built.
        seq: u64,
        /// Index of the failing sample within that batch.
        sample: usize,
        /// The decoder's own message.
        message: String,
    },

    /// The decoder panicked on one sample. The panic was caught; the process goes on.
    #[error("decoder panicked on batch {seq}, sample {sample}: {message}")]
    DecoderPanic {
        /// Sequence number of the batch that could not be built.
        seq: u64,
        /// Index of the sample the decoder panicked on.
        sample: usize,
        /// The panic payload, when it was a string.
        message: String,
    },

    /// The source iterator panicked while producing a sample.
    #[error("source iterator panicked while producing batch {seq}, sample {sample}: {message}")]
    SourcePanic {
        /// Sequence number of the batch being gathered.
        seq: u64,
        /// Index of the sample being pulled.
        sample: usize,
        /// The panic payload, when it was a string.
        message: String,
    },

    /// A call into the device backend failed: for CUDA, the driver call, with the driver's
    /// error (cudarc's `DriverError`, whose `.0` is the `CUresult`) as its
    /// [`source`](std::error::Error::source) and [`Error::driver_error`].
    #[error("{call} failed: {message}")]
    Backend {
        /// The backend call that failed, e.g. `cuMemcpyHtoDAsync`.
        call: &'static str,
        /// What went wrong, and where it helps, what to change.
        message: String,
        /// The backend's own error, when it has one (CUDA: the `DriverError`).
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },

    /// The host ring and the samples' bookkeeping do not fit in the memory this machine
    /// has available.
    #[error(
        "the host ring and the samples' bookkeeping need {bytes} bytes, but this machine has \
         {available} bytes available (MemAvailable): use fewer host_slots or smaller batches"
    )]
    HostMemory {
        /// Bytes the ring and the bookkeeping need.
        bytes: usize,
        /// Bytes the system reports available.
        available: u64,
    },

    /// The host ring could not be mapped.
    #[error("could not map the host ring of {bytes} bytes: {source}")]
    HostRing {
        /// Size asked for.
        bytes: usize,
        /// The system's answer.
        #[source]
        source: std::io::Error,
    },

    /// A pipeline thread could not be started.
    #[error("could not start the {thread}: {source}")]
    Spawn {
        /// Which thread or pool.
        thread: &'static str,
        /// The system's answer.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },

    /// `pop` waited for the configured pop timeout and no batch came.
    #[error("no batch after {waited:?}: {}", behind.holding_up())]
    PopTimeout {
        /// How long `pop` waited.
        waited: Duration,
        /// The stage that holds up the next batch.
        behind: Stage,
    },

    /// `pop` waited for the lease timeout (over consecutive calls) while the device slot
    /// the next batch needs was leased by a batch already handed out: it cannot go on until
    /// that batch is released (or dropped). The text reads like "all 2 device slots are
    /// held by batches 0 and 1 that were never released: release them (or drop them), or
    /// raise device_slots".
    #[error("{}", all_slots_leased(*waited, leased, *device_slots))]
    AllSlotsLeased {
        /// How long pops waited for the next batch (over consecutive calls).
        waited: Duration,
        /// The leased slots and the batch each holds, as (slot, sequence), in slot order.
        leased: Vec<(usize, u64)>,
        /// The pipeline's device slots (all of them are leased when `leased` has as many).
        device_slots: usize,
    },

    /// A pinring bug: an internal invariant did not hold. Please report it.
    #[error("internal error (a pinring bug; please report it): {0}")]
    Internal(&'static str),

    /// The pipeline has stopped (after an error reported earlier, or after
    /// [`StopHandle::stop`](crate::StopHandle::stop)); it delivers nothing more.
    #[error("the pipeline has stopped")]
    Stopped,

    /// The batch was released with a fence of another device or pipeline.
    #[error("fence rejected: {0}")]
    Fence(String),

    /// A data source could not be opened (the file and what is wrong with it) or read (a
    /// file that changed under the loader, or a read the file system failed: from `pop`,
    /// with the batch and sample it hit; [`SourceError::is_retryable`] tells the two
    /// apart), or a sampler was set up wrong; see [`SourceError`].
    #[error(transparent)]
    Source(#[from] SourceError),

    /// A [`RankGuard`](crate::RankGuard) named a rank that would make the ranks' next
    /// collective hang (or hold every rank back), on every rank at once; see [`RankError`].
    #[error(transparent)]
    Rank(#[from] RankError),
    /// A typed view of a batch was refused: no such field, another element type, or
    /// bytes that are not whole aligned elements ([`ViewError`](crate::ViewError)).
    #[error("typed view refused: {0}")]
    View(#[from] view::ViewError),
}

/// Why a [`Config`](crate::Config) was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A required value was not given.
    #[error("`{0}` must be set")]
    Missing(&'static str),
    /// A size or count that must be at least 1 was 0.
    #[error("`{0}` must be at least 1")]
    Zero(&'static str),
    /// A product of sizes does not fit in `usize`.
    #[error("`{0}` overflows: the sizes given multiply past usize::MAX")]
    Overflow(&'static str),
    /// Both of two values that exclude each other were given.
    #[error("`{0}` and `{1}` exclude each other: give one")]
    Conflict(&'static str, &'static str),
    /// The per-batch byte size is not a whole number of samples.
    #[error("batch_bytes {batch_bytes} is not a multiple of batch_size {samples}")]
    Indivisible {
        /// The per-batch size given.
        batch_bytes: usize,
        /// The samples per batch given.
        samples: usize,
    },
    /// A core id that this machine does not have.
    #[error("`{field}` names core {core}, which is not among the {available} cores this process may run on")]
    NoSuchCore {
        /// Which setting named it.
        field: &'static str,
        /// The core id given.
        core: usize,
        /// How many cores core_affinity reports for this process.
        available: usize,
    },
    /// A count over the most a pipeline supports.
    #[error(
        "`{field}` is {n}, over the most a pipeline supports ({max}): {}",
        too_many_why(field)
    )]
    TooMany {
        /// Which setting.
        field: &'static str,
        /// The count given.
        n: usize,
        /// The most allowed.
        max: usize,
    },
    /// A field layout ([`Fields`](crate::Fields)) that cannot work: a name used twice, a
    /// view of no array, larger than the sample, a batch of more than one sample.
    #[error("bad field layout: {0}")]
    Fields(String),
    /// A [`Mixture`](crate::source::Mixture)'s sources or weights cannot be mixed: see
    /// [`MixtureProblem`](crate::source::MixtureProblem).
    #[error("bad mixture: {0}")]
    Mixture(MixtureProblem),
    /// The source cuts its steps into batches of another size than the config's
    /// `batch_size` (its samples say so: [`Describe::batch_size`](crate::Describe::batch_size)),
    /// so every batch would hold parts of several steps, or a part of one, and carry the
    /// wrong step number. Found by the feeder at the first sample, before anything is
    /// decoded: the first `pop` returns it.
    #[error(
        "the source cuts batches of {source_batch} sample(s) per rank (its batch_size) but the \
         config's batch_size is {config_batch}: every batch would hold {} and carry the wrong \
         step; give the config the source's batch_size (Documents::config and a Loader do)",
        if *config_batch as u64 > *source_batch { "parts of several steps" } else { "a part of a step" }
    )]
    SourceBatchSize {
        /// The samples a step of the source holds.
        source_batch: u64,
        /// The config's `batch_size`.
        config_batch: usize,
    },
    /// Memory asked for is over the configured budget.
    #[error(
        "{what} would take {bytes} bytes, over the budget of {budget} bytes (raise it with `{knob}`)"
    )]
    OverBudget {
        /// Which memory.
        what: &'static str,
        /// Bytes it would take.
        bytes: usize,
        /// The budget in force.
        budget: usize,
        /// The builder method that raises it.
        knob: &'static str,
    },
    /// A run's setting that does not fit its source or loader: a batch size for packed
    /// documents, a rank set on a source instead of the loader, a start step past the
    /// run's end, ... (`field` names the setting).
    #[error("`{field}`: {why}")]
    Run {
        /// The setting, by the loader builder's name.
        field: &'static str,
        /// What is wrong and what to do.
        why: String,
    },
}

impl ConfigError {
    /// The builder setting the error is about, as the builder spells it (`"batch_size"`,
    /// `"host_slots"`, ...): the first one where the error names several, the budget's
    /// setting (`"host_budget"`, `"device_budget"`) for [`OverBudget`](Self::OverBudget).
    /// For bindings that name the settings their own way.
    ///
    /// ```
    /// let e = pinring::Config::builder().batch_size(0).bytes_per_sample(4).build().unwrap_err();
    /// assert_eq!(e.field(), "batch_size");
    /// ```
    pub fn field(&self) -> &'static str {
        let named = match self {
            ConfigError::Missing(f) | ConfigError::Zero(f) | ConfigError::Overflow(f) => f,
            ConfigError::Conflict(a, _) => a,
            ConfigError::Indivisible { .. } => "batch_bytes",
            ConfigError::SourceBatchSize { .. } => "batch_size",
            ConfigError::NoSuchCore { field, .. } | ConfigError::TooMany { field, .. } => field,
            ConfigError::OverBudget { knob, .. } => knob,
            ConfigError::Fields(_) => "fields",
            ConfigError::Mixture(problem) => problem.field(),
            ConfigError::Run { field, .. } => field,
        };
        let end = named
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(named.len());
        &named[..end]
    }
}

/// A stage of the pipeline, named by [`Error::PopTimeout`] and [`Stats`](crate::Stats).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stage {
    /// The source iterator has not produced the samples of the next batch.
    Source,
    /// The decode workers have not finished the next batch.
    Decode,
    /// The next batch is decoded but not yet on its way to the device.
    Copy,
    /// Every device slot is leased: the consumer must release a batch first.
    Consumer,
}

impl Stage {
    /// What holds up the next batch when this stage is behind, as a clause.
    fn holding_up(self) -> &'static str {
        match self {
            Stage::Source => "the source has not produced the next batch's samples yet",
            Stage::Decode => "the decode workers have not finished the next batch yet",
            Stage::Copy => "the next batch is decoded but its copy to the device has not completed",
            Stage::Consumer => {
                "the device slot it needs is held by a batch not yet released (release or \
                 drop one to let it in)"
            }
        }
    }
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Source => "source",
            Stage::Decode => "decode",
            Stage::Copy => "copy",
            Stage::Consumer => "consumer",
        })
    }
}

/// The text of [`Error::AllSlotsLeased`].
fn all_slots_leased(waited: Duration, leased: &[(usize, u64)], device_slots: usize) -> String {
    let batches = join_and(leased.iter().map(|(_, seq)| seq.to_string()));
    let one = leased.len() == 1;
    let held = if one && device_slots == 1 {
        format!("the only device slot is held by batch {batches}, which was never released")
    } else if leased.len() == device_slots {
        format!(
            "all {device_slots} device slots are held by batches {batches} that were never \
             released"
        )
    } else {
        let slots = join_and(leased.iter().map(|(slot, _)| slot.to_string()));
        let (slot_s, are, batch_es, were, needs) = if one {
            ("", "is", "", "was", "it")
        } else {
            ("s", "are", "es", "were", "one of them")
        };
        format!(
            "device slot{slot_s} {slots} of {device_slots} {are} held by batch{batch_es} \
             {batches} that {were} never released, and the next batch needs {needs} \
             (batches come in order)"
        )
    };
    let them = if one { "it" } else { "them" };
    format!(
        "{held}: release {them} (or drop {them}), or raise device_slots (pop waited {waited:?})"
    )
}

/// `a`, `a and b`, `a, b and c`.
fn join_and(items: impl Iterator<Item = String>) -> String {
    let items: Vec<String> = items.collect();
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

fn too_many_why(field: &str) -> &'static str {
    match field {
        "decode_threads" => {
            "each decode thread is an OS thread woken for every batch; past the machine's \
             cores more threads only add wake-ups"
        }
        "device_slots" => "each device slot costs host-side bookkeeping outside the budgets",
        _ => "the pipeline's limit",
    }
}

#[cfg(feature = "cuda")]
impl Error {
    /// The CUDA driver's error behind a failed driver call, if this is one.
    pub fn driver_error(&self) -> Option<&cudarc::driver::DriverError> {
        match self {
            Error::Backend {
                source: Some(source),
                ..
            } => source.downcast_ref(),
            _ => None,
        }
    }
}

/// What a decoder returns when a sample cannot be decoded: a message, or the
/// [`SourceError`] of a file that could not be read (it changed under the loader, say).
///
/// A pipeline reports a message as [`Error::Decode`] and a source error as
/// [`Error::Source`], with the batch and sample it hit
/// ([`SourceError::Read`]'s `at`). `?` turns a
/// [`SourceError`] into a `DecodeError`, so a decoder of your own that reads a window's
/// bytes passes a changed file on as the built-in decoders do.
///
/// ```
/// use pinring::DecodeError;
/// let e = DecodeError::new("token 70000 does not fit u16");
/// assert_eq!((e.to_string().as_str(), e.source_error().is_none()), ("token 70000 does not fit u16", true));
/// ```
#[derive(Debug)]
pub struct DecodeError {
    message: String,
    source: Option<Box<SourceError>>,
}

impl DecodeError {
    /// A decode error with this message.
    pub fn new(message: impl Into<String>) -> Self {
        DecodeError {
            message: message.into(),
            source: None,
        }
    }

    /// The message (for a source error, its text).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The source error, when the sample's file could not be read.
    pub fn source_error(&self) -> Option<&SourceError> {
        self.source.as_deref()
    }

    /// The pipeline's error for this failure on sample `sample` of batch `seq`:
    /// [`Error::Source`] (its read placed there) or [`Error::Decode`].
    pub(crate) fn into_error(self, seq: u64, sample: usize) -> Error {
        match self.source {
            Some(source) => Error::Source(source.at_sample(seq, sample)),
            None => Error::Decode {
                seq,
                sample,
                message: self.message,
            },
        }
    }
}

impl From<SourceError> for DecodeError {
    fn from(source: SourceError) -> Self {
        DecodeError {
            message: source.to_string(),
            source: Some(Box::new(source)),
        }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for DecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// Shorthand for results with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The text of a caught panic's payload.
pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
