//! A batch's field as plain numbers: its elements widened to `i64`, whatever its token
//! type. Shared with the tests of mixtures of documents.

use pinring::{Batch, Dtype};

/// The element values of field `name` of `batch`, widened to `i64`.
pub fn values(batch: &Batch, name: &str) -> Vec<i64> {
    let at = batch
        .field(name)
        .unwrap_or_else(|| panic!("no field {name}"));
    let bytes = batch.field_bytes(name).unwrap();
    assert_eq!(bytes.len(), at.len * at.dtype.size());
    match at.dtype {
        Dtype::U16 => bytes
            .chunks_exact(2)
            .map(|c| i64::from(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
        Dtype::I32 => bytes
            .chunks_exact(4)
            .map(|c| i64::from(i32::from_le_bytes(c.try_into().unwrap())))
            .collect(),
        Dtype::I64 => bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
            .collect(),
        other => panic!("unexpected dtype {other}"),
    }
}
