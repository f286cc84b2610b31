//! Fixed-size records: files that are a plain array of records of one size, memory-mapped.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use memmap2::Mmap;

use super::checkpoint::Fingerprint;
use super::segmented::{Identified, Segmented, WindowSpec};
use crate::error::source::{FileProblem, SourceError};
use crate::error::Result;

/// One memory-mapped file of fixed-size records, checked when opened.
///
/// Mapped read-only; like [`TokenShard`](super::TokenShard) it relies on no other
/// process truncating the file while it is open.
pub struct RecordFile {
    path: PathBuf,
    map: Mmap,
    record_bytes: usize,
    records: usize,
}

impl fmt::Debug for RecordFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordFile")
            .field("path", &self.path)
            .field("record_bytes", &self.record_bytes)
            .field("records", &self.records)
            .finish()
    }
}

impl RecordFile {
    /// Opens and maps `path` as records of `record_bytes` bytes. An empty file is
    /// [`FileProblem::Empty`]; a length that is not a whole number of records is
    /// [`FileProblem::PartialRecord`]; a directory is [`FileProblem::IsDirectory`]; all
    /// name the file.
    pub fn open(path: impl AsRef<Path>, record_bytes: usize) -> Result<Self> {
        let path = path.as_ref();
        if record_bytes == 0 {
            return Err(SourceError::Zero("record_bytes").into());
        }
        let fail = |problem: FileProblem| SourceError::file(path, problem);
        let (file, len) = super::fs::open_regular(path).map_err(fail)?;
        if len == 0 {
            return Err(fail(FileProblem::Empty).into());
        }
        if usize::try_from(len).is_err() {
            return Err(fail(FileProblem::TooLarge { len }).into());
        }
        // SAFETY: the map is read-only and this crate never writes the file; its bytes are
        // only read as `u8`s, valid for any contents. Another process truncating the file
        // while mapped is the documented caveat of `RecordFile`, not something done here.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| fail(e.into()))?;
        let len = map.len();
        if len == 0 {
            return Err(fail(FileProblem::Empty).into());
        }
        if len % record_bytes != 0 {
            return Err(fail(FileProblem::PartialRecord {
                len: len as u64,
                record_bytes: record_bytes as u64,
            })
            .into());
        }
        Ok(RecordFile {
            path: path.to_owned(),
            map,
            record_bytes,
            records: len / record_bytes,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
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

    /// Record `i`'s bytes, or `None` past the end.
    pub fn record(&self, i: usize) -> Option<&[u8]> {
        let start = i.checked_mul(self.record_bytes)?;
        self.map.get(start..start.checked_add(self.record_bytes)?)
    }
}

/// A run of consecutive records in one file: the sample descriptor the sampler yields
/// for [`FixedRecords`] (one record with the default window of 1). Cheap: a shared
/// handle on the mapped file and two numbers, [`start`](Self::start) and
/// [`len`](Self::len), counted in records (as [`TokenWindow`](super::TokenWindow)'s are
/// in tokens), and its stable [`id`](Self::id) and the [`epoch`](Self::epoch) it was
/// drawn for. [`RecordBytes`](super::RecordBytes) copies it into the batch.
#[derive(Clone)]
pub struct RecordWindow {
    file: Arc<RecordFile>,
    start: usize,
    len: usize,
    id: u64,
    epoch: u64,
}

impl fmt::Debug for RecordWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordWindow")
            .field("file", &self.file.path)
            .field("start", &self.start)
            .field("len", &self.len)
            .field("id", &self.id)
            .field("epoch", &self.epoch)
            .finish()
    }
}

impl RecordWindow {
    /// The `len` records from `start` of `file`, or `None` if they do not all lie in it.
    /// Its id and epoch are 0 until set with [`with_id`](Self::with_id) and
    /// [`with_epoch`](Self::with_epoch) (the sampler sets both).
    pub fn new(file: Arc<RecordFile>, start: usize, len: usize) -> Option<Self> {
        (start.checked_add(len)? <= file.len()).then_some(RecordWindow {
            file,
            start,
            len,
            id: 0,
            epoch: 0,
        })
    }

    /// The window with id `id`.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use pinring::source::{RecordFile, RecordWindow};
    /// # let path = std::env::temp_dir().join(format!("pinring-recwithid-doc-{}.bin", std::process::id()));
    /// std::fs::write(&path, b"abcdef").unwrap();
    /// let w = RecordWindow::new(Arc::new(RecordFile::open(&path, 2)?), 1, 1).unwrap();
    /// let w = w.with_id(1).with_epoch(4);
    /// assert_eq!((w.id(), w.epoch(), w.bytes()), (1, 4, &b"cd"[..]));
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn with_id(mut self, id: u64) -> Self {
        self.id = id;
        self
    }

    /// The window with epoch `epoch`.
    pub fn with_epoch(mut self, epoch: u64) -> Self {
        self.epoch = epoch;
        self
    }

