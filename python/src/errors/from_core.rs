//! The core's [`pinring::Error`] as a Python exception: the class that fits, the attributes a
//! caller matches on (`seq`, `sample`, `path`, `call`, `code`, `waited`, `behind`,
//! `leased`; a RankError's `rank`, `kind`, `step`), and, where the core's text speaks of
//! Rust, a message in Python's words.

use std::path::Path;
use std::time::Duration;

use pyo3::prelude::*;

use pinring::source::{FileProblem, SourceError};
use pinring::{ConfigError, Stage};

use crate::errors::classes::{config, error, new_error, obj, Kind};

/// The class a core error maps to.
fn kind_of(e: &pinring::Error) -> Kind {
    use pinring::Error as E;
    match e {
        E::Config(_) | E::HostMemory { .. } => Kind::Config,
        E::Decode { .. } | E::DecoderPanic { .. } => Kind::Decode,
        E::Source(
            SourceError::CheckpointMismatch { .. }
            | SourceError::CheckpointPastEpoch { .. }
            | SourceError::UnequalRanks { .. }
            | SourceError::BadCheckpointText { .. }
            | SourceError::DocumentsCheckpointMismatch { .. }
            | SourceError::UnequalSteps { .. }
            | SourceError::MixtureMismatch { .. },
        ) => Kind::Checkpoint,
        // Settings of a source, whichever step finds them wrong: the fix is an argument.
        E::Source(
            SourceError::BadSchedule { .. }
            | SourceError::OutOfRange { .. }
            | SourceError::BadPacking { .. }
            | SourceError::TooManyDocuments { .. }
            | SourceError::BadSkip { .. }
            | SourceError::StepsNeedBatchSize(_),
        ) => Kind::Config,
        E::Source(s) if not_found(s) => Kind::SourceNotFound,
        E::SourcePanic { .. } | E::Source(_) => Kind::Source,
        E::Backend { .. } | E::Fence(_) => Kind::Cuda,
        E::PopTimeout { .. } => Kind::PopTimeout,
        E::AllSlotsLeased { .. } => Kind::AllSlotsLeased,
        E::Stopped => Kind::Stopped,
        E::Rank(_) => Kind::Rank,
        _ => Kind::Base,
    }
}

/// Whether a source error says that a file (or every file of a pattern) is missing.
fn not_found(e: &SourceError) -> bool {
    match e {
        SourceError::NoMatch { .. } => true,
        SourceError::File {
            problem: FileProblem::Io(io),
            ..
        } => io.kind() == std::io::ErrorKind::NotFound,
        _ => false,
    }
}

/// The file (or pattern) a source error is about, where it names one.
pub(crate) fn source_path(e: &SourceError) -> Option<&Path> {
    e.path()
}

/// A short name of a pipeline stage, for `PopTimeout.behind` and `stats()`.
pub(crate) fn stage_name(stage: Stage) -> &'static str {
    match stage {
        Stage::Source => "source",
        Stage::Decode => "decode",
        Stage::Copy => "copy",
        Stage::Consumer => "consumer",
    }
}

/// What `pop` says when its timeout ran out.
fn pop_timeout_message(waited: Duration, behind: Stage) -> String {
    let why = match behind {
        Stage::Source => "the source is behind: it has not yet produced the next batch's samples",
        Stage::Decode => {
            "decoding is behind: the next batch is still being decoded (more decode_threads \
             may help)"
        }
        Stage::Copy => {
            "the copy is behind: the next batch is decoded but not yet copied into a device slot"
        }
        Stage::Consumer => {
            "you hold every device slot: release a batch (or drop its views) so that the next \
             one can be copied in, or raise device_slots"
        }
    };
    format!("no batch after {:.3} s: {why}", waited.as_secs_f64())
}

/// "0", "0 and 1", "0, 1 and 2".
fn and_list(items: &[u64]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(u64::to_string).collect();
            format!("{} and {last}", rest.join(", "))
        }
    }
}

/// What `pop` says when every device slot is held by batches never released.
fn all_slots_leased_message(leased: &[(usize, u64)]) -> String {
    let mut seqs: Vec<u64> = leased.iter().map(|&(_, seq)| seq).collect();
    seqs.sort_unstable();
    if let [seq] = seqs[..] {
        format!(
            "the only device slot is held by batch {seq} that was never released: release it \
             (or drop its views), or raise device_slots"
        )
    } else {
        format!(
            "all {} device slots are held by batches {} that were never released: release them \
             (or drop their views), or raise device_slots",
            seqs.len(),
            and_list(&seqs)
        )
    }
}

