//! std's primitives, as the protocol code uses them (the build without `pinring_loom`).

pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
pub(crate) use std::sync::{Arc, Mutex, MutexGuard};
pub(crate) use std::thread::{current, park, park_timeout, Thread};
pub(crate) use std::time::Instant;

/// A hint inside a spin loop (a model yields here instead).
#[inline]
pub(crate) fn spin_loop() {
    std::hint::spin_loop();
}

/// `UnsafeCell` with loom's closure-based access, so that a model can track each access.
#[derive(Debug)]
pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

impl<T> UnsafeCell<T> {
    pub(crate) const fn new(value: T) -> Self {
        UnsafeCell(std::cell::UnsafeCell::new(value))
    }

    /// Reads through a shared pointer; the caller's protocol state must forbid writers now.
    #[inline]
    pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
        f(self.0.get())
    }

    /// Writes through a unique pointer; the caller's protocol state must make it the only
    /// accessor now.
    #[inline]
    pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
        f(self.0.get())
    }
}

/// The ready-token ring: rtrb's wait-free SPSC queue.
pub(crate) mod spsc {
    /// Sending half (the copy thread's).
    #[derive(Debug)]
    pub(crate) struct Producer<T>(rtrb::Producer<T>);
    /// Receiving half (the consumer's).
    #[derive(Debug)]
    pub(crate) struct Consumer<T>(rtrb::Consumer<T>);

    /// A ring holding up to `capacity` items.
    pub(crate) fn channel<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
        let (p, c) = rtrb::RingBuffer::new(capacity);
        (Producer(p), Consumer(c))
    }

    impl<T> Producer<T> {
        /// Appends `value`, or hands it back when the ring is full.
        #[inline]
        pub(crate) fn push(&mut self, value: T) -> Result<(), T> {
            self.0.push(value).map_err(|rtrb::PushError::Full(v)| v)
        }
    }

    impl<T> Consumer<T> {
        /// Takes the oldest item, if any.
        #[inline]
        pub(crate) fn pop(&mut self) -> Option<T> {
            self.0.pop().ok()
        }
    }
}
