//! The decode workers: rayon's threads, each running one long-lived job that claims work
//! items and decodes them straight into the pinned host ring.
//!
//! A batch of `n` samples is cut into items of up to `per_item` samples, so that a small
//! sample's hand-off cost is shared by several. One claim counter hands out items in
//! sequence order: item `i` is item `i % items_per_batch` of batch `i / items_per_batch`.
//! A worker that claims an item of a batch not yet gathered waits for it, so several host
//! slots decode at once when the feeder is ahead. The worker that finishes a batch's last
//! item publishes FILLED (or FAILED); the copy thread still copies in sequence order.
//! Claiming is one Relaxed `fetch_add`: which item a worker holds orders nothing, the
//! slot's stamp does.

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::control::Control;
use crate::decode::Decode;
use crate::error::{panic_message, Error};
use crate::host_ring::HostRing;
use crate::park::Waited;
use crate::slot::host::{HostSlots, Progress, SampleCells};
use crate::source::files::deferred::Run;
use crate::sync::{native, Arc, AtomicU64, Ordering};
use crate::trace::{Kind, Track};

/// What the decode workers share.
pub(crate) struct DecodeWork<D: Decode> {
    pub(crate) control: Arc<Control>,
    pub(crate) slots: Arc<HostSlots>,
    pub(crate) samples: Arc<SampleCells<D::Sample>>,
    pub(crate) ring: native::Arc<HostRing>,
    pub(crate) decoder: D,
    pub(crate) sample_bytes: usize,
    /// The next item to claim (see the module docs). Relaxed: each value is handed out
    /// once, and the item's slot stamp orders the work.
    claims: AtomicU64,
}

impl<D: Decode> DecodeWork<D> {
    pub(crate) fn new(
        control: Arc<Control>,
        slots: Arc<HostSlots>,
        samples: Arc<SampleCells<D::Sample>>,
        ring: native::Arc<HostRing>,
        decoder: D,
        sample_bytes: usize,
    ) -> Self {
        DecodeWork {
            control,
            slots,
            samples,
            ring,
            decoder,
            sample_bytes,
            claims: AtomicU64::new(0),
        }
    }

    /// One worker: claims and decodes items until the source ends, a batch fails, or the
    /// pipeline stops.
    pub(crate) fn run_worker(&self) {
        let control = &*self.control;
        let per_batch = self.slots.items_per_batch() as u64;
        loop {
            let claim = self.claims.fetch_add(1, Ordering::Relaxed);
            let (k, c) = (claim / per_batch, (claim % per_batch) as usize);
            let t = native::Instant::now();
            let mut progress = Progress::Pending;
            let waited = control.wait_unless(
                control.decoders(k),
                || {
                    progress = self.slots.progress(k);
                    progress != Progress::Pending
                },
                || control.limit() <= k,
            );
            control.counters.decode.waited_since(t);
            if waited != Waited::Ready {
                return; // stopped, or an earlier batch ended the stream (limit)
            }
            match progress {
                Progress::Decoding => {}
                // A short batch (an epoch's last) has fewer items than this claim's index:
                // its items were all decoded (FILLED) and perhaps copied (the slot moved
                // on) before this claim. Nothing to do; claim the next item.
                Progress::Filled | Progress::Past => continue,
                // Batch k ends the stream (END/FAILED).
                Progress::End | Progress::Failed | Progress::Pending => return,
            }
            let t = native::Instant::now();
            let span = control.span_start();
            // SAFETY: batch k is DECODING (Acquired above) and this worker claimed item
            // (k, c) alone.
            let Some(mut item) = (unsafe { self.slots.take_item(k, c, &self.samples) }) else {
                continue; // a short batch has fewer items
            };
            let mut failure = None;
            // The item's reads of source files are one run: each file is checked once,
            // after the last of them and before the item is finished (published).
            let run = Run::begin();
            for j in item.range() {
                run.sample(j);
                let (sample, out) = item.sample(j, &self.ring, self.sample_bytes);
                let Some(sample) = sample else { continue };
                let result = catch_unwind(AssertUnwindSafe(|| self.decoder.decode(sample, out)));
                let error = match result {
                    Ok(Ok(())) => continue,
                    Ok(Err(e)) => e.into_error(k, j),
                    Err(payload) => Error::DecoderPanic {
                        seq: k,
                        sample: j,
                        message: panic_message(&*payload),
                    },
                };
                failure = Some((j, error));
                break;
            }
            // A file that changed (or could not be looked at) under an earlier sample of
            // the item names that sample; a failure of its own before it stands.
            if let Err(checked) = run.finish()
                && failure.as_ref().is_none_or(|&(j, _)| checked.sample < j)
            {
                let error = Error::Source(checked.error.at_sample(k, checked.sample));
                failure = Some((checked.sample, error));
            }
            let failure = failure.map(|(_, error)| error);
            control.counters.decode.busy_since(t);
            let first = item.range().start as u32;
            control.span(span, Kind::Decode, Track::this_decoder(), k, first);
            let ok = failure.is_none();
            if let Some(error) = failure {
                control.record_failure(item.seq(), error);
                control.limit_to(item.seq());
            }
            item.finish(ok, &control.copier);
        }
    }
}

/// Builds the pool: `threads` workers named `pinring-decode-{i}`, worker `i` pinned to
/// `cores[i % cores.len()]` when cores are given, as `SCHED_BATCH` when `batch`
/// (src/thread_policy.rs). Each worker counts itself in and out of `control` as it starts
/// and ends (so a pool that fails to start midway counts only the workers that ran).
pub(crate) fn build_pool(
    threads: usize,
    cores: &[usize],
    batch: bool,
    control: &Arc<Control>,
) -> Result<rayon::ThreadPool, Error> {
    let cores = cores.to_vec();
    let (started, exited) = (control.clone(), control.clone());
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("pinring-decode-{i}"))
        .start_handler(move |i| {
            started.thread_started();
            crate::thread_policy::yield_at_wakeup(batch);
            if !cores.is_empty() {
                core_affinity::set_for_current(core_affinity::CoreId {
                    id: cores[i % cores.len()],
                });
            }
        })
        .exit_handler(move |_| exited.thread_exited())
        .build()
        .map_err(|e| Error::Spawn {
            thread: "decode pool",
            source: Box::new(e),
        })
}
