//! The copy thread: moves filled batches to device slots, in sequence order, several at a
//! time where they lie side by side, and frees host slots as their copies complete.

use std::time::Duration;

use crate::backend::contract::{Backend, CopyRole, CopyRun};
use crate::cadence::Cadence;
use crate::control::Control;
use crate::device_side::DeviceSide;
use crate::error::{Error, Result};
use crate::park::Waited;
use crate::ready_ring::{Sender, Token};
use crate::slot::host::{HostSlots, Progress};
use crate::stats::nanos;
use crate::sync::{native, Arc, Instant};
use crate::trace::{Kind, Track};

/// How long the copy thread parks between polls of copy completion, on a backend that
/// does not wake it when a copy completes.
const POLL: Duration = Duration::from_micros(20);

/// How long the copy thread first waits for a device slot before it looks again, where
/// releases wake it lazily (src/slot/release_wake.rs); doubled after each look that found
/// nothing, up to [`PATIENCE_MAX`].
pub(crate) const PATIENCE_MIN: Duration = Duration::from_millis(1);
const PATIENCE_MAX: Duration = Duration::from_millis(16);

/// Most batches one copy run takes.
const MAX_RUN: usize = 16;

/// Most bytes one copy run takes, unless one batch is larger. A run is one copy (each costs
/// about 2.6 µs beside its bytes on an H100 or H200, so small batches go many to a copy),
/// but it waits on the GPU for the release fences of all its device slots, and its first
/// batch is READY only when its last batch's bytes have landed: large batches go one a run,
/// so a batch never waits for more than this many bytes of its neighbours' copies or for a
/// later slot's fence (with a consumer kernel as long as a copy and two device slots, runs
/// of two 32 MiB batches cost a whole step each).
const MAX_RUN_BYTES: usize = 4 << 20;

/// Most batches one copy run takes for batches of `batch_bytes`: at least 1.
pub(crate) fn max_run(batch_bytes: usize) -> usize {
    (MAX_RUN_BYTES / batch_bytes.max(1)).clamp(1, MAX_RUN)
}

/// The copy thread's stage: everything it owns.
pub(crate) struct Copier<B: Backend> {
    pub(crate) control: Arc<Control>,
    pub(crate) host: Arc<HostSlots>,
    pub(crate) device: Arc<DeviceSide<B>>,
    pub(crate) ready: Sender,
    /// The copy thread's role in the backend's operations.
    pub(crate) role: CopyRole,
    /// Most batches a copy run takes ([`max_run`] of the batch size).
    pub(crate) max_run: usize,
    /// When tracing: when each host slot's copy was enqueued (trace clock), for its H2D
    /// span. Empty otherwise.
    pub(crate) enqueued_at: Vec<u64>,
    /// How long waits for a device slot take: when to sleep before one.
    pub(crate) cadence: Cadence,
    /// The batch whose device slot the copy thread waits for, and since when (its waits
    /// may be cut into several by copies completing meanwhile).
    pub(crate) slot_wait: Option<(u64, native::Instant)>,
    /// How long the next lazily woken wait for a device slot lasts before it looks again.
    pub(crate) patience: Duration,
}

