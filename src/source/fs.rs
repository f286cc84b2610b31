//! Opening the files sources map: regular files only, with the cause named otherwise.

use std::fs::File;
use std::path::Path;

use crate::error::source::FileProblem;

/// Opens `path` for reading and returns the file and its length. A directory is
/// [`FileProblem::IsDirectory`] and anything else that is not a regular file (a device,
/// a pipe: opening a pipe would block) [`FileProblem::NotAFile`], instead of the system's
/// error from mapping it ("No such device").
pub(crate) fn open_regular(path: &Path) -> Result<(File, u64), FileProblem> {
    // Follows symbolic links, as `File::open` does.
    let kind = std::fs::metadata(path)?.file_type();
    if kind.is_dir() {
        return Err(FileProblem::IsDirectory);
    }
    if !kind.is_file() {
        return Err(FileProblem::NotAFile);
    }
    let file = File::open(path)?;
    let meta = file.metadata()?;
    // The path may have been replaced between the two looks: check what was opened.
    if meta.is_dir() {
        return Err(FileProblem::IsDirectory);
    }
    if !meta.is_file() {
        return Err(FileProblem::NotAFile);
    }
    Ok((file, meta.len()))
}
