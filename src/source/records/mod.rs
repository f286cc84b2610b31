//! Files of fixed-size records: one file, the set of files, what a window of one reads,
//! and the decoder that copies records into a batch.

mod decoder;
mod file;
mod fixed_records;
mod window;

pub use decoder::RecordBytes;
pub use file::RecordFile;
pub use fixed_records::FixedRecords;
