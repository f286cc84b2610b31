//! [`HostKept`]: the host bytes of chosen fields kept from pop until release — one small
//! host buffer per device slot, filled by the copy thread from the batch's host slot as it
//! starts the batch's copy (`ConfigBuilder::host_fields`).
//!
//! A host slot is freed, and may be refilled, as soon as its copy completes — before the
//! consumer releases the batch (§2) — so a host view of a field must not read the host slot.
//! The device slot is the batch's until its release, so a buffer per device slot is too: it is
//! written only while its device slot is COPYING (the copy thread, invariant of
//! `DeviceSlots::start_copy`) and read only while it is LEASED.

use std::cell::UnsafeCell;

use crate::fields::Fields;
use crate::host_ring::HostRing;
use crate::sync::native::Arc;

/// The kept bytes of every device slot, and where they come from in a slot.
pub(crate) struct HostKept {
    /// `(offset in a slot, bytes)` of each kept array (a view's array, for a view), in
    /// the order given, each once.
    ranges: Vec<(usize, usize)>,
    /// Bytes kept per device slot: the fields' bytes, one after the other.
    per_slot: usize,
    /// `device_slots × per_slot` bytes.
    buf: Box<[UnsafeCell<u8>]>,
    ring: Arc<HostRing>,
}

// SAFETY: the bytes of device slot `d`'s buffer are written only by the copy thread while
// that device slot is COPYING and read only by holders of its lease (LEASED); the slot
// protocol's Release/Acquire pairs (the ready ring's push and pop, the release's store and
// the copy thread's `can_take`) order every write before every read and every read before
// the next write.
unsafe impl Sync for HostKept {}
// SAFETY: as for `Sync`: the buffer is plain bytes, owned.
unsafe impl Send for HostKept {}

impl std::fmt::Debug for HostKept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostKept")
            .field("ranges", &self.ranges)
            .field("per_slot", &self.per_slot)
            .finish()
    }
}

impl HostKept {
    /// Buffers for `names` (fields of `fields`, checked by the config) of `device_slots`
    /// device slots, filled from `ring`'s host slots; `None` when no field is kept.
    pub(crate) fn new(
        names: &[String],
        fields: Option<&Fields>,
        device_slots: usize,
        ring: Arc<HostRing>,
    ) -> Option<Self> {
        let fields = fields?;
        let mut ranges: Vec<(usize, usize)> = Vec::new();
        for name in names {
            // A view's bytes are its array's: keep the array.
            let Some(mut f) = fields.get(name) else {
                continue;
            };
            while let Some(of) = f.view_of.as_deref().and_then(|of| fields.get(of)) {
                f = of;
            }
            let range = (f.offset, f.max_bytes());
            if !ranges.contains(&range) {
                ranges.push(range);
            }
        }
        if ranges.is_empty() {
            return None;
        }
        let per_slot = ranges.iter().map(|r| r.1).sum();
        let buf = (0..per_slot * device_slots)
            .map(|_| UnsafeCell::new(0))
            .collect();
        Some(HostKept {
            ranges,
            per_slot,
            buf,
            ring,
        })
    }

    /// Copies the kept fields of host slot `h` into device slot `d`'s buffer.
    ///
    /// # Safety
    /// The caller is the copy thread, host slot `h` is IN_FLIGHT (no decode writes it) and
    /// device slot `d` is COPYING (no lease reads its buffer).
    pub(crate) unsafe fn keep(&self, h: usize, d: usize) {
        let from = self.ring.slot_ptr(h);
        let mut at = d * self.per_slot;
        for &(offset, len) in &self.ranges {
            let to = UnsafeCell::raw_get(self.buf[at..at + len].as_ptr());
            // SAFETY: `offset + len` lies inside a host slot (the layout fits the slot).
            let src = unsafe { from.add(offset) };
            // SAFETY: the host slot is not written meanwhile and the buffer's range is this
            // device slot's, which nothing reads meanwhile (the caller's contract); the two
            // do not overlap (one is the ring's mapping, the other this buffer).
            unsafe { std::ptr::copy_nonoverlapping(src, to, len) };
            at += len;
        }
    }

    /// The kept bytes `offset..offset + len` of a slot (a field's, in this batch) of
    /// device slot `d`; `None` when no kept array holds them.
    ///
    /// # Safety
    /// The caller holds device slot `d`'s lease, and the bytes are not used past it.
    pub(crate) unsafe fn get(&self, d: usize, offset: usize, len: usize) -> Option<&[u8]> {
        let mut at = d * self.per_slot;
        for &(from, bytes) in &self.ranges {
            if offset >= from && offset + len <= from + bytes {
                let skip = at + (offset - from);
                let start = UnsafeCell::raw_get(self.buf[skip..skip + len].as_ptr());
                // SAFETY: the range lies in device slot `d`'s buffer, written before its
                // lease began and not again until it ends (the caller's contract).
                return Some(unsafe { std::slice::from_raw_parts(start, len) });
            }
            at += bytes;
        }
        None
    }
}
