//! One row of a batch's description: where a sample (or a packed document) came from.
//! What [`Decode::describe`](crate::Decode::describe) writes and a
//! [`Batch`](crate::Batch) reads back (`src/describe.rs`, `src/slot/info.rs`).

/// Field extents a batch can carry ([`Describe::dims`](crate::Describe::dims)).
pub const MAX_DIMS: usize = 4;

/// One row of a batch: a sample (a window, a record), or one packed document of a step.
/// What a [`Batch`](crate::Batch) says of it: [`sample_ids`](crate::Batch::sample_ids),
/// [`row_lens`](crate::Batch::row_lens), [`row_sources`](crate::Batch::row_sources).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Row {
    /// Its stable id in its source's fixed enumeration (a window's grid index, a
    /// document's first token's offset...).
    pub id: u64,
    /// Its length in its source's units, where that says something (a packed document's
    /// tokens in the batch); 0 otherwise.
    pub len: u32,
    /// The index of the source it came from, in a mixture of sources; 0 otherwise.
    pub source: u16,
}

impl Row {
    /// A row with this id (length and source 0).
    pub const fn id(id: u64) -> Self {
        Row {
            id,
            len: 0,
            source: 0,
        }
    }
}
