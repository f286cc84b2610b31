//! Slot stamps: each slot's sequence number and state in one atomic word.
//!
//! Every transition is one owner handing the slot to the next: the owner writes the
//! slot's cells, then publishes the new stamp with a Release store; the next owner
//! Acquire-loads the stamp before it touches the cells. See `ARCHITECTURE.md`.
//!
//! Host slot `h` serves batches `h, h + H, h + 2H, ...`:
//! `FREE(k) → FILLING(k) → DECODING(k) → FILLED(k) → IN_FLIGHT(k) → FREE(k + H)`,
//! or `FREE(k) → END(k)` (the source ended before batch `k`) or `→ FAILED(k)`.
//!
//! Device slot `d` serves batches `d, d + D, ...`:
//! `FREE(d) → COPYING(k) → LEASED(k) → RELEASED(k) → COPYING(k + D) → ...`.

use crate::sync::{AtomicU64, Ordering, UnsafeCell};

const STATE_BITS: u32 = 4;
const STATE_MASK: u64 = (1 << STATE_BITS) - 1;

/// States of a host slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum HostState {
    /// Waiting for the feeder to gather batch `seq`.
    Free = 0,
    /// The feeder is pulling batch `seq`'s samples from the source.
    Filling = 1,
    /// The decode workers are writing batch `seq` into the slot.
    Decoding = 2,
    /// Batch `seq` is decoded; waiting for the copy thread.
    Filled = 3,
    /// The H2D of batch `seq` out of this slot may be running.
    InFlight = 4,
    /// The source ended: there is no batch `seq`.
    End = 5,
    /// Building batch `seq` failed; the pipeline stops there.
    Failed = 6,
}

/// States of a device slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum DeviceState {
    /// Never used yet; takes batch `seq` (its own index) first.
    Free = 0,
    /// The copy thread is enqueueing batch `seq`'s H2D.
    Copying = 1,
    /// Batch `seq` is handed out (or in the ready ring); its release fence is not yet set.
    Leased = 2,
    /// Batch `seq` was released; its fence is in the slot's fence cell.
    Released = 3,
}

impl HostState {
    fn from_bits(bits: u64) -> Self {
        match bits {
            0 => HostState::Free,
            1 => HostState::Filling,
            2 => HostState::Decoding,
            3 => HostState::Filled,
            4 => HostState::InFlight,
            5 => HostState::End,
            _ => HostState::Failed,
        }
    }
}

impl DeviceState {
    fn from_bits(bits: u64) -> Self {
        match bits {
            0 => DeviceState::Free,
            1 => DeviceState::Copying,
            2 => DeviceState::Leased,
            _ => DeviceState::Released,
        }
    }
}

/// One slot's stamp: `seq << 4 | state`.
#[derive(Debug)]
pub(crate) struct Stamp {
    /// Range: any `seq < 2^60` with a state of the slot's kind. Stored with Release by the
    /// slot's current owner when it hands the slot on; loaded with Acquire by the next
    /// owner before it touches the slot's cells or bytes (see the module docs).
    word: AtomicU64,
}

impl Stamp {
    pub(crate) fn new(seq: u64, state: u8) -> Self {
        Stamp {
            word: AtomicU64::new(pack(seq, state)),
        }
    }

    /// The stamp, with Acquire: pairs with the Release in [`publish`](Self::publish).
    #[inline]
    pub(crate) fn load(&self) -> (u64, u8) {
        unpack(self.word.load(Ordering::Acquire))
    }

    /// Hands the slot on: every write before this is visible to whoever Acquire-loads it.
    #[inline]
    pub(crate) fn publish(&self, seq: u64, state: u8) {
        self.word.store(pack(seq, state), Ordering::Release);
    }

    /// Whether the stamp is exactly `(seq, state)` (Acquire).
    #[inline]
    pub(crate) fn is(&self, seq: u64, state: u8) -> bool {
        self.load() == (seq, state)
    }
}

#[inline]
fn pack(seq: u64, state: u8) -> u64 {
    debug_assert!(seq < (1 << (64 - STATE_BITS)));
    (seq << STATE_BITS) | u64::from(state)
}

#[inline]
fn unpack(word: u64) -> (u64, u8) {
    (word >> STATE_BITS, (word & STATE_MASK) as u8)
}

/// A host slot's protocol state (its bytes live in the [`HostRing`](crate::host_ring::HostRing)).
#[derive(Debug)]
pub(crate) struct HostSlot {
    pub(crate) stamp: Stamp,
    /// Samples gathered for the slot's current batch. Written by the feeder while
    /// FILLING, read by the decoder and copy thread after they Acquire the later stamp.
    pub(crate) count: UnsafeCell<usize>,
}

impl HostSlot {
    pub(crate) fn new(h: usize) -> Self {
        HostSlot {
            stamp: Stamp::new(h as u64, HostState::Free as u8),
            count: UnsafeCell::new(0),
        }
    }

    /// The stamp as (seq, state).
    pub(crate) fn state(&self) -> (u64, HostState) {
        let (seq, bits) = self.stamp.load();
        (seq, HostState::from_bits(u64::from(bits)))
    }
}

/// A device slot's protocol state (its memory lives in the backend).
#[derive(Debug)]
pub(crate) struct DeviceSlot<F> {
    pub(crate) stamp: Stamp,
    /// The release fence of the slot's last lease. Written by the releasing thread while
    /// LEASED, taken by the copy thread after it Acquires RELEASED.
    pub(crate) fence: UnsafeCell<Option<F>>,
}

impl<F> DeviceSlot<F> {
    pub(crate) fn new(d: usize) -> Self {
        DeviceSlot {
            stamp: Stamp::new(d as u64, DeviceState::Free as u8),
            fence: UnsafeCell::new(None),
        }
    }

    /// The stamp as (seq, state).
    pub(crate) fn state(&self) -> (u64, DeviceState) {
        let (seq, bits) = self.stamp.load();
        (seq, DeviceState::from_bits(u64::from(bits)))
    }
}