    /// The window's stable id: its index in the dataset's fixed enumeration, the same
    /// whatever the seed, epoch, rank and world size. For the grid orders it is the grid
    /// index (with the default window of one record: the record's index over all files
    /// in order); for [`Order::Random`](super::Order::Random) the index of its start
    /// among every possible start (see [`WindowSpec::id`]).
    ///
    /// ```
    /// use pinring::source::{FixedRecords, Order, Sampler};
    /// # let path = std::env::temp_dir().join(format!("pinring-recid-doc-{}.bin", std::process::id()));
    /// std::fs::write(&path, (0..10u8).collect::<Vec<_>>()).unwrap(); // ten 1-byte records
    /// let sampler = Sampler::builder(FixedRecords::open([&path], 1)?)
    ///     .order(Order::Shuffled { seed: 2 }).build()?;
    /// for r in sampler.epoch(1) {
    ///     assert_eq!((r.id(), r.epoch()), (u64::from(r.bytes()[0]), 1));
    /// }
    /// # std::fs::remove_file(&path).unwrap();
    /// # Ok::<(), pinring::Error>(())
    /// ```
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The epoch the sampler drew the window for.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The file the records lie in.
    pub fn file(&self) -> &Arc<RecordFile> {
        &self.file
    }

    /// The first record's index in the file.
    pub fn start(&self) -> usize {
        self.start
    }

    /// Records in the window.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the window has no records.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The records' bytes, straight from the map.
    pub fn bytes(&self) -> &[u8] {
        let rb = self.file.record_bytes;
        self.file
            .map
            .get(self.start * rb..(self.start + self.len) * rb)
            .unwrap_or(&[])
    }
}

/// One or more files of fixed-size records, in order: a source for a
/// [`Sampler`](super::Sampler), which samples single records by default (or runs of
/// records with a larger [`window`](super::SamplerBuilder::window)).
///
/// ```
/// use pinring::source::{FixedRecords, Order, Sampler};
///
/// # let path = std::env::temp_dir().join(format!("pinring-records-doc-{}.bin", std::process::id()));
/// // Ten records of 4 bytes: record i is [i, i, i, i].
/// let bytes: Vec<u8> = (0..10u8).flat_map(|i| [i; 4]).collect();
/// std::fs::write(&path, &bytes).unwrap();
///
/// let records = FixedRecords::open([&path], 4)?;
/// assert_eq!(records.records(), 10);
/// let sampler = Sampler::builder(records).order(Order::Shuffled { seed: 7 }).build()?;
/// let mut firsts: Vec<u8> = sampler.epoch(0).map(|r| r.bytes()[0]).collect();
/// firsts.sort();
/// assert_eq!(firsts, (0..10).collect::<Vec<u8>>()); // every record once per epoch
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct FixedRecords {
    files: Vec<Arc<RecordFile>>,
    record_bytes: usize,
}

impl FixedRecords {
    /// Opens and checks every file in `paths`, in order, as records of `record_bytes`
    /// bytes. The first bad file is the error; no files is [`SourceError::NoFiles`].
    pub fn open<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
        record_bytes: usize,
    ) -> Result<Self> {
        let files = paths
            .into_iter()
            .map(|p| RecordFile::open(p, record_bytes).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        if files.is_empty() {
            return Err(SourceError::NoFiles.into());
        }
        Ok(FixedRecords {
            files,
            record_bytes,
        })
    }

    /// Opens every file a pattern names, sorted by name (`*` and `?` in the file name).
    pub fn glob(pattern: impl AsRef<Path>, record_bytes: usize) -> Result<Self> {
        Self::open(super::glob::expand(pattern.as_ref())?, record_bytes)
    }

    /// The files, in order.
    pub fn files(&self) -> &[Arc<RecordFile>] {
        &self.files
    }

    /// Bytes per record.
    pub fn record_bytes(&self) -> usize {
        self.record_bytes
    }

    /// Records in all files.
    pub fn records(&self) -> u64 {
        self.files.iter().map(|f| f.len() as u64).sum()
    }
}

impl Segmented for FixedRecords {
    type Window = RecordWindow;

    fn segments(&self) -> usize {
        self.files.len()
    }

    fn units(&self, segment: usize) -> u64 {
        self.files.get(segment).map_or(0, |f| f.len() as u64)
    }

    fn window(&self, spec: WindowSpec) -> RecordWindow {
        // Only in-range windows are asked for; anything else is clamped, never a panic.
        let file = self.files[spec.segment.min(self.files.len() - 1)].clone();
        let n = file.len();
        let len = usize::try_from(spec.len).unwrap_or(n).min(n);
        let start = usize::try_from(spec.start).unwrap_or(n).min(n - len);
        RecordWindow {
            file,
            start,
            len,
            id: spec.id,
            epoch: spec.epoch,
        }
    }

    /// Format `"records"` with the record size, each file's name and size in bytes.
    fn fingerprint(&self) -> Fingerprint {
        let mut print = Fingerprint::new("records", self.record_bytes as u64);
        for f in &self.files {
            print.push_file(f.path(), f.map.len() as u64);
        }
        print
    }
}

impl Identified for RecordWindow {
    fn id(&self) -> u64 {
        self.id
    }

    fn epoch(&self) -> u64 {
        self.epoch
    }
}
