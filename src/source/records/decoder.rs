//! [`RecordBytes`]: the decoder of fixed-size records.

use super::file::RecordFile;
use crate::decode::Decode;
use crate::error::DecodeError;
use crate::source::sampling::window::Window;
use crate::source::sampling::window_sample::window_sample;

/// Reads a window of records (a `Window<RecordFile>`) into the sample unchanged; the
/// sample size must be the window's byte size (`record_bytes` times records per window).
/// A file that changed under the loader is the read's
/// [`SourceError`](crate::source::SourceError), which the pipeline reports from `pop`.
///
/// ```
/// use pinring::source::{FixedRecords, RecordBytes, Sampler};
/// use pinring::Decode;
///
/// # let path = std::env::temp_dir().join(format!("pinring-recbytes-doc-{}.bin", std::process::id()));
/// std::fs::write(&path, b"abcdefgh").unwrap();
/// let sampler = Sampler::builder(FixedRecords::open([&path], 4)?).build()?;
/// let mut out = [0u8; 4];
/// RecordBytes.decode(sampler.epoch(0).nth(1).unwrap(), &mut out)?;
/// assert_eq!(&out, b"efgh");
/// # std::fs::remove_file(&path).unwrap();
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecordBytes;

impl Decode for RecordBytes {
    window_sample!(RecordFile);

    fn decode(&self, window: Window<RecordFile>, out: &mut [u8]) -> Result<(), DecodeError> {
        let need = window.byte_len();
        if out.len() != need {
            return Err(DecodeError::new(format!(
                "sample slot is {} bytes, but {} record(s) of {} bytes need {need}: set \
                 bytes_per_sample with the record size times records per window",
                out.len(),
                window.len(),
                window.file().record_bytes(),
            )));
        }
        window.read_into(out)?;
        Ok(())
    }
}
