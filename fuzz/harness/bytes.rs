//! A byte reader that never runs out: past the end it yields zeros.
//!
//! Shared by the fuzz targets and the proptest suites (included with `#[path]`), so that
//! a fuzz input and a proptest case mean the same thing.

/// Reads values from fuzz bytes; an exhausted reader yields zeros.
pub struct Bytes<'a> {
    data: &'a [u8],
}

#[allow(dead_code)]
impl<'a> Bytes<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data }
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// The next byte, 0 once exhausted.
    pub fn u8(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    /// The next `n` bytes as a little-endian integer (`n <= 8`).
    pub fn le(&mut self, n: usize) -> u64 {
        (0..n).fold(0u64, |acc, i| acc | (u64::from(self.u8()) << (8 * i)))
    }

    /// A `usize` drawn to hit edges often: zero, small values, powers of two and their
    /// neighbours, values next to `usize::MAX`, and raw 64-bit values.
    pub fn size(&mut self) -> usize {
        let tag = self.u8();
        match tag % 8 {
            0 => 0,
            1 | 2 => usize::from(self.u8() % 17),
            3 => {
                let shift = u32::from(self.u8()) % usize::BITS;
                let base = 1usize << shift;
                match self.u8() % 3 {
                    0 => base,
                    1 => base.wrapping_sub(1),
                    _ => base.wrapping_add(1),
                }
            }
            4 => usize::MAX - usize::from(self.u8() % 4),
            5 => self.le(2) as usize,
            6 => self.le(4) as usize,
            _ => self.le(8) as usize,
        }
    }

    /// `Some(self.size())` or `None`, one byte deciding.
    pub fn opt_size(&mut self) -> Option<usize> {
        if self.u8() & 1 == 1 {
            Some(self.size())
        } else {
            None
        }
    }
}