/// The message of a core error in Python's words, where they differ from the core's.
fn message(e: &pinring::Error) -> String {
    use pinring::Error as E;
    match e {
        E::PopTimeout { waited, behind } => pop_timeout_message(*waited, *behind),
        E::AllSlotsLeased { leased, .. } => all_slots_leased_message(leased),
        E::Source(SourceError::TooFewForBatches {
            windows,
            world_size,
            batch_size,
            drop_last,
        }) => {
            if *drop_last {
                format!(
                    "an epoch of this source has {windows} sample(s), fewer than one full batch \
                     for each of {world_size} rank(s) (world_size × batch_size = {world_size} × \
                     {batch_size}): use fewer ranks, a smaller batch_size, a shorter seq_len, \
                     more data, or drop_last=False"
                )
            } else {
                format!(
                    "an epoch of this source has {windows} sample(s), fewer than one for each of \
                     {world_size} ranks: use fewer ranks, a shorter seq_len or more data"
                )
            }
        }
        E::Source(SourceError::EmptyShare {
            rank,
            world_size,
            windows,
            even_ranks,
        }) => {
            let fix = "use fewer ranks, a shorter seq_len or more data";
            if *even_ranks {
                format!(
                    "every rank's share of the epoch is empty: an epoch has {windows} sample(s) \
                     for {world_size} ranks, and even_ranks=True drops them all to keep the ranks \
                     equal; {fix}"
                )
            } else {
                format!(
                    "rank {rank}'s share of the epoch is empty: an epoch has {windows} sample(s) \
                     for {world_size} ranks; {fix}"
                )
            }
        }
        E::Source(SourceError::BadSchedule {
            index,
            from_step,
            why,
        }) => format!("schedule[{index}] (from step {from_step}): {why}"),
        E::Source(SourceError::MixtureMismatch { what, saved, here }) if what == "the weights" => {
            format!(
                "the mixture's state does not match: the weights in force are {saved} in the \
                 state but {here} here: make the Mixture with the saved weights to continue \
                 as saved, or switch to other weights from the saved point with \
                 loader.load_state_dict(state, weights=[...])"
            )
        }
        E::Source(SourceError::BadSkip { start, end }) => format!(
            "skip_steps: the range ({start}, {end}) ends before it starts: give half-open \
             ranges (start, end), as range(start, end), with start <= end"
        ),
        _ => e.to_string(),
    }
}

/// The attributes a caller matches on.
fn attrs<'py>(py: Python<'py>, e: &pinring::Error) -> Vec<(&'static str, Bound<'py, PyAny>)> {
    use pinring::Error as E;
    match e {
        E::Decode { seq, sample, .. }
        | E::DecoderPanic { seq, sample, .. }
        | E::SourcePanic { seq, sample, .. } => {
            vec![("seq", obj(py, *seq)), ("sample", obj(py, *sample))]
        }
        E::Backend { call, .. } => {
            // The driver's CUresult when a CUDA call failed; 0 for other backend errors.
            let code = e.driver_error().map_or(0, |d| d.0 as i32);
            vec![("call", obj(py, *call)), ("code", obj(py, code))]
        }
        E::PopTimeout { waited, behind } => vec![
            ("waited", obj(py, waited.as_secs_f64())),
            ("behind", obj(py, stage_name(*behind))),
        ],
        E::AllSlotsLeased { waited, leased, .. } => vec![
            ("waited", obj(py, waited.as_secs_f64())),
            ("behind", obj(py, stage_name(Stage::Consumer))),
            ("leased", obj(py, leased.clone())),
        ],
        E::Rank(r) => rank_attrs(py, r),
        E::Source(SourceError::BadSchedule { .. }) => vec![("argument", obj(py, "schedule"))],
        E::Source(
            SourceError::OutOfRange { setting, .. } | SourceError::BadPacking { setting, .. },
        ) => {
            vec![("argument", obj(py, *setting))]
        }
        E::Source(SourceError::TooManyDocuments { .. }) => {
            vec![("argument", obj(py, "max_docs"))]
        }
        E::Source(SourceError::BadSkip { .. }) => vec![("argument", obj(py, "skip_steps"))],
        E::Source(SourceError::StepsNeedBatchSize(setting)) => {
            vec![("argument", obj(py, *setting))]
        }
        E::Source(s) => {
            let Some(path) = source_path(s) else {
                return Vec::new();
            };
            let path = path.to_string_lossy().into_owned();
            let mut attrs = vec![("path", obj(py, path))];
            if not_found(s) {
                // ENOENT, as OSError's constructor sets it (not `strerror` and `filename`,
                // which would make str(e) OSError's "[Errno 2] ..." instead of the message).
                attrs.push(("errno", obj(py, 2)));
            }
            // A read the file system failed (EIO, ...): its OS error, the mark of an error a
            // retry may get past (a file that changed has none).
            if let SourceError::Read { problem, .. } = s {
                if let Some(code) = problem.io_error().and_then(std::io::Error::raw_os_error) {
                    attrs.push(("errno", obj(py, code)));
                }
            }
            attrs
        }
        _ => Vec::new(),
    }
}

