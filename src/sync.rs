//! The one place that names std's atomics, cells and threads.
//!
//! Everything the slot protocol synchronises through comes from here, so that a build with
//! `RUSTFLAGS="--cfg pinring_loom"` swaps in loom's model-checked versions and the same
//! protocol code runs under the model checker. Under that cfg a small SPSC ring built on
//! these atomics stands in for rtrb, whose std atomics loom cannot see.

#[cfg(not(pinring_loom))]
mod imp {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use std::sync::{Arc, Mutex};
    pub(crate) use std::thread::{
        current, park, park_timeout, yield_now, Builder, JoinHandle, Thread,
    };

    /// A hint inside a spin loop (loom yields here instead).
    #[inline]
    pub(crate) fn spin_loop() {
        std::hint::spin_loop();
    }

    /// `UnsafeCell` with loom's closure-based access, so that loom can track each access.
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
        pub(crate) struct Producer<T>(rtrb::Producer<T>);
        /// Receiving half (the consumer's).
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
}

#[cfg(pinring_loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
    pub(crate) use loom::sync::Mutex;
    pub(crate) use loom::thread::{yield_now, Builder, JoinHandle};
    // std's `Arc`, not loom's: when loom reports a deadlock it unwinds the blocked threads,
    // and dropping a loom `Arc` there panics again and aborts the whole test binary. The
    // protocol never relies on an `Arc`'s drop for ordering.
    pub(crate) use std::sync::Arc;

    /// A thread handle with std's `unpark`: it wakes the thread if it is parked, and
    /// otherwise leaves a token for its next `park`. (loom's own `unpark` also makes a
    /// thread that is blocked in a mutex, condvar or join runnable, which std's never does;
    /// a stale wake-up from a [`ParkSlot`](crate::park::ParkSlot) would then break loom's
    /// bookkeeping.) The flags are std atomics, outside the model: they change only between
    /// two loom operations of the same thread, where loom never switches threads.
    #[derive(Clone, Debug)]
    pub(crate) struct Thread {
        handle: loom::thread::Thread,
        state: std::sync::Arc<ParkState>,
    }

    #[derive(Debug, Default)]
    struct ParkState {
        /// The thread is blocked in loom's `park` (set just before it, cleared after).
        parked: std::sync::atomic::AtomicBool,
        /// An unpark came while the thread was not parked.
        token: std::sync::atomic::AtomicBool,
    }

    impl Thread {
        pub(crate) fn id(&self) -> loom::thread::ThreadId {
            self.handle.id()
        }

        pub(crate) fn unpark(&self) {
            use std::sync::atomic::Ordering::Relaxed;
            if self.state.parked.load(Relaxed) {
                // Happens-before the park's return, as std's unpark.
                self.handle.unpark();
            } else {
                self.state.token.store(true, Relaxed);
            }
        }
    }

    loom::thread_local! {
        static CURRENT: Thread = Thread {
            handle: loom::thread::current(),
            state: Default::default(),
        };
    }

    /// The calling thread's handle.
    pub(crate) fn current() -> Thread {
        CURRENT.with(Thread::clone)
    }

    /// Takes the calling thread's token, or blocks until it is unparked.
    pub(crate) fn park() {
        use std::sync::atomic::Ordering::Relaxed;
        let state = CURRENT.with(|t| t.state.clone());
        if state.token.swap(false, Relaxed) {
            return;
        }
        state.parked.store(true, Relaxed);
        loom::thread::park();
        state.parked.store(false, Relaxed);
    }

    /// loom has no timed park: a timed park is a park that may also wake spuriously.
    pub(crate) fn park_timeout(_: std::time::Duration) {
        loom::thread::yield_now();
    }

    /// In a model, a spin is a yield, so that loom can schedule the thread being waited on.
    #[inline]
    pub(crate) fn spin_loop() {
        loom::thread::yield_now();
    }

    /// A small bounded SPSC ring on the shim's atomics: loom cannot see rtrb's std atomics.
    pub(crate) mod spsc {
        use super::{Arc, AtomicUsize, Ordering, UnsafeCell};

        struct Ring<T> {
            slots: Box<[UnsafeCell<Option<T>>]>,
            /// Next index to pop; written by the consumer (Release), read by the producer (Acquire).
            head: AtomicUsize,
            /// Next index to push; written by the producer (Release), read by the consumer (Acquire).
            tail: AtomicUsize,
        }

        // SAFETY: a slot is touched only by the side that the head/tail indices give it to
        // (producer for [tail, head + cap), consumer for [head, tail)), with Release/Acquire
        // on the indices ordering the handover; `T: Send` moves values across threads.
        unsafe impl<T: Send> Sync for Ring<T> {}
        // SAFETY: as above; the ring owns its values.
        unsafe impl<T: Send> Send for Ring<T> {}

        /// Sending half.
        pub(crate) struct Producer<T>(Arc<Ring<T>>);
        /// Receiving half.
        pub(crate) struct Consumer<T>(Arc<Ring<T>>);

        /// A ring holding up to `capacity` items.
        pub(crate) fn channel<T>(capacity: usize) -> (Producer<T>, Consumer<T>) {
            let ring = Arc::new(Ring {
                slots: (0..capacity).map(|_| UnsafeCell::new(None)).collect(),
                head: AtomicUsize::new(0),
                tail: AtomicUsize::new(0),
            });
            (Producer(ring.clone()), Consumer(ring))
        }

        impl<T> Producer<T> {
            /// Appends `value`, or hands it back when the ring is full.
            pub(crate) fn push(&mut self, value: T) -> Result<(), T> {
                let ring = &*self.0;
                let tail = ring.tail.load(Ordering::Relaxed);
                // Acquire pairs with the consumer's Release store of `head`: the slot's old
                // value was taken before we overwrite it.
                let head = ring.head.load(Ordering::Acquire);
                if tail - head == ring.slots.len() {
                    return Err(value);
                }
                ring.slots[tail % ring.slots.len()].with_mut(|p| {
                    // SAFETY: slot `tail` is the producer's until `tail` is published below.
                    unsafe { *p = Some(value) }
                });
                // Release pairs with the consumer's Acquire load of `tail`.
                ring.tail.store(tail + 1, Ordering::Release);
                Ok(())
            }
        }

        impl<T> Consumer<T> {
            /// Takes the oldest item, if any.
            pub(crate) fn pop(&mut self) -> Option<T> {
                let ring = &*self.0;
                let head = ring.head.load(Ordering::Relaxed);
                // Acquire pairs with the producer's Release store of `tail`.
                let tail = ring.tail.load(Ordering::Acquire);
                if head == tail {
                    return None;
                }
                let value = ring.slots[head % ring.slots.len()].with_mut(|p| {
                    // SAFETY: slot `head` is the consumer's until `head` is published below.
                    unsafe { (*p).take() }
                });
                // Release pairs with the producer's Acquire load of `head`.
                ring.head.store(head + 1, Ordering::Release);
                value
            }
        }
    }
}

pub(crate) use imp::*;

/// std's primitives, never switched to loom: for the cpu backend's emulated device
/// (stream threads, event epochs), which the models replace with their own device model.
pub(crate) mod native {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
    pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
    pub(crate) use std::thread::{sleep, Builder};
}
