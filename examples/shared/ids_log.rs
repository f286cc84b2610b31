//! The `--ids FILE` log of the training examples (`train_loop`, `candle_train`): each
//! consumed batch's window ids, appended one line a batch, so that two runs' batch
//! sequences can be compared.

use std::fs::File;
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
