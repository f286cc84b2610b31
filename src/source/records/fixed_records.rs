//! [`FixedRecords`]: one or more files of fixed-size records in order, a source for a
//! sampler.

use std::path::Path;
use std::sync::Arc;

use super::decoder::RecordBytes;
use super::file::RecordFile;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::source::files::glob;
use crate::source::contract::IntoSource;
use crate::source::sampling::as_source::WindowFormat;
use crate::source::sampling::checkpoint::Fingerprint;
use crate::source::sampling::sampler::Sampler;
use crate::source::sampling::segmented::{Segmented, WindowSpec};
use crate::source::sampling::window::Window;

/// One or more files of fixed-size records, in order: a source for a
/// [`Sampler`](crate::source::Sampler), which samples single records by default (or runs
/// of records with a larger [`window`](crate::source::SamplerBuilder::window)); its
/// windows are `Window<RecordFile>`.
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
        Self::open(glob::expand(pattern.as_ref())?, record_bytes)
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

impl WindowFormat for FixedRecords {
    type Decoder = RecordBytes;

    fn window_decoder(&self) -> RecordBytes {
        RecordBytes
    }

    fn sample_bytes(&self, window: u64) -> usize {
        usize::try_from(window)
            .unwrap_or(usize::MAX)
            .saturating_mul(self.record_bytes)
    }
}

/// A set of record files as a loader's source: one record a sample, in file order (a
/// [`Sampler`] of windows of 1; build one with [`Sampler::builder`] for another window,
/// order or stride).
impl IntoSource for FixedRecords {
    type Source = Sampler<FixedRecords>;

    fn into_source(self) -> Result<Sampler<FixedRecords>> {
        Sampler::builder(self).build()
    }
}

impl Segmented for FixedRecords {
    type Window = Window<RecordFile>;

    fn segments(&self) -> usize {
        self.files.len()
    }

    fn units(&self, segment: usize) -> u64 {
        self.files.get(segment).map_or(0, |f| f.len() as u64)
    }

    fn window(&self, spec: WindowSpec) -> Window<RecordFile> {
        // Only windows inside a file are asked for; `placed` clamps anything else.
        let file = &self.files[spec.segment.min(self.files.len() - 1)];
        Window::placed(file.clone(), spec)
    }

    fn unit_name(&self) -> &'static str {
        "records"
    }

    fn segment_path(&self, segment: usize) -> Option<&Path> {
        self.files.get(segment).map(|f| f.path())
    }

    /// Format `"records"` with the record size, each file's name, size in bytes and
    /// content fingerprint ([`RecordFile::content`]).
    fn fingerprint(&self) -> Fingerprint {
        let mut print = Fingerprint::new("records", self.record_bytes as u64);
        for f in &self.files {
            print.push_file_with_content(f.path(), f.file_bytes(), f.content());
        }
        print
    }
}
