//! The feeder thread: pulls samples from the source iterator, one batch per host slot.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use crate::backend::Backend;
use crate::config::LastBatch;
use crate::error::{panic_message, Error};
use crate::park::Waited;
use crate::shared::{SampleBuffers, Shared};
use crate::slot::HostState;

/// Gathers batch after batch until the source ends, it panics, a decode fails, or the
/// pipeline stops. For batch `k` in host slot `h = k % H`:
/// waits for `FREE(k)`, publishes `FILLING(k)`, pulls up to `samples_per_batch` samples
/// into buffer `h`, writes the count, publishes `DECODING(k)` (Release: the samples and
/// count go with it) and wakes the decoder. When the source ends it publishes `END(k)`
/// on the next batch's slot (once that slot is free).
pub(crate) fn run<B: Backend, S, I: Iterator<Item = S>>(
    shared: &Shared<B>,
    buffers: &SampleBuffers<S>,
    samples: I,
    last_batch: LastBatch,
) {
    let mut samples = samples.fuse();
    let per_batch = shared.samples_per_batch;
    let slots = shared.host_slots();
    let times = &shared.counters.source;
    let mut k: u64 = 0;
    loop {
        let h = (k % slots as u64) as usize;
        let slot = &shared.host[h];
        let t = Instant::now();
        if shared.wait_unless_halted(&shared.feeder, || slot.stamp.is(k, HostState::Free as u8))
            != Waited::Ready
        {
            return;
        }
        let t = times.waited_since(t);
        slot.stamp.publish(k, HostState::Filling as u8);
        // SAFETY: this thread owns host slot h: it is FILLING(k), published just above.
        let gathered = unsafe {
            buffers.with_mut(h, |buf| {
                buf.clear();
                while buf.len() < per_batch {
                    match catch_unwind(AssertUnwindSafe(|| samples.next())) {
                        Ok(Some(sample)) => buf.push(Some(sample)),
                        Ok(None) => break,
                        Err(payload) => {
                            return Err(Error::SourcePanic {
                                seq: k,
                                sample: buf.len(),
                                message: panic_message(&*payload),
                            })
                        }
                    }
                    if shared.stopped() {
                        return Ok(None);
                    }
                }
                Ok(Some(buf.len()))
            })
        };
        times.busy_since(t);
        let n = match gathered {
            Ok(Some(n)) => n,
            Ok(None) => return,
            Err(error) => {
                shared.record_failure(k, error);
                slot.stamp.publish(k, HostState::Failed as u8);
                shared.decoder.wake();
                shared.copier.wake();
                return;
            }
        };
        if n == 0 || (n < per_batch && last_batch == LastBatch::Drop) {
            end_at(shared, k);
            return;
        }
        slot.count.with_mut(|c| {
            // SAFETY: this thread owns host slot h (FILLING(k)).
            unsafe { *c = n }
        });
        slot.stamp.publish(k, HostState::Decoding as u8);
        shared.decoder.wake();
        k += 1;
        if n < per_batch {
            let next = &shared.host[(k % slots as u64) as usize];
            if shared.wait_unless_halted(&shared.feeder, || next.stamp.is(k, HostState::Free as u8))
                == Waited::Ready
            {
                end_at(shared, k);
            }
            return;
        }
    }
}

/// Publishes `END(k)` on batch `k`'s host slot, which the feeder owns (FREE(k) or FILLING(k)).
fn end_at<B: Backend>(shared: &Shared<B>, k: u64) {
    let slot = &shared.host[(k % shared.host_slots() as u64) as usize];
    slot.stamp.publish(k, HostState::End as u8);
    shared.decoder.wake();
    shared.copier.wake();
}
