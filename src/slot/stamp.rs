//! Stamps: a slot's sequence number and state in one atomic word, `seq << 4 | state`.

use std::marker::PhantomData;

use crate::sync::{AtomicU64, Ordering};

const STATE_BITS: u32 = 4;
const STATE_MASK: u64 = (1 << STATE_BITS) - 1;

/// States of a host slot (see [`Stats::host_slots`](crate::Stats::host_slots)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum HostState {
    /// Waiting for the feeder to gather batch `seq`.
    Free,
    /// The feeder is pulling batch `seq`'s samples from the source.
    Filling,
    /// The decode workers are writing batch `seq` into the slot.
    Decoding,
    /// Batch `seq` is decoded; waiting for the copy thread.
    Filled,
    /// The copy of batch `seq` out of this slot may be running.
    InFlight,
    /// The source ended: there is no batch `seq`.
    End,
    /// Building batch `seq` failed; the pipeline stops there.
    Failed,
}

/// States of a device slot (see [`Stats::device_slots`](crate::Stats::device_slots)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceState {
    /// Never used yet; takes batch `seq` (its own index) first.
    Free,
    /// The copy thread is enqueueing batch `seq`'s copy.
    Copying,
    /// Batch `seq` is handed out (or waits in the ready ring); not yet released.
    Leased,
    /// Batch `seq` was released; its fence waits in the slot for the copy thread.
    Released,
}

/// A state that packs into a stamp's low bits.
pub(crate) trait State: Copy + Eq {
    fn bits(self) -> u64;
    fn from_bits(bits: u64) -> Self;
}

impl State for HostState {
    fn bits(self) -> u64 {
        match self {
            HostState::Free => 0,
            HostState::Filling => 1,
            HostState::Decoding => 2,
            HostState::Filled => 3,
            HostState::InFlight => 4,
            HostState::End => 5,
            HostState::Failed => 6,
        }
    }

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

impl State for DeviceState {
    fn bits(self) -> u64 {
        match self {
            DeviceState::Free => 0,
            DeviceState::Copying => 1,
            DeviceState::Leased => 2,
            DeviceState::Released => 3,
        }
    }

    fn from_bits(bits: u64) -> Self {
        match bits {
            0 => DeviceState::Free,
            1 => DeviceState::Copying,
            2 => DeviceState::Leased,
            _ => DeviceState::Released,
        }
    }
}

/// One slot's stamp.
#[derive(Debug)]
pub(crate) struct Stamp<S> {
    /// `seq << 4 | state`, any `seq < 2^60`. Stored with Release by the slot's current
    /// owner as it hands the slot on; loaded with Acquire by the next owner before it
    /// touches the slot's cells or bytes.
    word: AtomicU64,
    state: PhantomData<S>,
}

impl<S: State> Stamp<S> {
    pub(crate) fn new(seq: u64, state: S) -> Self {
        Stamp {
            word: AtomicU64::new(pack(seq, state)),
            state: PhantomData,
        }
    }

    /// The stamp, with Acquire: pairs with the Release in [`publish`](Self::publish).
    #[inline]
    pub(crate) fn load(&self) -> (u64, S) {
        let word = self.word.load(Ordering::Acquire);
        (word >> STATE_BITS, S::from_bits(word & STATE_MASK))
    }

    /// Hands the slot on: every write before this is visible to whoever Acquire-loads it.
    #[inline]
    pub(crate) fn publish(&self, seq: u64, state: S) {
        self.word.store(pack(seq, state), Ordering::Release);
    }

    /// Whether the stamp is exactly `(seq, state)` (Acquire).
    #[inline]
    pub(crate) fn is(&self, seq: u64, state: S) -> bool {
        self.load() == (seq, state)
    }
}

#[inline]
fn pack<S: State>(seq: u64, state: S) -> u64 {
    debug_assert!(seq < (1 << (64 - STATE_BITS)));
    (seq << STATE_BITS) | state.bits()
}
