//! The ready ring: how the copy thread hands tokens to the consumer, in sequence order.
//!
//! A wait-free SPSC ring (rtrb; in models a stand-in on the sync shim's atomics) of
//! capacity D + 1: at most one batch token per device slot (a slot is pushed only once the
//! consumer released its previous batch) plus the one terminal token, so the copy thread's
//! push never finds it full.

use crate::sync::spsc;

/// What the copy thread hands the consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Token {
    /// Batch `seq` is in device slot `slot` (its READY point recorded), with `samples`
    /// samples.
    Batch {
        seq: u64,
        slot: usize,
        samples: usize,
    },
    /// The source ended; no batch follows.
    End,
    /// Building or copying the next batch failed; the error is recorded in the pipeline's
    /// control state.
    Failed,
}

/// The copy thread's end.
pub(crate) type Sender = spsc::Producer<Token>;
/// The consumer's end.
pub(crate) type Receiver = spsc::Consumer<Token>;

/// Bytes the ready ring of a pipeline with `device_slots` device slots takes.
pub(crate) fn ready_ring_bytes(device_slots: usize) -> Option<usize> {
    device_slots
        .checked_add(1)?
        .checked_mul(std::mem::size_of::<Token>())
}

/// A ready ring for `device_slots` device slots.
pub(crate) fn ready_ring(device_slots: usize) -> (Sender, Receiver) {
    spsc::channel(device_slots + 1)
}
