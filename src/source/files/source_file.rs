//! An open source file, read by position: regular files only (the cause named otherwise),
//! what the file was when opened, and the check after every read that it still is.
//!
//! Sources read their files through a memory map guarded against SIGBUS (Linux,
//! [`GuardedMap`]: a page lost to a truncation reads as zeros and the read is reported,
//! never a signal), or elsewhere with positioned reads (`pread`) straight into the
//! caller's buffer. After each read the open file's size, modification time and link
//! count are compared with those it had when opened (see [`SourceFile::read_exact_at`]):
//! that check, not the map, vouches for the bytes.

use std::fs::{File, Metadata};
use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::guarded_map::{GuardedMap, Vanished};
use crate::error::source::{FileProblem, ReadProblem, SourceError};

/// What the system says about an open file, compared after every read.
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

/// A regular file opened for positioned reads, with what it was when opened.
#[derive(Debug)]
pub(crate) struct SourceFile {
    path: PathBuf,
    file: File,
    opened: Snapshot,
    /// The file mapped, read under the SIGBUS guard (`None`: read by position).
    map: Option<GuardedMap>,
}

impl SourceFile {
    /// Opens `path` for reading. A directory is [`FileProblem::IsDirectory`] and anything
    /// else that is not a regular file (a device, a pipe: opening a pipe would block)
    /// [`FileProblem::NotAFile`].
    pub(crate) fn open(path: &Path) -> Result<Self, FileProblem> {
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
        let map = GuardedMap::new(&file);
        Ok(SourceFile {
            path: path.to_owned(),
            file,
            opened: Snapshot::of(&meta),
            map,
        })
    }

    /// The path it was opened at.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Its length in bytes when it was opened.
    pub(crate) fn len(&self) -> u64 {
        self.opened.len
    }

    /// Its modification time when it was opened, where the system gives one.
    pub(crate) fn modified(&self) -> Option<SystemTime> {
        self.opened.modified
    }

    /// Reads exactly `out.len()` bytes from `offset` into `out`, then checks that the file
    /// is still the one opened, unchanged. Any failure is [`SourceError::Read`] naming the
    /// file:
    ///
    /// - a read that ends early: [`ReadProblem::Shrank`];
    /// - after the read, the open file's size or modification time differs from when it was
    ///   opened: [`ReadProblem::Shrank`] or [`ReadProblem::Rewritten`];
    /// - after the read, no path names the open file any more (its link count is 0): the
    ///   path is looked up once, [`ReadProblem::Replaced`] when it names another file,
    ///   [`ReadProblem::Removed`] when none;
    /// - the system's error: [`ReadProblem::Io`] (NFS's "stale file handle", a file
    ///   replaced on the server, is [`ReadProblem::Replaced`]).
    ///
    /// The check comes after the read, so it vouches for the bytes read: a write lands in
    /// the file's modification time before its data, so bytes of a write the read saw show
    /// in the check. On error `out` holds whatever was read.
    pub(crate) fn read_exact_at(&self, offset: u64, out: &mut [u8]) -> Result<(), SourceError> {
        self.read_exact_at_each([(offset, out)])
    }

    /// As [`read_exact_at`](Self::read_exact_at) for several ranges, with one check after
    /// the last read (which vouches for them all).
    pub(crate) fn read_exact_at_each<'a>(
        &self,
        reads: impl IntoIterator<Item = (u64, &'a mut [u8])>,
    ) -> Result<(), SourceError> {
        let read_all = || {
            for (offset, out) in reads {
                match self.mapped(offset, out.len()) {
                    Some((map, at)) => map
                        .with_bytes(at, out.len(), |bytes| out.copy_from_slice(bytes))
                        .map_err(|Vanished| self.shrank())?,
                    None => self.read_unchecked(offset, out)?,
                }
            }
            self.check()
        };
        read_all().map_err(|problem| SourceError::Read {
            path: self.path.clone(),
            problem,
            at: None,
        })
    }

    /// Reads the `len` bytes from `offset` a piece at a time into `stage` (each piece
    /// `stage.len()` bytes but the last), handing each to `each(bytes before it, piece)`,
    /// then checks the file once (as [`read_exact_at`](Self::read_exact_at) does): the
    /// check vouches for every piece, but `each` has seen them before it, so a caller that
    /// writes them somewhere must not publish that before this returns `Ok`.
    pub(crate) fn read_staged(
        &self,
        offset: u64,
        len: usize,
        stage: &mut [u8],
        mut each: impl FnMut(usize, &[u8]),
    ) -> Result<(), SourceError> {
        let mut read_all = || {
            if let Some((map, at)) = self.mapped(offset, len) {
                // Mapped: the whole range is one piece, read where it lies.
                map.with_bytes(at, len, |bytes| each(0, bytes))
                    .map_err(|Vanished| self.shrank())?;
                return self.check();
            }
            let mut done = 0;
            while done < len {
                let n = stage.len().min(len - done);
                self.read_unchecked(offset + done as u64, &mut stage[..n])?;
                each(done, &stage[..n]);
                done += n;
            }
            self.check()
        };
        read_all().map_err(|problem| SourceError::Read {
            path: self.path.clone(),
            problem,
            at: None,
        })
    }

    /// Reads exactly `out.len()` bytes from `offset`. A read that ends early is reported
    /// as the check finds the file (it shrank); otherwise the caller checks after its last
    /// read.
    fn read_unchecked(&self, offset: u64, out: &mut [u8]) -> Result<(), ReadProblem> {
        let mut done = 0;
        while done < out.len() {
            let at = offset.saturating_add(done as u64);
            match read_at(&self.file, &mut out[done..], at) {
                Ok(0) => {
                    // The file ends before the bytes it had when opened: whatever the check
                    // finds (it shrank), or, should it have grown back since, the end met.
                    self.check()?;
                    return Err(ReadProblem::Shrank {
                        len: at,
                        opened: self.opened.len,
                    });
                }
                Ok(n) => done += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::StaleNetworkFileHandle => {
                    return Err(ReadProblem::Replaced)
                }
                Err(e) => return Err(ReadProblem::Io(e)),
            }
        }
        Ok(())
    }

    /// The map and the offset in it of `len` bytes from `offset`, when the file is mapped
    /// and they lie in the map.
    fn mapped(&self, offset: u64, len: usize) -> Option<(&GuardedMap, usize)> {
        let map = self.map.as_ref()?;
        let at = usize::try_from(offset).ok()?;
        (at.checked_add(len)? <= map.len()).then_some((map, at))
    }

    /// What a guarded read that lost a page reports: what the check finds (the file
    /// shrank), or, should it look whole again, that it shrank under the read.
    fn shrank(&self) -> ReadProblem {
        match self.check() {
            Err(problem) => problem,
            Ok(()) => ReadProblem::Shrank {
                len: self.file.metadata().map_or(0, |m| m.len()),
                opened: self.opened.len,
            },
        }
    }

    /// Whether the open file is as it was when opened.
    fn check(&self) -> Result<(), ReadProblem> {
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
