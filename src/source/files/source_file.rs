//! An open source file, read by position: regular files only (the cause named otherwise),
//! what the file was when opened, and the check after the reads that it still is.
//!
//! Every byte comes from a positioned read (`pread`, std's `FileExt::read_at`, looping on
//! short counts and `EINTR`): straight into the caller's buffer, or through this thread's
//! [`chunk`](super::chunk) where the bytes are widened on their way or the walk reads
//! ahead. Nothing is mapped, so no read can fault: a page the file system cannot deliver is
//! the read's error ([`ReadProblem::Io`]), reported like any other. After the reads the
//! open file's size, modification time and link count are compared with those it had when
//! opened (see [`SourceFile::read_exact_at`]): that check vouches for the bytes. Inside a
//! [run](super::deferred) (the decode pool's work item) the check comes once per file when
//! the run ends, before anything read in it is published.

use std::fs::File;
use std::path::Path;
use std::time::SystemTime;

use super::chunk::{self, Chunk, CHUNK_BYTES};
use super::deferred;
use super::open_file::OpenFile;
use crate::error::source::{FileProblem, ReadProblem, SourceError};
use crate::sync::native::Arc;

/// Reads of at least this many bytes that need no widening go straight into the caller's
/// buffer, whatever the walk: one copy by the kernel. Shorter ones that follow the
/// thread's last read of the file go through the chunk, which then reads ahead.
const DIRECT_BYTES: usize = CHUNK_BYTES / 2;

