//! Files of fixed-size records: one file, the set of files, and the decoder that copies
//! records into a batch (a window's reads are every file format's: `sampling/window.rs`).

mod decoder;
mod file;
mod fixed_records;

pub use decoder::RecordBytes;
pub use file::RecordFile;
pub use fixed_records::FixedRecords;
