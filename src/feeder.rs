//! The feeder thread: pulls samples from the source iterator, one batch per host slot.
//!
//! It holds only what it needs — the control state, the host slots' protocol state and
//! the sample cells — never the backend or the pinned ring, so a source whose `next`
//! blocks cannot keep device or pinned memory alive after the pipeline is dropped.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::config::LastBatch;
use crate::control::Control;
use crate::error::{panic_message, Error};
use crate::park::Waited;
use crate::slot::{HostSlots, Samples};
use crate::sync::{native, Arc};
use crate::trace::{Kind, Track};

/// The feeder's stage: everything it owns.
pub(crate) struct Feeder<S, I> {
    pub(crate) control: Arc<Control>,
    pub(crate) slots: Arc<HostSlots>,
    pub(crate) samples: Arc<Samples<S>>,
    pub(crate) source: I,
    pub(crate) per_batch: usize,
    pub(crate) last_batch: LastBatch,
}

impl<S, I: Iterator<Item = S>> Feeder<S, I> {
    /// Gathers batch after batch until the source ends, it panics, a batch fails, or the
    /// pipeline stops. For batch `k`: waits for FREE(k), takes the slot (FILLING(k)), pulls
    /// up to `per_batch` samples into its cells, then hands it to the decode workers
    /// (DECODING(k)). When the source ends it publishes END on the next batch's slot (once
    /// that slot is free); a panic in the source becomes FAILED(k).
    pub(crate) fn run(self) {
        let Feeder {
            control,
            slots,
            samples,
            source,
            per_batch,
            last_batch,
        } = self;
        let mut source = source.fuse();
        let times = &control.counters.source;
        let wakes = |k: u64| [control.decoders(k), &*control.copier];
        let mut k: u64 = 0;
        loop {
            if !wait_free(&control, &slots, k) {
                return;
            }
            let t = native::Instant::now();
            let span = control.span_start();
            // SAFETY: this is the feeder, and batch k's slot is FREE(k) (just waited for).
            let mut fill = unsafe { slots.begin_fill(k, &samples) };
            let mut n = 0;
            let gathered = loop {
                if n == per_batch {
                    break Ok(());
                }
                match catch_unwind(AssertUnwindSafe(|| source.next())) {
                    Ok(Some(sample)) => {
                        fill.put(n, sample);
                        n += 1;
                    }
                    Ok(None) => break Ok(()),
                    Err(payload) => {
                        break Err(Error::SourcePanic {
                            seq: k,
                            sample: n,
                            message: panic_message(&*payload),
                        })
                    }
                }
                if control.stopped() {
                    return;
                }
            };
            times.busy_since(t);
            if let Err(error) = gathered {
                control.record_failure(k, error);
                fill.fail(&wakes(k));
                control.limit_to(k);
                return;
            }
            if n == 0 || (n < per_batch && last_batch == LastBatch::Drop) {
                fill.end(&wakes(k));
                control.limit_to(k);
                return;
            }
            control.span(span, Kind::Source, Track::Source, k, n as u32);
            fill.hand_to_decoders(n, control.decoders(k));
            k += 1;
            if n < per_batch {
                if wait_free(&control, &slots, k) {
                    // SAFETY: this is the feeder, and batch k's slot is FREE(k).
                    unsafe { slots.end_at(k, &wakes(k)) };
                    control.limit_to(k);
                }
                return;
            }
        }
    }
}

/// Waits until batch `k`'s slot is FREE(k); false if the pipeline stops or no batch at
/// `k` will be built (an earlier batch failed).
fn wait_free(control: &Control, slots: &HostSlots, k: u64) -> bool {
    let t = native::Instant::now();
    let waited = control.wait_unless(
        &control.feeder,
        || slots.is_free(k),
        || control.limit() <= k,
    );
    control.counters.source.waited_since(t);
    waited == Waited::Ready
}