/// A regular file opened for positioned reads, with what it was when opened.
#[derive(Debug)]
pub(crate) struct SourceFile {
    open: Arc<OpenFile>,
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
        Ok(SourceFile {
            open: Arc::new(OpenFile::new(path.to_owned(), file, &meta)),
        })
    }

    /// The path it was opened at.
    pub(crate) fn path(&self) -> &Path {
        self.open.path()
    }

    /// Its length in bytes when it was opened.
    pub(crate) fn len(&self) -> u64 {
        self.open.len()
    }

    /// Its modification time when it was opened, where the system gives one.
    pub(crate) fn modified(&self) -> Option<SystemTime> {
        self.open.modified()
    }

    /// Reads exactly `out.len()` bytes from `offset` into `out`, then checks that the file
    /// is still the one opened, unchanged. Any failure is [`SourceError::Read`] naming the
    /// file:
    ///
    /// - the system's error: [`ReadProblem::Io`] ("it could not be read", with the OS
    ///   error; [`ReadProblem::is_retryable`]), unless the check finds the file changed;
    ///   NFS's "stale file handle", a file replaced on the server, is
    ///   [`ReadProblem::Replaced`];
    /// - a read that ends early: what the check finds (the file shrank);
    /// - after the read, the open file's size or modification time differs from when it was
    ///   opened: [`ReadProblem::Shrank`] or [`ReadProblem::Rewritten`];
    /// - after the read, no path names the open file any more (its link count is 0): the
    ///   path is looked up once, [`ReadProblem::Replaced`] when it names another file,
    ///   [`ReadProblem::Removed`] when none.
    ///
    /// The check comes after the read, so it vouches for the bytes read: a write lands in
    /// the file's modification time before its data, so bytes of a write the read saw show
    /// in the check. Inside a run (the decode pool's work item, [`deferred`]) the check is
    /// the run's, once per file when it ends. On error `out` holds whatever was read.
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
            let deferred = self.note_or_check_after();
            chunk::with(deferred::active(), |chunk| {
                for (offset, out) in reads {
                    self.read_into(chunk, offset, out)?;
                }
                Ok(())
            })?;
            self.checked(deferred)
        };
        read_all().map_err(|problem| self.error(problem))
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
            let deferred = self.note_or_check_after();
            let mut done = 0;
            while done < len {
                let n = stage.len().min(len - done);
                self.open.fill(offset + done as u64, &mut stage[..n])?;
                each(done, &stage[..n]);
                done += n;
            }
            self.checked(deferred)
        };
        read_all().map_err(|problem| self.error(problem))
    }

    /// As [`read_staged`](Self::read_staged), through this thread's chunk (in cache, its
    /// reads placed to match the file's alignment): the pieces of a window to widen. Where
    /// the read follows the thread's last one of this file inside a run (a sequential walk),
    /// the chunk reads ahead, and the next reads find their bytes there.
    pub(crate) fn read_chunked(
        &self,
        offset: u64,
        len: usize,
        mut each: impl FnMut(usize, &[u8]),
    ) -> Result<(), SourceError> {
        let mut read_all = || {
            let deferred = self.note_or_check_after();
            chunk::with(deferred::active(), |chunk| {
                let mut done = 0;
                while done < len {
                    let at = offset + done as u64;
                    let bytes = self.chunk_bytes(chunk, at, len - done)?;
                    let n = bytes.len().min(len - done);
                    each(done, &bytes[..n]);
                    done += n;
                }
                Ok(())
            })?;
            self.checked(deferred)
        };
        read_all().map_err(|problem| self.error(problem))
    }

    /// Reads `out.len()` bytes from `offset` into `out`, unchecked: what the chunk holds of
    /// them from there, the rest straight in, or through the chunk when it is short and
    /// follows the thread's last read (the walk is sequential: the chunk reads ahead).
    fn read_into(&self, chunk: &mut Chunk, offset: u64, out: &mut [u8]) -> Result<(), ReadProblem> {
        let mut done = 0;
        while done < out.len() {
            let at = offset + done as u64;
            let rest = out.len() - done;
            let held = chunk.held(&self.open, at).is_some();
            if held || (rest < DIRECT_BYTES && chunk.follows(&self.open, at)) {
                let bytes = self.chunk_bytes(chunk, at, rest)?;
                let n = bytes.len().min(rest);
                out[done..done + n].copy_from_slice(&bytes[..n]);
                done += n;
            } else {
                self.open.fill(at, &mut out[done..])?;
                chunk.note(&self.open, at + rest as u64);
                return Ok(());
            }
        }
        Ok(())
    }

    /// The chunk's bytes of this file from `at` on, reading them into it first when it does
    /// not hold them: `want` bytes (all that fits), or a whole chunk where the read follows
    /// the thread's last one inside a run (and, should that read fail, `want` again).
    fn chunk_bytes<'c>(
        &self,
        chunk: &'c mut Chunk,
        at: u64,
        want: usize,
    ) -> Result<&'c [u8], ReadProblem> {
        if chunk.held(&self.open, at).is_none() {
            let need = want.min(CHUNK_BYTES);
            let left = usize::try_from(self.open.len().saturating_sub(at)).unwrap_or(usize::MAX);
            let ahead = CHUNK_BYTES.min(left);
            let read_ahead = ahead > need && deferred::active() && chunk.follows(&self.open, at);
            // Bytes read ahead that the file system fails to give are not this read's
            // failure: then only what it needs.
            if !read_ahead || chunk.fill(&self.open, at, ahead).is_err() {
                chunk.fill(&self.open, at, need)?;
            }
        }
        Ok(chunk.held(&self.open, at).unwrap_or_default())
    }

    /// Before the reads: inside a run, notes the file for the check at the run's end (and
    /// holds it there, so that no other file takes its place in the chunk meanwhile, even if
    /// a read fails) and returns `true`; outside one, `false`.
    fn note_or_check_after(&self) -> bool {
        deferred::defer(&self.open)
    }

    /// The check after the reads: now, or (`deferred`), inside a run, when it ends.
    fn checked(&self, deferred: bool) -> Result<(), ReadProblem> {
        if deferred {
            Ok(())
        } else {
            self.open.check()
        }
    }

    /// `problem` as the error naming this file.
    fn error(&self, problem: ReadProblem) -> SourceError {
        SourceError::Read {
            path: self.open.path().to_owned(),
            problem,
            at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use super::SourceFile;
    use crate::error::source::{ReadProblem, SourceError};
    use crate::source::files::deferred::Run;

    /// A file of `len` bytes, byte `i` being `i % 251 ^ salt`.
    fn bytes(len: usize, salt: u8) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8 ^ salt).collect()
    }

    fn file(len: usize) -> (tempfile::NamedTempFile, SourceFile) {
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), bytes(len, 0)).unwrap();
        let opened = SourceFile::open(f.path()).unwrap();
        (f, opened)
    }

    /// Rewrites `path` with other bytes of the same size and sets its time back: a change
    /// the check cannot see.
    fn rewrite_unseen(path: &std::path::Path, len: usize, modified: SystemTime) {
        std::fs::write(path, bytes(len, 0x5a)).unwrap();
        let f = std::fs::File::options().write(true).open(path).unwrap();
        f.set_modified(modified).unwrap();
    }

    #[test]
    fn a_run_checks_each_file_at_its_end_naming_the_first_sample_that_read_it() {
        let (f, file) = file(64 << 10);
        let run = Run::begin();
        run.sample(3);
        let mut out = [0u8; 16];
        file.read_exact_at(100, &mut out).unwrap();
        run.sample(4);
        file.read_exact_at(200, &mut out).unwrap();
        std::fs::File::options()
            .write(true)
            .open(f.path())
            .unwrap()
            .set_len(10)
            .unwrap();
        // The reads in the run were not checked; its end finds the change.
        let failed = run.finish().unwrap_err();
        assert_eq!(failed.sample, 3);
        assert!(
            matches!(
                failed.error,
                SourceError::Read {
                    problem: ReadProblem::Shrank { len: 10, .. },
                    ..
                }
            ),
            "{:?}",
            failed.error
        );
        // Outside a run every read is checked at once.
        assert!(file.read_exact_at(0, &mut out[..4]).is_err());
    }

    #[test]
    fn nothing_a_run_read_lingers_after_it() {
        let len = 1 << 20;
        let (f, file) = file(len);
        let modified = file.modified().unwrap();
        let sequential = |out: &mut Vec<u8>| {
            let run = Run::begin();
            // Short reads one after the other: the chunk reads ahead and serves them.
            for k in 0..32u64 {
                let mut w = [0u8; 2048];
                file.read_exact_at(k * 2048, &mut w).unwrap();
                out.extend_from_slice(&w);
            }
            run.finish().unwrap();
        };
        let mut first = Vec::new();
        sequential(&mut first);
        assert!(first == bytes(len, 0)[..64 << 10]);
        rewrite_unseen(f.path(), len, modified);
        // A new run reads the file's bytes again, not what the last one held.
        let mut second = Vec::new();
        sequential(&mut second);
        assert!(
            second == bytes(len, 0x5a)[..64 << 10],
            "bytes of the earlier run lingered"
        );
        // So does a read outside any run, widened through the chunk.
        let mut got = Vec::new();
        file.read_chunked(4096, 8192, |_, piece| got.extend_from_slice(piece))
            .unwrap();
        assert!(got == bytes(len, 0x5a)[4096..12288]);
    }
}