impl<B: Backend> Copier<B> {
    /// Runs until the source ends, a batch fails, the backend fails, or the pipeline stops.
    ///
    /// For batch `k` (host slot `k % H`, device slot `k % D`):
    /// 1. waits for FILLED(k) on the host slot (Acquire: the decoded bytes and count);
    /// 2. waits for the device slot to be FREE(k) or RELEASED(k - D) (Acquire: the
    ///    captured fence, recorded before that Release store: invariant 2);
    /// 3. extends the run with the batches after `k` that are filled too, whose device
    ///    slots are free, and whose host and device slots follow `k`'s without wrapping,
    ///    up to [`max_run`] batches;
    /// 4. takes each device slot (COPYING) and each host slot (IN_FLIGHT), enqueues the
    ///    stream-side waits on the fences (newest first), the run's copy, its READY points and
    ///    its completion point;
    /// 5. publishes each LEASED, pushes each token and wakes the consumer.
    ///
    /// Independently it retires copies in order: once the backend reports batch `r`'s copy
    /// complete (its completion count passes `r`), `r`'s host slot becomes FREE(r + H) —
    /// never before, so no byte of a host slot is written while a copy out of it may run
    /// (invariant 1).
    pub(crate) fn run(mut self) {
        let control = self.control.clone();
        if control.trace.is_some() {
            self.enqueued_at = vec![0; self.host.len()];
        }
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
                    match self.copy_run(next) {
                        Ok(end) => next = end,
                        Err((delivered, e)) => {
                            next = delivered;
                            break Err(e);
                        }
                    }
                    times.busy_since(t);
                    continue;
                }
                _ => {}
            }
            times.busy_since(t);
            let t = native::Instant::now();
            // The next batch filled means the wait is for its device slot.
            let for_slot = self.host.progress(next) == Progress::Filled;
            let waited = if for_slot {
                self.wait_for_slot(next, retired)
            } else {
                self.wait(next, retired, false, None)
            };
            let now = times.waited_since(t);
            if for_slot {
                (control.counters.copy_device_wait)
                    .fetch_add(nanos(now - t), native::Ordering::Relaxed);
            }
            if waited == Waited::Stopped {
                return;
            }
        };
        // At the end of the stream, the copies still in flight complete and their host
        // slots are freed before the last token goes out: after the end nothing is left in
        // flight (what `Pipeline::stats` shows). Not after a backend failure, whose
        // completions may never come.
        let outcome = outcome.and_then(|token| {
            self.retire_all(&mut retired, next)?;
            Ok(token)
        });
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

    /// As [`wait`](Self::wait), for batch `next`'s device slot (batch `next` is filled):
    /// first, unannounced, until just before the release the consumer's cadence predicts
    /// (`src/cadence.rs`), counted from the first wait for this slot; then spinning.
    fn wait_for_slot(&mut self, next: u64, retired: u64) -> Waited {
        let now = native::Instant::now();
        let since = match self.slot_wait {
            Some((batch, since)) if batch == next => since,
            _ => {
                self.slot_wait = Some((next, now));
                now
            }
        };
        // The cadence only where every release wakes the copy thread: with lazy wakes a
        // release below the threshold costs no unpark, and a spin for each would undo their
        // batching. There, instead, the patience below.
        let eager = self.device.slots.releases_wake();
        let lead = if eager {
            self.cadence.lead()
        } else {
            Duration::ZERO
        };
        let wake = since + lead;
        let slept = now < wake;
        if slept {
            native::sleep(wake - now);
        }
        let late = slept && self.device.slots.can_take(next);
        // A release below the lazy wake's threshold does not wake a parked copy thread:
        // it looks again after its patience (a consumer that waits without popping). Not
        // under the model checker, whose model 13 checks that the wakes alone suffice.
        let deadline = (!cfg!(pinring_loom) && !eager)
            .then(|| Instant::now().checked_add(self.patience))
            .flatten();
        let waited = if late {
            Waited::Ready
        } else {
            self.wait(next, retired, slept, deadline)
        };
        // Only the patience's own deadline lengthens it (not the short polls of a backend
        // that does not notify copy completion).
        let patient = deadline.is_some_and(|d| Instant::now() >= d);
        self.patience = match waited {
            Waited::TimedOut if patient => (self.patience * 2).min(PATIENCE_MAX),
            Waited::TimedOut => self.patience,
            _ => PATIENCE_MIN,
        };
        if self.device.slots.can_take(next) {
            if eager {
                self.cadence.observe(lead, late, since.elapsed());
            }
            self.slot_wait = None;
        }
        waited
    }

    /// Waits until batch `next` can be copied, ends the stream, or a copy in flight
    /// completes, or `deadline` passes; `spinning`: spins first whatever the spin rate says.
    fn wait(&self, next: u64, retired: u64, spinning: bool, deadline: Option<Instant>) -> Waited {
        let control = &*self.control;
        let (host, device, role) = (&*self.host, &*self.device, &self.role);
        let progress = || {
            let can_copy = match host.progress(next) {
                Progress::Filled => device.slots.can_take(next),
                Progress::End | Progress::Failed => true,
                Progress::Pending | Progress::Decoding | Progress::Past => false,
            };
            can_copy
                || (retired < next
                    && device
                        .backend
                        .completed(role)
                        .map_or(true, |done| done > retired))
        };
        if retired < next && !device.backend.notifies_copy_done(role) {
            // Copies in flight and nothing will wake us when one completes: short parks.
            let deadline = Instant::now().checked_add(POLL);
            control
                .copier
                .wait(control.spin(), deadline, progress, || control.stopped())
        } else {
            let stopped = || control.stopped();
            (control.copier).wait_with(control.spin(), spinning, deadline, progress, stopped)
        }
    }

    /// Steps 3 to 5 from batch `k`, whose host slot is FILLED(k) and device slot free;
    /// returns the batch after the run, or on failure the first batch not delivered and
    /// the error (the batches before it were delivered).
    fn copy_run(&mut self, k: u64) -> Result<u64, (u64, Error)> {
        let span = self.control.span_start();
        let (host, device) = (&*self.host, &*self.device);
        let (h, d) = (host.idx(k), device.slots.idx(k));
        let room = (host.len() - h.0)
            .min(device.slots.len() - d.0)
            .min(self.max_run);
        let mut batches = 1;
        while batches < room
            && host.progress(k + batches as u64) == Progress::Filled
            && device.slots.can_take(k + batches as u64)
        {
            batches += 1;
        }
        // Each batch's samples: any may be short (the last of an epoch, or of the source).
        let mut counts = [0usize; MAX_RUN];
        let mut fences: [Option<B::Captured>; MAX_RUN] = std::array::from_fn(|_| None);
        for i in 0..batches as u64 {
            // SAFETY: this is the copy thread, and `can_take(k + i)` held (above, or the
            // caller's for `k`).
            fences[i as usize] = unsafe { device.slots.start_copy(k + i) };
            self.control.instant(
                Kind::Take,
                Track::Copy,
                k + i,
                device.slots.idx(k + i).0 as u32,
            );
            // SAFETY: this is the copy thread, and batch k + i is FILLED (above, or the
            // caller's check for `k`).
            let samples = unsafe { host.start_copy(k + i) };
            counts[i as usize] = samples;
            if let Some(kept) = &device.kept {
                // SAFETY: this is the copy thread; batch k + i's host slot is IN_FLIGHT (just
                // above: no decode writes it) and its device slot COPYING (no lease reads its
                // kept bytes).
                unsafe { kept.keep(host.idx(k + i).0, device.slots.idx(k + i).0) };
            }
            // SAFETY: this is the copy thread; batch k + i's device slot is COPYING (above)
            // and its host slot IN_FLIGHT (just above).
            unsafe { device.slots.copy_info(k + i, host) };
        }
        // The run's fences newest first: a backend that knows one record's completion implies
        // an older one's (cuda: one thread's records on one stream) then skips the older.
        // Each is handed over even after one failed, so that the teardown, which waits for
        // the copy stream, still waits for every reader of these slots.
        let mut failed = None;
        for i in (0..batches as u64).rev() {
            if let Some(fence) = fences[i as usize].take() {
                let fenced = self.control.span_start();
                let slot = device.slots.idx(k + i);
                if let Err(e) = device.backend.wait_fence(&self.role, slot, fence) {
                    failed.get_or_insert(e);
                }
                (self.control).span(fenced, Kind::FenceWait, Track::Copy, k + i, slot.0 as u32);
            }
        }
        if let Some(e) = failed {
            return Err((k, e));
        }
        let run = CopyRun {
            first: k,
            host: h,
            device: d,
            batches,
            last_bytes: counts[batches - 1] * device.sample_bytes,
        };
        self.control
            .counters
            .copies
            .fetch_add(1, native::Ordering::Relaxed);
        let call = self.control.span_start();
        let (delivered, failure) = match device.backend.copy(&self.role, &run) {
            Ok(()) => (batches, None),
            Err(failed) => (failed.enqueued, Some(failed.error)),
        };
        (self.control).span(call, Kind::CopyCall, Track::Copy, k, batches as u32);
        if let Some(at) = span {
            for i in 0..delivered {
                self.enqueued_at[h.0 + i] = at;
            }
        }
        // Before the tokens: a pop that asked for them gets one (src/slot/release_wake.rs).
        device.slots.served();
        for i in 0..delivered as u64 {
            let seq = k + i;
            // SAFETY: this is the copy thread, after `start_copy(seq)` on the device slot.
            unsafe { device.slots.lease(seq) };
            let samples = counts[i as usize];
            let token = Token::Batch {
                seq,
                slot: device.slots.idx(seq).0,
                samples,
            };
            (self.control).instant(
                Kind::Lease,
                Track::Copy,
                seq,
                device.slots.idx(seq).0 as u32,
            );
            self.ready
                .push(token)
                .map_err(|_| (seq, Error::Internal("the ready ring was full")))?;
        }
        self.control.consumer.wake();
        (self.control).span(span, Kind::CopyEnqueue, Track::Copy, k, delivered as u32);
        match failure {
            None => Ok(run.end()),
            Some(error) => Err((k + delivered as u64, error)),
        }
    }

    /// Frees the host slot of every copy in flight, oldest first, waiting for each to
    /// complete; returns early (leaving them) if the pipeline is stopped.
    fn retire_all(&self, retired: &mut u64, next: u64) -> Result<()> {
        let (control, device, role) = (&*self.control, &*self.device, &self.role);
        let polled = !device.backend.notifies_copy_done(role);
        if *retired < next {
            device.backend.finish_copies(role);
        }
        loop {
            self.retire(retired, next)?;
            if *retired == next {
                return Ok(());
            }
            let done_before = *retired;
            // A failed completion query ends the wait; the next `retire` reports it.
            let progress =
                || (device.backend.completed(role)).map_or(true, |done| done > done_before);
            let deadline = if polled {
                Instant::now().checked_add(POLL)
            } else {
                None
            };
            let waited =
                (control.copier).wait(control.spin(), deadline, progress, || control.stopped());
            if waited == Waited::Stopped {
                return Ok(());
            }
        }
    }

    /// Frees the host slots of every copy in flight that has completed, oldest first.
    fn retire(&self, retired: &mut u64, next: u64) -> Result<()> {
        if *retired == next {
            return Ok(());
        }
        let done = self.device.backend.completed(&self.role)?.min(next);
        if let Some(trace) = &self.control.trace {
            let now = trace.now();
            for seq in *retired..done {
                let at = self.enqueued_at[self.host.idx(seq).0];
                trace.record(Kind::H2d, Track::Copy, seq, 0, at, now);
            }
        }
        while *retired < done {
            // SAFETY: this is the copy thread; batch `retired`'s slot is IN_FLIGHT and the
            // backend reports its copy complete.
            unsafe { self.host.free(*retired, &self.control.feeder) };
            *retired += 1;
        }
        Ok(())
    }
}
