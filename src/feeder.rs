//! The feeder thread: pulls samples from the source iterator, one batch per host slot.
//!
//! It holds only what it needs — the control state, the host slots' protocol state and
//! the sample cells — never the backend or the pinned ring, so a source whose `next`
//! blocks cannot keep device or pinned memory alive after the pipeline is dropped.

use std::panic::{catch_unwind, AssertUnwindSafe};

use std::marker::PhantomData;

use crate::config::LastBatch;
use crate::control::Control;
use crate::decode::Decode;
use crate::error::{panic_message, ConfigError, Error};
use crate::park::Waited;
use crate::slot::host::{HostSlots, SampleCells};
use crate::sync::{native, Arc};
use crate::trace::{Kind, Track};

/// The feeder's stage: everything it owns. `D` is the decoder's type, for
/// [`Decode::identify`] only: the feeder holds no decoder.
pub(crate) struct Feeder<D: Decode, I> {
    pub(crate) control: Arc<Control>,
    pub(crate) slots: Arc<HostSlots>,
    pub(crate) samples: Arc<SampleCells<D::Sample>>,
    pub(crate) source: I,
    pub(crate) per_batch: usize,
    pub(crate) last_batch: LastBatch,
    pub(crate) decoder: PhantomData<fn() -> D>,
}

/// How gathering one batch ended.
enum Gathered {
    /// `per_batch` samples.
    Full,
    /// Fewer: the next sample belongs to the next epoch (it is carried over).
    EpochEnd,
    /// Fewer: the source ended.
    SourceEnd,
    /// The source panicked.
    Failed(Error),
}

impl<D: Decode, I: Iterator<Item = D::Sample>> Feeder<D, I> {
    /// Gathers batch after batch until the source ends, it panics, a batch fails, or the
    /// pipeline stops. For batch `k`: waits for FREE(k), takes the slot (FILLING(k)), pulls
    /// up to `per_batch` samples into its cells (with their ids, where the samples carry
    /// them: a batch then ends early rather than span two epochs), then hands it to the
    /// decode workers (DECODING(k)). When the source ends it publishes END on the next
    /// batch's slot (once that slot is free); a panic in the source becomes FAILED(k). A
    /// short batch is delivered or dropped as [`LastBatch`] says, at the end of the source
    /// and at the end of each epoch alike.
    pub(crate) fn run(self) {
        let Feeder {
            control,
            slots,
            samples,
            source,
            per_batch,
            last_batch,
            decoder: _,
        } = self;
        let mut source = source.fuse();
        let times = &control.counters.source;
        let wakes = |k: u64| [control.decoders(k), &*control.copier];
        // A sample pulled for a batch it did not belong to (the next epoch's first).
        let mut carried: Option<D::Sample> = None;
        let mut k: u64 = 0;
        loop {
            if !wait_free(&control, &slots, k) {
                return;
            }
            let t = native::Instant::now();
            let span = control.span_start();
            // SAFETY: this is the feeder, and batch k's slot is FREE(k) (just waited for).
            let mut fill = unsafe { slots.begin_fill(k, &samples) };
            let (n, gathered) = loop {
                let mut n = 0;
                let mut epoch = None;
                fill.clear_description();
                let gathered = loop {
                    if n == per_batch {
                        break Gathered::Full;
                    }
                    let sample = match carried.take() {
                        Some(sample) => sample,
                        None => match catch_unwind(AssertUnwindSafe(|| source.next())) {
                            Ok(Some(sample)) => sample,
                            Ok(None) => break Gathered::SourceEnd,
                            Err(payload) => {
                                break Gathered::Failed(Error::SourcePanic {
                                    seq: k,
                                    sample: n,
                                    message: panic_message(&*payload),
                                })
                            }
                        },
                    };
                    if let Some((_, e)) = D::identify(&sample)
                        && *epoch.get_or_insert(e) != e
                    {
                        carried = Some(sample);
                        break Gathered::EpochEnd;
                    }
                    let mut describe = fill.describe();
                    D::describe(&sample, &mut describe);
                    if let Some(source_batch) = describe.said_batch_size()
                        && source_batch != per_batch as u64
                    {
                        break Gathered::Failed(Error::Config(ConfigError::SourceBatchSize {
                            source_batch,
                            config_batch: per_batch,
                        }));
                    }
                    fill.put(n, sample);
                    n += 1;
                    if control.stopped() {
                        return;
                    }
                };
                // An epoch's short last batch, dropped: gather again into the same slot.
                if matches!(gathered, Gathered::EpochEnd) && last_batch == LastBatch::Drop {
                    continue;
                }
                fill.set_epoch(epoch);
                break (n, gathered);
            };
            times.busy_since(t);
            match gathered {
                Gathered::Failed(error) => {
                    control.record_failure(k, error);
                    fill.fail(&wakes(k));
                    control.limit_to(k);
                    return;
                }
                Gathered::SourceEnd
                    if n == 0 || (n < per_batch && last_batch == LastBatch::Drop) =>
                {
                    fill.end(&wakes(k));
                    control.limit_to(k);
                    return;
                }
                _ => {}
            }
            control.span(span, Kind::Source, Track::Source, k, n as u32);
            fill.hand_to_decoders(n, control.decoders(k));
            k += 1;
            if matches!(gathered, Gathered::SourceEnd) {
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
