//! The slot protocol, in one place.
//!
//! Each slot carries a [`Stamp`]: its sequence number and state in one atomic word. Every
//! transition is one owner handing the slot to the next: the owner writes the slot's
//! cells, then publishes the new stamp with a Release store, then wakes the next owner;
//! the next owner Acquire-loads the stamp before it touches the cells. The methods here
//! do those three steps together, so the stages (feeder, decode workers, copy thread,
//! batch) never touch a stamp or a cell themselves. `ARCHITECTURE.md` has the tables and
//! the proof sketch.
//!
//! Host slot `h` serves batches `h, h + H, h + 2H, ...`:
//! `FREE(k) → FILLING(k) → DECODING(k) → FILLED(k) → IN_FLIGHT(k) → FREE(k + H)`,
//! or `FREE(k)/FILLING(k) → END(k)` (the source ended before batch `k`) or
//! `FILLING(k)/DECODING(k) → FAILED(k)`.
//!
//! Device slot `d` serves batches `d, d + D, ...`:
//! `FREE(d) → COPYING(k) → LEASED(k) → RELEASED(k) → COPYING(k + D) → ...`.
//!
//! - `stamp.rs`: the [`Stamp`] word and its states; `index.rs`: host and device slot
//!   indices as types of their own;
//! - `host.rs`: host slots' transitions and the samples gathered for each;
//! - `device.rs`: device slots' transitions and the fence cell of each;
//! - `release_wake.rs`: when a release wakes the copy thread (at once, or once half the
//!   device slots wait);
//! - `info.rs`: each slot's batch description (rows, epoch, step, extents).

pub(crate) mod device;
pub(crate) mod host;
pub(crate) mod index;
pub(crate) mod info;
pub(crate) mod release_wake;
pub(crate) mod stamp;
