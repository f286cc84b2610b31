//! What a cpu-backend release captures, and what a bound batch remembers (internal: the
//! types are unreachable from outside).

use super::event::Mark;
use super::stream::CpuStream;
use crate::backend::bound::MAX_BOUND_STREAMS;

/// Marks a fence holds inline: the fence's own and one per bound stream.
const INLINE_MARKS: usize = 1 + MAX_BOUND_STREAMS;

/// A release fence as the cpu backend captured it: the records the slot's next copy waits
/// for. An exact fence keeps its marks inline (no allocation); only the conservative one
/// (a marker on every user stream) needs the heap.
#[derive(Debug)]
pub struct CpuFence {
    inline: [Option<Mark>; INLINE_MARKS],
    /// Past the inline marks (the conservative fence's).
    more: Vec<Mark>,
}

impl CpuFence {
    /// Nothing to wait for (`Fence::Sync`).
    pub(crate) fn nothing() -> Self {
        CpuFence {
            inline: std::array::from_fn(|_| None),
            more: Vec::new(),
        }
    }

    /// Adds a record to wait for.
    pub(crate) fn push(&mut self, mark: Mark) {
        match self.inline.iter_mut().find(|m| m.is_none()) {
            Some(free) => *free = Some(mark),
            None => self.more.push(mark),
        }
    }

    /// Whether there is nothing to wait for.
    pub(crate) fn is_empty(&self) -> bool {
        self.inline[0].is_none()
    }

    /// The records to wait for.
    pub(crate) fn into_marks(self) -> impl Iterator<Item = Mark> {
        self.inline.into_iter().flatten().chain(self.more)
    }
}

/// What a batch bound with `wait_on` remembers of one stream: the stream (equal when it
/// is the same stream, whichever handle named it).
#[derive(Debug)]
pub struct CpuBinding(pub(crate) CpuStream);

impl PartialEq for CpuBinding {
    fn eq(&self, other: &Self) -> bool {
        self.0.same_stream(&other.0)
    }
}
