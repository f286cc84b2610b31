//! What a window of a record file reads: `Window<RecordFile>`'s own methods.

use super::file::RecordFile;
use crate::error::source::SourceError;
use crate::source::sampling::window::Window;

/// A run of consecutive records, the sample the sampler yields for
/// [`FixedRecords`](crate::source::FixedRecords) (one record with the default window of
/// 1): [`start`](Window::start) and [`len`](Window::len) count records.
/// [`RecordBytes`](crate::source::RecordBytes) reads it straight into the batch.
///
/// ```
/// use std::sync::Arc;
/// use pinring::source::{RecordFile, Window};
/// # let path = std::env::temp_dir().join(format!("pinring-recwindow-doc-{}.bin", std::process::id()));
/// std::fs::write(&path, b"abcdef").unwrap();
/// let w = Window::new(Arc::new(RecordFile::open(&path, 2)?), 1, 1).unwrap();
/// let w = w.with_id(1).with_epoch(4);
/// assert_eq!((w.id(), w.epoch(), w.read_bytes()?), (1, 4, b"cd".to_vec()));
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
impl Window<RecordFile> {
    /// Bytes the window's records take: `len × record_bytes`.
    pub fn byte_len(&self) -> usize {
        self.len() * self.file().record_bytes()
    }

    /// Reads the records' bytes into the start of `out`: all of them, or the first
    /// `out.len()` bytes when `out` is shorter. Returns the bytes read. A file that changed
    /// since it was opened is [`SourceError::Read`].
    pub fn read_into(&self, out: &mut [u8]) -> Result<usize, SourceError> {
        let n = self.byte_len().min(out.len());
        self.file().read_records(self.start(), &mut out[..n])?;
        Ok(n)
    }

    /// The records' bytes, read into a new vector.
    pub fn read_bytes(&self) -> Result<Vec<u8>, SourceError> {
        let mut bytes = vec![0; self.byte_len()];
        self.read_into(&mut bytes)?;
        Ok(bytes)
    }
}
