//! The element type of a batch and the shape of one sample (a row).

/// The element type of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dtype {
    /// `uint8` (record bytes).
    Uint8,
    /// `uint16` (tokens as stored in llm.c's GPT-2 shards).
    Uint16,
    /// `int32` (tokens widened).
    Int32,
    /// `int64` (tokens widened).
    Int64,
}

impl Dtype {
    /// The name numpy and torch use.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Dtype::Uint8 => "uint8",
            Dtype::Uint16 => "uint16",
            Dtype::Int32 => "int32",
            Dtype::Int64 => "int64",
        }
    }

    /// Bytes per element.
    pub(crate) fn itemsize(self) -> usize {
        match self {
            Dtype::Uint8 => 1,
            Dtype::Uint16 => 2,
            Dtype::Int32 => 4,
            Dtype::Int64 => 8,
        }
    }

    /// The DLPack type.
    pub(crate) fn dlpack(self) -> dlpark::ffi::DLDataType {
        use dlpark::ffi::DLDataType;
        match self {
            Dtype::Uint8 => DLDataType::U8,
            Dtype::Uint16 => DLDataType::U16,
            Dtype::Int32 => DLDataType::I32,
            Dtype::Int64 => DLDataType::I64,
        }
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
        self.cols * self.dtype.itemsize()
    }
}
