//! The streams a leased batch was bound to with [`Batch::wait_on`](crate::Batch::wait_on):
//! a fixed number kept inline (no allocation), each once; past that the batch remembers only
//! that it overflowed, and its release is fenced conservatively.

use std::fmt;

/// Most streams a batch remembers from `wait_on`. DLPack consumers declare one or two
/// (a compute stream, a side stream); a batch bound to more is fenced conservatively.
pub(crate) const MAX_BOUND_STREAMS: usize = 4;

/// The distinct bindings of one leased batch, in the order they were made.
pub struct BoundStreams<T> {
    /// The first `len` are `Some`.
    slots: [Option<T>; MAX_BOUND_STREAMS],
    len: usize,
    /// A binding beyond [`MAX_BOUND_STREAMS`] was asked for and not kept.
    overflowed: bool,
}

impl<T: PartialEq> BoundStreams<T> {
    /// No binding.
    pub(crate) fn new() -> Self {
        BoundStreams {
            slots: std::array::from_fn(|_| None),
            len: 0,
            overflowed: false,
        }
    }

    /// Keeps `binding` unless an equal one is kept already; past the capacity, marks the
    /// set overflowed instead (never allocates).
    pub(crate) fn bind(&mut self, binding: T) {
        if self.iter().any(|b| *b == binding) {
            return;
        }
        match self.slots.get_mut(self.len) {
            Some(slot) => {
                *slot = Some(binding);
                self.len += 1;
            }
            None => self.overflowed = true,
        }
    }
}

impl<T> BoundStreams<T> {
    /// The bindings kept, in the order they were made.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.slots[..self.len].iter().flatten()
    }

    /// How many bindings are kept.
    #[cfg(feature = "cuda")]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch was never bound.
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0 && !self.overflowed
    }

    /// Whether more streams were bound than kept: only a conservative fence covers them.
    pub fn overflowed(&self) -> bool {
        self.overflowed
    }
}

impl<T> fmt::Debug for BoundStreams<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BoundStreams")
            .field("len", &self.len)
            .field("overflowed", &self.overflowed)
            .finish()
    }
}

#[cfg(all(test, not(pinring_loom)))]
mod tests {
    use crate::backend::bound::{BoundStreams, MAX_BOUND_STREAMS};

    #[test]
    fn bindings_are_kept_once_in_order_and_overflow_without_allocating() {
        let mut bound = BoundStreams::new();
        assert!(bound.is_empty());
        bound.bind(7);
        bound.bind(7);
        bound.bind(3);
        assert_eq!(bound.iter().copied().collect::<Vec<_>>(), [7, 3]);
        for i in 0..MAX_BOUND_STREAMS as i32 {
            bound.bind(100 + i);
        }
        assert_eq!(bound.iter().count(), MAX_BOUND_STREAMS);
        assert!(bound.overflowed() && !bound.is_empty());
        assert_eq!(bound.iter().take(2).copied().collect::<Vec<_>>(), [7, 3]);
    }
}
