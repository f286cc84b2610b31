//! What a cpu-backend release captures (internal: the type is unreachable from outside).

use super::event::EventState;
use crate::sync::native::Arc;

/// A release fence as the cpu backend captured it: the records the slot's next copy waits
/// for.
#[derive(Debug)]
pub enum CpuFence {
    /// `Fence::Sync`: nothing to wait for.
    Nothing,
    /// One record of one event.
    One(Arc<EventState>, u64),
    /// A marker on each user stream (the conservative fence).
    All(Vec<(Arc<EventState>, u64)>),
}
