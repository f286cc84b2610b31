//! Files of fixed-size records: one file, the set of files, what a window of one reads,
//! and the decoder that copies records into a batch.
//!
//! - `file.rs`: one file (`RecordFile`), checked when opened, read by position;
//! - `fixed_records.rs`: the set (`FixedRecords`), a `Segmented` source and its
//!   `WindowFormat`, which a `Loader` also takes as one record a sample;
//! - `window.rs`: what a window of a record file reads (`Window<RecordFile>`'s methods);
//! - `decoder.rs`: `RecordBytes`, which copies records as they are.

mod decoder;
mod file;
mod fixed_records;
mod window;

pub use decoder::RecordBytes;
pub use file::RecordFile;
pub use fixed_records::FixedRecords;