/// The Loader argument a core setting is about, and how to change it.
fn argument(field: &str) -> (&'static str, &'static str) {
    match field {
        "batch_size" => ("batch_size", "use a smaller batch_size"),
        "bytes_per_sample" | "batch_bytes" => (
            "src",
            "use a shorter seq_len (or smaller records), a narrower dtype or a smaller batch_size",
        ),
        "host_slots" => ("host_slots", "use fewer host_slots"),
        "device_slots" => ("device_slots", "use fewer device_slots"),
        "decode_threads" => ("decode_threads", "use fewer decode_threads"),
        "host_budget" => (
            "host_budget",
            "raise host_budget, or use a smaller batch_size or fewer host_slots",
        ),
        "device_budget" => (
            "device_budget",
            "raise device_budget, or use a smaller batch_size or fewer device_slots",
        ),
        "trace" => ("trace", "turn tracing off"),
        _ => ("", ""),
    }
}

/// A core config error as a `pinring.ConfigError` naming the argument it is about: a
/// setting of the run (the Loader argument of that name), of a Mixture, or of the
/// pipeline (its sizes and budgets, named by the Loader argument that sets them).
pub(crate) fn config_error(py: Python<'_>, e: &ConfigError) -> PyErr {
    match e {
        // The core refuses a restart after a pop: in the words of `load_state_dict`.
        ConfigError::Run { field: "resume", .. } => {
            return error(
                py,
                Kind::Checkpoint,
                "load_state_dict must come before the first pop: this loader delivered                  batches already (make a new Loader, or pass state= to it)",
            )
        }
        ConfigError::Run { field, why } => return config(py, field, why.as_str()),
        ConfigError::Mixture(p) => return config(py, p.field(), format!("invalid Mixture: {p}")),
        _ => {}
    }
    let (arg, fix) = argument(e.field());
    let text = match e {
        ConfigError::Zero(_) => format!("{arg} must be at least 1"),
        ConfigError::Overflow(_) => format!(
            "a batch's size overflows: batch_size × bytes per sample is past what this machine \
             can address; {fix}"
        ),
        ConfigError::TooMany { n, max, .. } => {
            format!("{arg}={n} is over the most a loader supports ({max}); {fix}")
        }
        ConfigError::OverBudget {
            what,
            bytes,
            budget,
            ..
        } => format!("{what} would take {bytes} bytes, over the {arg} of {budget} bytes: {fix}"),
        other => other.to_string(),
    };
    let message = format!("invalid Loader arguments: {text}");
    if arg.is_empty() {
        error(py, Kind::Config, message)
    } else {
        config(py, arg, message)
    }
}

/// Maps a core error to its Python exception, with `context` (if not empty) before the
/// message.
pub(crate) fn to_py_with(py: Python<'_>, e: pinring::Error, context: &str) -> PyErr {
    if let pinring::Error::Config(c) = &e {
        return config_error(py, c);
    }
    let text = message(&e);
    let text = if context.is_empty() {
        text
    } else {
        format!("{context}: {text}")
    };
    new_error(py, kind_of(&e), text, &attrs(py, &e))
}

/// Maps a core error to its Python exception.
pub(crate) fn to_py(py: Python<'_>, e: pinring::Error) -> PyErr {
    to_py_with(py, e, "")
}

/// A [`pinring::RankError`]'s attributes: the rank named, the kind of problem, the step.
pub(crate) fn rank_attrs<'py>(
    py: Python<'py>,
    e: &pinring::RankError,
) -> Vec<(&'static str, Bound<'py, PyAny>)> {
    use pinring::RankError as R;
    let (kind, step) = match e {
        R::RunsOut { step, .. } => ("runs_out", Some(*step)),
        R::SlowData { step, .. } => ("slow_data", Some(*step)),
        R::Steps { step, .. } => ("steps", Some(*step)),
        R::Versions { .. } => ("versions", None),
        R::Collective(_) => ("collective", None),
        R::BadReduction(_) => ("bad_reduction", None),
        _ => ("other", None),
    };
    vec![
        ("rank", obj(py, e.rank())),
        ("kind", obj(py, kind)),
        ("step", obj(py, step)),
    ]
}
