//! [`RecordFile`]: one file of fixed-size records, checked when opened and read by position.

use std::fmt;
use std::path::Path;

use crate::error::source::{FileProblem, SourceError};
use crate::error::Result;
use crate::source::files::content::content_of;
use crate::source::files::source_file::SourceFile;
use crate::source::sampling::file_set::open_set_file;
use crate::source::sampling::window::SegmentFile;

/// One file of fixed-size records, checked when opened.
///
/// Its records are read by position (`pread`; nothing is mapped, so no read can fault), and
/// the file is checked after the reads: a file that shrinks, is rewritten or is replaced
/// while a loader reads it is a [`SourceError::Read`] naming it, never a crash, and so is a
/// read the file system fails ([`ReadProblem::Io`](crate::source::ReadProblem::Io)).
pub struct RecordFile {
    file: SourceFile,
    record_bytes: usize,
    records: usize,
    /// The content fingerprint, sampled when opened.
    content: u64,
}

impl fmt::Debug for RecordFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordFile")
            .field("path", &self.file.path())
            .field("record_bytes", &self.record_bytes)
            .field("records", &self.records)
            .field("content", &format_args!("{:#018x}", self.content))
            .finish()
    }
}

impl RecordFile {
    /// Opens `path` as records of `record_bytes` bytes. An empty file is
    /// [`FileProblem::Empty`]; a length that is not a whole number of records is
    /// [`FileProblem::PartialRecord`]; a directory is [`FileProblem::IsDirectory`]; all
    /// name the file.
    pub fn open(path: impl AsRef<Path>, record_bytes: usize) -> Result<Self> {
        let path = path.as_ref();
        if record_bytes == 0 {
            return Err(SourceError::Zero("record_bytes").into());
        }
        let file = open_set_file(path)?;
        let len = file.len();
        if len % record_bytes as u64 != 0 {
            return Err(SourceError::file(
                path,
                FileProblem::PartialRecord {
                    len,
                    record_bytes: record_bytes as u64,
                },
            )
            .into());
        }
        let content = content_of(&file)?;
        Ok(RecordFile {
            file,
            record_bytes,
            records: (len / record_bytes as u64) as usize,
            content,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Bytes per record.
    pub fn record_bytes(&self) -> usize {
        self.record_bytes
    }

    /// Records in the file (at least 1).
    pub fn len(&self) -> usize {
        self.records
    }

    /// Always `false`: an empty file does not open.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// The file's size in bytes, as opened.
    pub fn file_bytes(&self) -> u64 {
        self.file.len()
    }

    /// The file's content fingerprint, sampled when it was opened: a hash of its size, its
    /// first KiB and 32 eight-byte words spread evenly to its end (what a checkpoint records
    /// as [`Fingerprint::contents`](crate::source::Fingerprint::contents)).
    pub fn content(&self) -> u64 {
        self.content
    }

    /// Record `i`'s bytes, read from the file; `None` past the end. A file that changed
    /// since it was opened is [`SourceError::Read`].
    ///
    /// ```
    /// use pinring::source::RecordFile;
    /// # let path = std::env::temp_dir().join(format!("pinring-record-doc-{}.bin", std::process::id()));
    /// std::fs::write(&path, b"abcdef").unwrap();
    /// let file = RecordFile::open(&path, 2)?;
    /// assert_eq!((file.record(1)?, file.record(3)?), (Some(b"cd".to_vec()), None));
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn record(&self, i: usize) -> Result<Option<Vec<u8>>, SourceError> {
        if i >= self.records {
            return Ok(None);
        }
        let mut bytes = vec![0; self.record_bytes];
        self.read_units(i, &mut bytes)?;
        Ok(Some(bytes))
    }
}

impl SegmentFile for RecordFile {
    fn units(&self) -> u64 {
        self.records as u64
    }

    fn path(&self) -> &Path {
        self.file.path()
    }

    fn unit_bytes(&self) -> usize {
        self.record_bytes
    }

    fn read_units(&self, first: usize, out: &mut [u8]) -> Result<(), SourceError> {
        self.file
            .read_exact_at(first as u64 * self.record_bytes as u64, out)
    }

    fn file_bytes(&self) -> u64 {
        self.file.len()
    }

    fn content(&self) -> u64 {
        self.content
    }

    fn unit_name(&self) -> &'static str {
        "records"
    }

    /// `"records"`, with the record size.
    fn fingerprint_format(&self) -> (&'static str, u64) {
        ("records", self.record_bytes as u64)
    }
}
