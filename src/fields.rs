//! Multi-field slots: several named arrays in one batch's slot, copied together.
//!
//! A batch of packed documents carries `tokens` (with `inputs` and `targets` as views of
//! it), `cu_seqlens` and `positions`: one slot holds them all, so they ride one copy, one
//! READY point and one release fence. The layout is fixed for the run and sized for the
//! largest batch; each batch says its own extents ([`Describe::dims`](crate::Describe::dims))
//! and each field's length is one of them.
//!
//! ```
//! use pinring::{Dtype, Fields};
//!
//! // Up to 1025 tokens (dims[0] of each batch says how many), and a view one shorter.
//! let fields = Fields::new()
//!     .array("tokens", Dtype::I32, 1025, 0)
//!     .view("inputs", "tokens", 0, 1)
//!     .view("targets", "tokens", 1, 1)
//!     .array("cu_seqlens", Dtype::I32, 128, 1);
//! let targets = fields.get("targets").unwrap();
//! assert_eq!((targets.offset, targets.len(&[9, 128])), (4, 8));
//! assert_eq!(fields.get("inputs").unwrap().max_len, 1024); // one shorter than tokens
//! assert_eq!(fields.get("cu_seqlens").unwrap().offset, 4352); // 4100 rounded up to 256
//! assert_eq!(fields.bytes(), 4352 + 512);
//! ```

use std::fmt;

use crate::row::MAX_DIMS;

/// Where a field starts: a multiple of this many bytes from the slot's start (a CUDA
/// kernel's widest loads, and the cache line, never straddle two fields).
pub const FIELD_ALIGN: usize = 256;

/// The element type of a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// `u8`.
    U8,
    /// `u16`.
    U16,
    /// `i32`.
    I32,
    /// `u32`.
    U32,
    /// `i64`.
    I64,
}

impl Dtype {
    /// Bytes per element.
    pub const fn size(self) -> usize {
        match self {
            Dtype::U8 => 1,
            Dtype::U16 => 2,
            Dtype::I32 | Dtype::U32 => 4,
            Dtype::I64 => 8,
        }
    }

    /// Its name as numpy and torch spell it: `uint8`, `uint16`, `int32`, `uint32`,
    /// `int64`.
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::U8 => "uint8",
            Dtype::U16 => "uint16",
            Dtype::I32 => "int32",
            Dtype::U32 => "uint32",
            Dtype::I64 => "int64",
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One named 1-D array inside a batch's slot (or a view of another).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Field {
    /// Its name.
    pub name: String,
    /// Its element type.
    pub dtype: Dtype,
    /// Bytes from the slot's start to its first element.
    pub offset: usize,
    /// Which of a batch's dims ([`Describe::dims`](crate::Describe::dims)) gives its
    /// length.
    pub dim: usize,
    /// Elements fewer than that extent (1 for `inputs`, a view of `tokens` one shorter).
    pub less: u64,
    /// Elements it holds at most: what the slot is sized for.
    pub max_len: usize,
    /// The array it is a view of, if it is one.
    pub view_of: Option<String>,
}

impl Field {
    /// Its length in a batch whose dims are `dims`: `dims[dim] - less`, at most
    /// `max_len`.
    pub fn len(&self, dims: &[u64]) -> usize {
        let extent = dims.get(self.dim).copied().unwrap_or(0);
        usize::try_from(extent.saturating_sub(self.less))
            .unwrap_or(usize::MAX)
            .min(self.max_len)
    }

    /// Bytes it takes at most.
    pub fn max_bytes(&self) -> usize {
        self.max_len.saturating_mul(self.dtype.size())
    }
}

/// A batch's fields: a layout of named arrays in one slot, fixed for the run. Build it
/// with [`array`](Self::array) and [`view`](Self::view); give it to
/// [`ConfigBuilder::fields`](crate::ConfigBuilder::fields), which checks it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Fields {
    fields: Vec<Field>,
    /// Bytes the arrays take, from the slot's start.
    bytes: usize,
    /// The first problem found while building, if any (reported by the config's build).
    problem: Option<String>,
}

impl Fields {
    /// No fields.
    pub fn new() -> Self {
        Fields::default()
    }

    /// Adds an array of up to `max_len` elements of `dtype`, whose length in a batch is
    /// that batch's `dims[dim]`. It starts at the next multiple of [`FIELD_ALIGN`] after
    /// the arrays before it.
    pub fn array(mut self, name: &str, dtype: Dtype, max_len: usize, dim: usize) -> Self {
        let offset = self.bytes.next_multiple_of(FIELD_ALIGN);
        let field = Field {
            name: name.to_owned(),
            dtype,
            offset,
            dim,
            less: 0,
            max_len,
            view_of: None,
        };
        match offset.checked_add(field.max_bytes()) {
            Some(end) if max_len.checked_mul(dtype.size()).is_some() => self.bytes = end,
            _ => self.note(format!(
                "field `{name}` of {max_len} {dtype} overflows usize"
            )),
        }
        self.push(field)
    }

    /// Adds a view of the array `of`: `skip` elements in, `less` elements shorter than it
    /// (`inputs` of `tokens` is `view("inputs", "tokens", 0, 1)`, `targets`
    /// `view("targets", "tokens", 1, 1)`).
    pub fn view(mut self, name: &str, of: &str, skip: usize, less: u64) -> Self {
        let Some(base) = self
            .fields
            .iter()
            .find(|f| f.name == of && f.view_of.is_none())
        else {
            self.note(format!(
                "field `{name}` is a view of `{of}`, which is no array here"
            ));
            return self;
        };
        let field = Field {
            name: name.to_owned(),
            dtype: base.dtype,
            offset: base.offset + skip.min(base.max_len) * base.dtype.size(),
            dim: base.dim,
            less: base.less + less,
            // At most what the array holds past `skip`, and `less` fewer than the array's
            // longest extent.
            max_len: base.max_len.saturating_sub(skip).min(
                base.max_len
                    .saturating_sub(usize::try_from(less).unwrap_or(usize::MAX)),
            ),
            view_of: Some(of.to_owned()),
        };
        if skip > base.max_len {
            self.note(format!(
                "field `{name}` skips {skip} elements of `{of}`, which holds {}",
                base.max_len
            ));
        }
        self.push(field)
    }

    fn push(mut self, field: Field) -> Self {
        if self.fields.iter().any(|f| f.name == field.name) {
            self.note(format!("two fields are named `{}`", field.name));
        } else if field.dim >= MAX_DIMS {
            self.note(format!(
                "field `{}` takes its length from dims[{}], past the {MAX_DIMS} a batch has",
                field.name, field.dim
            ));
        }
        self.fields.push(field);
        self
    }

    fn note(&mut self, problem: String) {
        self.problem.get_or_insert(problem);
    }

    /// The field named `name`.
    pub fn get(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Every field, in the order added.
    pub fn iter(&self) -> impl Iterator<Item = &Field> + '_ {
        self.fields.iter()
    }

    /// How many fields.
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// Bytes of slot the arrays take: the `bytes_per_sample` a layout needs.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// What is wrong with the layout, if anything: a name used twice, a view of no
    /// array, a dim past [`MAX_DIMS`], a size past `usize`.
    pub fn problem(&self) -> Option<&str> {
        self.problem.as_deref()
    }
}
