//! [`ViewError`]: why a typed view of a batch's bytes was refused (the views are
//! `src/batch/view.rs`'s).

use crate::fields::Dtype;

/// Why a typed view of a batch was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The batch has no field of this name (or no fields at all).
    #[error("the batch has no field {name:?}")]
    NoField {
        /// The name asked for.
        name: String,
    },
    /// The field's elements are of another type.
    #[error("field {name:?} holds {held}, not {asked}")]
    Dtype {
        /// The field.
        name: String,
        /// Its element type.
        held: Dtype,
        /// The type asked for.
        asked: Dtype,
    },
    /// The bytes are not a whole number of elements of the type asked for, or do not start
    /// at a multiple of its alignment (a batch's slot is aligned; a view of its bytes as a
    /// type wider than its samples' may not fit).
    #[error("{len} bytes at {addr:#x} are not whole {asked} elements aligned to {align}")]
    Misfit {
        /// Bytes viewed.
        len: usize,
        /// Their address.
        addr: usize,
        /// The type asked for.
        asked: Dtype,
        /// Its alignment.
        align: usize,
    },
}
