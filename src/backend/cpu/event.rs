//! cpu-backend events, with CUDA's meaning: a wait waits for the record that was the
//! event's latest when the wait was made, and for nothing else.
//!
//! Each record takes the next epoch; its signal, run by the stream it was recorded on,
//! completes that epoch alone. Records on different streams may complete out of order:
//! a later record that completes first does not complete an earlier one (a single
//! "highest completed" counter would, and would let a wait pass early).

use std::fmt;

use super::failure::Origin;
use crate::sync::native::{Arc, Condvar, Mutex, MutexGuard};

/// Records of one event.
#[derive(Debug)]
struct Records {
    /// Epoch of the latest record; 0 when never recorded (a wait on it returns at once).
    latest: u64,
    /// Epochs recorded whose signal has not run yet (few: one per queued record).
    pending: Vec<u64>,
    /// Where the latest record was made (`None`: never recorded).
    latest_origin: Option<Origin>,
}

/// One event's state, shared by its handles and the streams that signal or wait on it.
#[derive(Debug)]
pub struct EventState {
    records: Mutex<Records>,
    /// Signalled when a record completes.
    completed: Condvar,
}

impl EventState {
    pub(crate) fn new() -> Self {
        EventState {
            records: Mutex::new(Records {
                latest: 0,
                pending: Vec::with_capacity(8),
                latest_origin: None,
            }),
            completed: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the next epoch, pending until [`complete`](Self::complete)d, for a record made
    /// at `origin`.
    pub(crate) fn record(&self, origin: Origin) -> u64 {
        let mut r = self.lock();
        r.latest += 1;
        let epoch = r.latest;
        r.pending.push(epoch);
        r.latest_origin = Some(origin);
        epoch
    }

    /// The latest record's epoch (what a wait made now waits for).
    pub(crate) fn latest(&self) -> u64 {
        self.lock().latest
    }

    /// The latest record's epoch and where it was made.
    pub(crate) fn latest_record(&self) -> (u64, Option<Origin>) {
        let r = self.lock();
        (r.latest, r.latest_origin.clone())
    }

    /// Completes `epoch` (run by the stream it was recorded on).
    pub(crate) fn complete(&self, epoch: u64) {
        let mut r = self.lock();
        if let Some(i) = r.pending.iter().position(|&e| e == epoch) {
            r.pending.swap_remove(i);
        }
        drop(r);
        self.completed.notify_all();
    }

    fn is_done(r: &Records, epoch: u64) -> bool {
        epoch <= r.latest && !r.pending.contains(&epoch)
    }

    /// Whether record `epoch` has completed (epoch 0, "never recorded", always has).
    pub(crate) fn done(&self, epoch: u64) -> bool {
        Self::is_done(&self.lock(), epoch)
    }

    /// Blocks until record `epoch` has completed.
    pub(crate) fn wait_for(&self, epoch: u64) {
        let mut r = self.lock();
        while !Self::is_done(&r, epoch) {
            r = self.completed.wait(r).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// One record to wait for: an event's epoch, and where it was made (`None` for an event
/// never recorded: nothing to wait for).
#[derive(Debug, Clone)]
pub(crate) struct Mark {
    pub(crate) event: Arc<EventState>,
    pub(crate) epoch: u64,
    pub(crate) origin: Option<Origin>,
}

impl Mark {
    /// The latest record of `event` as it stands now.
    pub(crate) fn latest(event: &Arc<EventState>) -> Self {
        let (epoch, origin) = event.latest_record();
        Mark {
            event: event.clone(),
            epoch,
            origin,
        }
    }
}

/// A cpu-backend event (`cuEvent`'s stand-in): recorded on a [`CpuStream`](super::CpuStream),
/// it completes once everything enqueued there before the record has run.
///
/// Waits and queries refer to the latest record as of the call, exactly as CUDA's do:
/// recording the event again later does not move a wait already made.
#[derive(Clone)]
pub struct CpuEvent(pub(crate) Arc<EventState>);

impl CpuEvent {
    /// A never-recorded event (waiting on it returns at once, as in CUDA).
    pub fn new() -> Self {
        CpuEvent(Arc::new(EventState::new()))
    }

    /// Whether the latest record has completed.
    pub fn query(&self) -> bool {
        self.0.done(self.0.latest())
    }

    /// Blocks until the latest record (as of this call) has completed.
    pub fn synchronize(&self) {
        self.0.wait_for(self.0.latest());
    }
}

impl Default for CpuEvent {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CpuEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = self.0.lock();
        f.debug_struct("CpuEvent")
            .field("latest", &r.latest)
            .field("pending", &r.pending)
            .finish()
    }
}
