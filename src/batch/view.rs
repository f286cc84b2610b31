//! Typed views of a batch's bytes: [`Element`], the integer types a slot holds (each
//! with its [`Dtype`]); why a view was refused is [`ViewError`] (`src/error/view.rs`). The views themselves
//! are the cpu backend's ([`Batch<Cpu>::field_as`](crate::Batch::field_as),
//! [`Batch<Cpu>::bytes_as`](crate::Batch::bytes_as)): one borrow of the slot, no copy.

use crate::error::view::ViewError;
use crate::fields::Dtype;

mod sealed {
    pub trait Sealed {}
}

/// An element type a batch's bytes may be viewed as: `u8`, `u16`, `i32`, `u32`, `i64`,
/// each of them plain old data (every bit pattern a value, no padding) whose [`Dtype`]
/// is [`DTYPE`](Self::DTYPE). Sealed: those five only.
pub trait Element: sealed::Sealed + Copy + 'static {
    /// The field dtype of this element type.
    const DTYPE: Dtype;
}

macro_rules! elements {
    ($($t:ty => $d:ident),*) => {
        $(
            impl sealed::Sealed for $t {}
            impl Element for $t {
                const DTYPE: Dtype = Dtype::$d;
            }
        )*
    };
}

elements!(u8 => U8, u16 => U16, i32 => I32, u32 => U32, i64 => I64);

/// `bytes` as `&[T]`, when they are whole, aligned elements of `T`.
pub(crate) fn view_as<T: Element>(bytes: &[u8]) -> Result<&[T], ViewError> {
    // SAFETY: `T` is one of the sealed integer types (plain old data: every bit pattern is
    // a value and it has no padding), so any aligned, whole run of bytes is valid `T`s.
    let (head, body, tail) = unsafe { bytes.align_to::<T>() };
    if head.is_empty() && tail.is_empty() {
        Ok(body)
    } else {
        Err(ViewError::Misfit {
            len: bytes.len(),
            addr: bytes.as_ptr() as usize,
            asked: T::DTYPE,
            align: std::mem::align_of::<T>(),
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::batch::view::view_as;
    use crate::error::view::ViewError;

    #[test]
    fn views_whole_aligned_elements_only() {
        let words = [1u64, 2, 3];
        // SAFETY: u64s are 24 initialized bytes.
        let bytes = unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), 24) };
        assert_eq!(view_as::<i64>(bytes).unwrap(), [1, 2, 3]);
        assert_eq!(view_as::<u32>(bytes).unwrap()[..3], [1, 0, 2]);
        assert!(matches!(
            view_as::<i32>(&bytes[..6]),
            Err(ViewError::Misfit { len: 6, .. })
        ));
        assert!(matches!(
            view_as::<u16>(&bytes[1..5]),
            Err(ViewError::Misfit { align: 2, .. })
        ));
        assert_eq!(view_as::<u8>(&bytes[1..4]).unwrap(), [0, 0, 0]);
    }
}
