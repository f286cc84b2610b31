//! How a tool ends: status 0; 1 after a failure; 2 for a bad argument, as for one clap
//! refuses. A message goes to stderr, never a panic.

use std::fmt::Display;
use std::process::ExitCode;

/// A bad argument found after parsing: says why, status 2.
pub fn bad_argument(why: impl Display) -> ExitCode {
    eprintln!("error: {why}");
    ExitCode::from(2)
}

/// The status of a run: 0, or 1 with the error said.
pub fn status(run: Result<(), impl Display>) -> ExitCode {
    match run {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
