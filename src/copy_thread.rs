//! The copy thread: moves filled batches to device slots, in sequence order, and frees
//! host slots as their copies complete.

use std::time::Duration;

use crate::backend::private::CopyJob;
use crate::backend::Backend;
use crate::control::Control;
use crate::device_side::DeviceSide;
use crate::error::{Error, Result};
use crate::park::Waited;
use crate::ready_ring::{Sender, Token};
use crate::slot::{HostSlots, Progress};
use crate::sync::{native, Arc, Instant};

/// How long the copy thread parks between polls of copy completion, on a backend that
/// does not wake it when a copy completes.
const POLL: Duration = Duration::from_micros(20);

/// The copy thread's stage: everything it owns.
pub(crate) struct Copier<B: Backend> {
    pub(crate) control: Arc<Control>,
    pub(crate) host: Arc<HostSlots>,
    pub(crate) device: Arc<DeviceSide<B>>,
    pub(crate) ready: Sender,
}

impl<B: Backend> Copier<B> {
    /// Runs until the source ends, a batch fails, the backend fails, or the pipeline stops.
    ///
    /// For batch `k` (host slot `k % H`, device slot `k % D`):
    /// 1. waits for FILLED(k) on the host slot (Acquire: the decoded bytes and count);
    /// 2. waits for the device slot to be FREE(k) or RELEASED(k - D) (Acquire: the
    ///    captured fence, recorded before that Release store: invariant 2);
    /// 3. takes the device slot (COPYING(k)) and enqueues the stream-side wait on its
    ///    fence, takes the host slot (IN_FLIGHT(k)), enqueues the copy and its READY and
    ///    COPIED points;
    /// 4. publishes LEASED(k), pushes the token and wakes the consumer.
    ///
    /// Independently it retires copies in order: once the oldest copy in flight has
    /// completed, its host slot becomes FREE(k + H) — never before, so no byte of a host
    /// slot is written while a copy out of it may run (invariant 1).
    pub(crate) fn run(mut self) {
        let control = self.control.clone();
        let times = &control.counters.copy;
        let mut next: u64 = 0;
        let mut retired: u64 = 0;
        let outcome: Result<Token> = loop {
            let t = native::Instant::now();
            if let Err(e) = self.retire(&mut retired, next) {
                break Err(e);
            }
            match self.host.progress(next) {
                Progress::End => break Ok(Token::End),
                Progress::Failed => break Ok(Token::Failed),
                Progress::Filled if self.device.slots.can_take(next) => {
                    if let Err(e) = self.copy(next) {
                        break Err(e);
                    }
                    times.busy_since(t);
                    next += 1;
                    continue;
                }
                _ => {}
            }
            times.busy_since(t);
            let t = native::Instant::now();
            let waited = self.wait(next, retired);
            times.waited_since(t);
            if waited == Waited::Stopped {
                return;
            }
        };
        let token = match outcome {
            Ok(token) => token,
            Err(error) => {
                control.record_failure(next, error);
                control.limit_to(next);
                Token::Failed
            }
        };
        // Capacity D + 1 holds at most D batch tokens (one per device slot) and this one.
        if self.ready.push(token).is_err() {
            control.record_failure(next, Error::Internal("the ready ring was full"));
        }
        control.consumer.wake();
    }

    /// Waits until batch `next` can be copied, ends the stream, or the oldest copy in
    /// flight completes.
    fn wait(&self, next: u64, retired: u64) -> Waited {
        let control = &*self.control;
        let (host, device) = (&*self.host, &*self.device);
        let progress = || {
            let can_copy = match host.progress(next) {
                Progress::Filled => device.slots.can_take(next),
                Progress::End | Progress::Failed => true,
                Progress::Pending | Progress::Decoding => false,
            };
            can_copy || (retired < next && device.backend.copied(host.idx(retired)).unwrap_or(true))
        };
        if retired < next && !device.backend.notifies_copy_done() {
            // Copies in flight and nothing will wake us when one completes: short parks.
            let deadline = Instant::now().checked_add(POLL);
            control
                .copier
                .wait(control.spin(), deadline, progress, || control.stopped())
        } else {
            control.wait(&control.copier, progress)
        }
    }

    /// Steps 2 to 4 for batch `k`, whose host slot is FILLED(k) and device slot free.
    fn copy(&mut self, k: u64) -> Result<()> {
        let (host, device) = (&*self.host, &*self.device);
        let (h, d) = (host.idx(k), device.slots.idx(k));
        // SAFETY: this is the copy thread, and `can_take(k)` held (the caller).
        let fence = unsafe { device.slots.start_copy(k) };
        if let Some(fence) = fence {
            device.backend.wait_fence(d, fence)?;
        }
        // SAFETY: this is the copy thread, and batch k is FILLED (the caller).
        let samples = unsafe { host.start_copy(k) };
        device.backend.copy(&CopyJob {
            seq: k,
            host: h,
            device: d,
            bytes: samples * device.sample_bytes,
        })?;
        // SAFETY: this is the copy thread, after `start_copy(k)` on the device slot.
        unsafe { device.slots.lease(k) };
        let token = Token::Batch {
            seq: k,
            slot: d.0,
            samples,
        };
        self.ready
            .push(token)
            .map_err(|_| Error::Internal("the ready ring was full"))?;
        self.control.consumer.wake();
        Ok(())
    }

    /// Frees the host slots of every copy in flight that has completed, oldest first.
    fn retire(&self, retired: &mut u64, next: u64) -> Result<()> {
        while *retired < next {
            let h = self.host.idx(*retired);
            if !self.device.backend.copied(h)? {
                break;
            }
            // SAFETY: this is the copy thread; batch `retired`'s slot is IN_FLIGHT and the
            // backend just reported its copy complete.
            unsafe { self.host.free(*retired, &self.control.feeder) };
            *retired += 1;
        }
        Ok(())
    }
}
