//! The element types a batch (or a field of one) is exported as, and the shape of one
//! sample (a row). The types are the core's [`pinring::Dtype`]: one list for the layout a
//! source writes and the DLPack type a consumer reads.

use dlpark::ffi::DLDataType;
use pinring::Dtype;

/// The DLPack type of `dtype`.
pub(crate) fn dlpack(dtype: Dtype) -> DLDataType {
    match dtype {
        Dtype::U8 => DLDataType::U8,
        Dtype::U16 => DLDataType::U16,
        Dtype::I32 => DLDataType::I32,
        Dtype::U32 => DLDataType::U32,
        Dtype::I64 => DLDataType::I64,
    }
}

/// Shape and type of one sample: a row of `cols` elements of `dtype`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Row {
    /// Elements per sample.
    pub(crate) cols: usize,
    /// Element type.
    pub(crate) dtype: Dtype,
}

impl Row {
    /// Bytes per sample.
    pub(crate) fn bytes(self) -> usize {
        self.cols * self.dtype.size()
    }
}
