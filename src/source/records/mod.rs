//! Files of fixed-size records: one file, the set of files, and the decoder that copies
//! records into a batch (a window's reads are every file format's: `sampling/window.rs`).
//!
//! - `file.rs`: one file (`RecordFile`), checked when opened, read by position;
//! - `fixed_records.rs`: the set (`FixedRecords`), a `FileSet` and its `WindowFormat`,
//!   which a `Loader` also takes as one record a sample;
//! - `decoder.rs`: `RecordBytes`, which copies records as they are.

mod decoder;
mod file;
mod fixed_records;

pub use decoder::RecordBytes;
pub use file::RecordFile;
pub use fixed_records::FixedRecords;
