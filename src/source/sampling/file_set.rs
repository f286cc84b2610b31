//! [`FileSet`]: one or more files of one format in order, the [`Segmented`] source every
//! file format is — written once over its [`SegmentFile`]s ([`TokenShards`] and
//! [`FixedRecords`] are file sets) — and what every file of a set passes when opened.
//!
//! [`TokenShards`]: crate::source::TokenShards
//! [`FixedRecords`]: crate::source::FixedRecords

use std::path::Path;
use std::sync::Arc;

use super::checkpoint::Fingerprint;
use super::segmented::{Segmented, WindowSpec};
use super::window::{SegmentFile, Window};
use crate::error::source::{FileProblem, SourceError};
use crate::error::Result;
use crate::source::files::source_file::SourceFile;

/// One or more files of one format, in order: the segments a
/// [`Sampler`](crate::source::Sampler) cuts windows from (`Window<F>`), and `D`, what a
/// loader decodes their units to. [`TokenShards`](crate::source::TokenShards) is
/// `FileSet<TokenShard, TokenType>` (token files of any format, decoded to a
/// [`TokenType`](crate::source::TokenType)); [`FixedRecords`](crate::source::FixedRecords)
/// is `FileSet<RecordFile>` (records are copied as they are). The formats' own
/// constructors open one (`TokenShards::open`, `FixedRecords::open`, ...); the sampling,
/// the windows' ids, the checkpoint's fingerprint and its checks are this set's, whatever
/// the format.
#[derive(Debug)]
pub struct FileSet<F, D = ()> {
    /// Never empty.
    files: Vec<Arc<F>>,
    decode: D,
}

/// Not derived: a set is cloned by its handles on the open files, whatever `F` is.
impl<F, D: Clone> Clone for FileSet<F, D> {
    fn clone(&self) -> Self {
        FileSet {
            files: self.files.clone(),
            decode: self.decode.clone(),
        }
    }
}

impl<F: SegmentFile, D> FileSet<F, D> {
    /// The set of `files`, decoded to `decode`; no files is [`SourceError::NoFiles`].
    pub(crate) fn new(files: Vec<Arc<F>>, decode: D) -> Result<Self> {
        if files.is_empty() {
            return Err(SourceError::NoFiles.into());
        }
        Ok(FileSet { files, decode })
    }

    /// Opens every file in `paths` with `open`, in the order given: the first error is
    /// the error; no files is [`SourceError::NoFiles`].
    pub(crate) fn open_each<P: AsRef<Path>>(
        paths: impl IntoIterator<Item = P>,
        mut open: impl FnMut(&Path) -> Result<F>,
        decode: D,
    ) -> Result<Self> {
        let files = paths
            .into_iter()
            .map(|p| open(p.as_ref()).map(Arc::new))
            .collect::<Result<Vec<_>>>()?;
        Self::new(files, decode)
    }

    /// The files, in order.
    pub(crate) fn all(&self) -> &[Arc<F>] {
        &self.files
    }

    /// Units in all files.
    pub(crate) fn total_units(&self) -> u64 {
        self.files.iter().map(|f| f.units()).sum()
    }

    /// What a loader decodes the units to.
    pub(crate) fn decode(&self) -> &D {
        &self.decode
    }

    /// The same files, decoded to `decode`.
    pub(crate) fn with_decode(self, decode: D) -> Self {
        FileSet { decode, ..self }
    }
}

/// Any file set is a sampler's source: segment `i` is file `i`, its units the file's.
impl<F: SegmentFile, D: Send + Sync + 'static> Segmented for FileSet<F, D> {
    type Window = Window<F>;

    fn segments(&self) -> usize {
        self.files.len()
    }

    fn units(&self, segment: usize) -> u64 {
        self.files.get(segment).map_or(0, |f| f.units())
    }

    fn window(&self, spec: WindowSpec) -> Window<F> {
        // Only windows inside a file are asked for; `placed` clamps anything else.
        let file = &self.files[spec.segment.min(self.files.len() - 1)];
        Window::placed(file.clone(), spec)
    }

    fn unit_name(&self) -> &'static str {
        self.files[0].unit_name()
    }

    fn segment_path(&self, segment: usize) -> Option<&Path> {
        self.files.get(segment).map(|f| f.path())
    }

    /// The files' formats ([`SegmentFile::fingerprint_format`]: `"u16"`, `"u32"`,
    /// `"raw-u16"`, `"records"`, ...; the distinct ones sorted and joined by `+` when the
    /// set mixes them, as `"u16+u32"`) with the record size, then each file's name, its
    /// size in bytes and its content fingerprint.
    fn fingerprint(&self) -> Fingerprint {
        let mut formats: Vec<&str> = self
            .files
            .iter()
            .map(|f| f.fingerprint_format().0)
            .collect();
        formats.sort_unstable();
        formats.dedup();
        let record_bytes = self.files[0].fingerprint_format().1;
        let mut print = Fingerprint::new(formats.join("+"), record_bytes);
        for f in &self.files {
            print.push_file_with_content(f.path(), f.file_bytes(), f.content());
        }
        print
    }
}

/// Opens `path` as a file of a set: a regular file with at least one byte, whose size fits
/// this process's address space. Anything else is the [`SourceError::File`] naming it
/// ([`FileProblem::Empty`], [`FileProblem::TooLarge`], or why it did not open).
pub(crate) fn open_set_file(path: &Path) -> Result<SourceFile, SourceError> {
    let file = SourceFile::open(path).map_err(|p| SourceError::file(path, p))?;
    let len = file.len();
    if len == 0 {
        return Err(SourceError::file(path, FileProblem::Empty));
    }
    if usize::try_from(len).is_err() {
        return Err(SourceError::file(path, FileProblem::TooLarge { len }));
    }
    Ok(file)
}
