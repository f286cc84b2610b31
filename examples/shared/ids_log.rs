//! The `--ids FILE` log of the training examples (`train_loop`, `candle_train`): each
//! consumed batch's window ids, appended one line a batch, so that two runs' batch
//! sequences can be compared.

use std::fs::File;
use std::io::Write;
use std::path::Path;

/// `path` opened for appending (made if missing), or `None` without one; an error names it.
pub fn open(path: Option<&Path>) -> Result<Option<File>, String> {
    path.map(|p| {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(p)
            .map_err(|e| format!("{}: {e}", p.display()))
    })
    .transpose()
}

/// Appends `line` and its newline to the log in one write, so that a run killed mid-batch
/// leaves whole lines only (`writeln!` on a `File` writes each formatted piece by itself,
/// and a kill between two of them left a line of a step without its ids).
pub fn append(log: &mut File, line: &str) -> Result<(), String> {
    log.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| e.to_string())
}
