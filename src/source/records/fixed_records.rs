//! [`FixedRecords`]: one or more files of fixed-size records in order, a source for a
//! sampler.

use std::path::Path;
use std::sync::Arc;

use super::decoder::RecordBytes;
use super::file::RecordFile;
use crate::error::Result;
use crate::source::contract::IntoSource;
use crate::source::files::glob;
use crate::source::sampling::window_format::WindowFormat;
use crate::source::sampling::file_set::FileSet;
use crate::source::sampling::sampler::Sampler;

/// One or more files of fixed-size records, in order: a source for a
/// [`Sampler`](crate::source::Sampler), which samples single records by default (or runs
/// of records with a larger [`window`](crate::source::SamplerBuilder::window)); its
/// windows are `Window<RecordFile>`. A [`FileSet`]: its sampling and checkpoint
/// fingerprint (format `"records"` with the record size) are every file format's.
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
/// let mut firsts = Vec::new();
/// for r in sampler.epoch(0) {
///     // The stable id of a one-record window is the record's index.
///     assert_eq!(r.read_bytes()?, [r.id() as u8; 4]);
///     firsts.push(r.id());
/// }
/// firsts.sort();
/// assert_eq!(firsts, (0..10).collect::<Vec<u64>>()); // every record once per epoch
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
pub type FixedRecords = FileSet<RecordFile>;

impl FixedRecords {
    /// Opens and checks every file in `paths`, in order, as records of `record_bytes`
    /// bytes. The first bad file is the error; no files is
    /// [`SourceError::NoFiles`](crate::source::SourceError::NoFiles).
    pub fn open<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
        record_bytes: usize,
    ) -> Result<Self> {
        FileSet::open_each(paths, |p| RecordFile::open(p, record_bytes), ())
    }

    /// Opens every file a pattern names, sorted by name (`*` and `?` in the file name).
    pub fn glob(pattern: impl AsRef<Path>, record_bytes: usize) -> Result<Self> {
        Self::open(glob::expand(pattern.as_ref())?, record_bytes)
    }

    /// The files, in order.
    pub fn files(&self) -> &[Arc<RecordFile>] {
        self.all()
    }

    /// Bytes per record (every file's: they were opened with one size).
    pub fn record_bytes(&self) -> usize {
        self.all()[0].record_bytes()
    }

    /// Records in all files.
    pub fn records(&self) -> u64 {
        self.total_units()
    }
}

impl WindowFormat for FixedRecords {
    type Decoder = RecordBytes;

    fn window_decoder(&self) -> RecordBytes {
        RecordBytes
    }

    fn sample_bytes(&self, window: u64) -> usize {
        usize::try_from(window)
            .unwrap_or(usize::MAX)
            .saturating_mul(self.record_bytes())
    }
}

/// A set of record files as a loader's source: one record a sample, in file order (a
/// [`Sampler`] of windows of 1; build one with [`Sampler::builder`] for another window,
/// order or stride). The source type, what the Python package calls `FixedRecords`, is
/// that `Sampler<FixedRecords>`: `Loader::builder(records)` builds a
/// `Loader<Sampler<FixedRecords>>`, as windows of token shards make a
/// `Loader<TokenWindows>` (`TokenWindows` is `Sampler<TokenShards>`).
impl IntoSource for FixedRecords {
    type Source = Sampler<FixedRecords>;

    fn into_source(self) -> Result<Sampler<FixedRecords>> {
        Sampler::builder(self).build()
    }
}
