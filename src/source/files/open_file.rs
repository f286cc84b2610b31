//! [`OpenFile`]: an open source file and what it was when opened (its `Snapshot`), its
//! positioned reads and the check that it still is what it was. A
//! [`SourceFile`](super::source_file::SourceFile) shares one; a thread's
//! [`chunk`](super::chunk) reads through it.

use std::fs::{File, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::error::source::ReadProblem;

/// What the system says about an open file, compared after the reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Snapshot {
    len: u64,
    modified: Option<SystemTime>,
    /// Whether some path names the file (its link count is not 0). Unix only; elsewhere
    /// always true.
    linked: bool,
}

impl Snapshot {
    fn of(meta: &Metadata) -> Self {
        #[cfg(unix)]
        let linked = std::os::unix::fs::MetadataExt::nlink(meta) > 0;
        #[cfg(not(unix))]
        let linked = true;
        Snapshot {
            len: meta.len(),
            modified: meta.modified().ok(),
            linked,
        }
    }
}

/// The open file and what it was when opened: shared, so that a run's deferred check
/// ([`deferred`]) holds the file it must check however long its reader lives.
#[derive(Debug)]
pub(super) struct OpenFile {
    path: PathBuf,
    file: File,
    opened: Snapshot,
}

impl OpenFile {
    /// The file opened at `path`, as `meta` says it is now.
    pub(super) fn new(path: PathBuf, file: File, meta: &Metadata) -> OpenFile {
        OpenFile {
            path,
            file,
            opened: Snapshot::of(meta),
        }
    }

    /// The path it was opened at.
    pub(super) fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the open file is as it was when opened.
    pub(super) fn check(&self) -> Result<(), ReadProblem> {
        let now = Snapshot::of(&self.file.metadata().map_err(ReadProblem::Io)?);
        let opened = self.opened;
        if now.len < opened.len {
            return Err(ReadProblem::Shrank {
                len: now.len,
                opened: opened.len,
            });
        }
        if now.len != opened.len || now.modified != opened.modified {
            return Err(ReadProblem::Rewritten {
                len: now.len,
                opened: opened.len,
                modified: now.modified != opened.modified,
            });
        }
        if opened.linked && !now.linked {
            // Nothing names the open file now: its path was renamed over, or deleted.
            return Err(match std::fs::metadata(&self.path) {
                Ok(_) => ReadProblem::Replaced,
                Err(_) => ReadProblem::Removed,
            });
        }
        Ok(())
    }

    /// The read's failure as the file stands: the change the check finds, if any (a
    /// change explains a failed read better than its error does), else `problem`.
    fn failed(&self, problem: ReadProblem) -> ReadProblem {
        match self.check() {
            Err(change) if change.is_change() => change,
            _ => problem,
        }
    }

    /// Reads exactly `out.len()` bytes from `offset`, unchecked: the caller checks after
    /// its last read. The system's error is [`ReadProblem::Io`] (NFS's "stale file
    /// handle", a file replaced on the server, is [`ReadProblem::Replaced`]), or the change
    /// the check finds; a read that ends early is the file's shrinking (or, should the file
    /// look as it was, an I/O error: the system gave fewer bytes than the file has).
    pub(super) fn fill(&self, offset: u64, out: &mut [u8]) -> Result<(), ReadProblem> {
        let mut done = 0;
        while done < out.len() {
            let at = offset.saturating_add(done as u64);
            match read_at(&self.file, &mut out[done..], at) {
                Ok(0) => {
                    let early = io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        format!(
                            "the read ended at byte {at}, before the {} bytes the file has",
                            self.opened.len
                        ),
                    );
                    return Err(self.failed(ReadProblem::Io(early)));
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::StaleNetworkFileHandle => {
                    return Err(ReadProblem::Replaced)
                }
                Err(e) => return Err(self.failed(ReadProblem::Io(e))),
            }
        }
        Ok(())
    }

    /// Bytes in the file when it was opened.
    pub(super) fn len(&self) -> u64 {
        self.opened.len
    }

    /// Its modification time when it was opened, where the system gives one.
    pub(super) fn modified(&self) -> Option<SystemTime> {
        self.opened.modified
    }
}

/// One positioned read (`pread`): up to `out.len()` bytes from `offset`, without moving a
/// shared file position, so that any number of threads read one file at once.
#[cfg(unix)]
fn read_at(file: &File, out: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, out, offset)
}

/// One positioned read (`ReadFile` at an offset).
#[cfg(windows)]
fn read_at(file: &File, out: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::windows::fs::FileExt::seek_read(file, out, offset)
}
