//! The ready-token ring in models: a small bounded SPSC ring on the shim's atomics,
//! standing in for rtrb, whose std atomics loom cannot see.

use super::mocked::{Arc, AtomicUsize, Ordering, UnsafeCell};

struct Ring<T> {
    slots: Box<[UnsafeCell<Option<T>>]>,
    /// Next index to pop; written by the consumer (Release), read by the producer (Acquire).
    head: AtomicUsize,
    /// Next index to push; written by the producer (Release), read by the consumer (Acquire).
    tail: AtomicUsize,
}

// SAFETY: a slot is touched only by the side that the head/tail indices give it to
// (producer for [tail, head + cap), consumer for [head, tail)), with Release/Acquire on
// the indices ordering the handover; `T: Send` moves values across threads.
unsafe impl<T: Send> Sync for Ring<T> {}
// SAFETY: as above; the ring owns its values.
unsafe impl<T: Send> Send for Ring<T> {}

/// Sending half.
pub(crate) struct Producer<T>(Arc<Ring<T>>);
/// Receiving half.
pub(crate) struct Consumer<T>(Arc<Ring<T>>);

impl<T> std::fmt::Debug for Producer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spsc::Producer")
    }
}

impl<T> std::fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("spsc::Consumer")
    }
}

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
        // Acquire pairs with the consumer's Release store of `head`: the slot's old value
        // was taken before it is overwritten.
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
