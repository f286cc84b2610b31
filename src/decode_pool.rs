//! The decode pool: a rayon pool whose dispatcher job decodes batches in sequence order.
//!
//! The dispatcher is one long-running job on the pool (spawned once at start-up). For
//! each batch it waits for `DECODING(k)`, then decodes the batch's samples in parallel
//! with a `par_iter_mut` over the slot's sample buffer: rayon's `join` splits the work
//! onto the other workers' deques without allocating, so the steady state allocates
//! nothing. Each sample is decoded straight into its range of the pinned host slot.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

#[cfg(not(pinring_loom))]
use rayon::prelude::*;

// Models decode serially: loom cannot see rayon's threads.
#[cfg(pinring_loom)]
use crate::loom_api::SerialIterMut as _;

use crate::backend::Backend;
use crate::decode::Decode;
use crate::error::{panic_message, Error};
use crate::park::Waited;
use crate::shared::{SampleBuffers, Shared};
use crate::slot::HostState;

/// Builds the pool: `threads` workers named `pinring-decode-{i}`, worker `i` pinned to
/// `cores[i % cores.len()]` when cores are given. `on_exit` runs as each worker ends.
pub(crate) fn build_pool(
    threads: usize,
    cores: &[usize],
    on_exit: impl Fn() + Send + Sync + 'static,
) -> Result<rayon::ThreadPool, Error> {
    let cores = cores.to_vec();
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("pinring-decode-{i}"))
        .start_handler(move |i| {
            if !cores.is_empty() {
                core_affinity::set_for_current(core_affinity::CoreId {
                    id: cores[i % cores.len()],
                });
            }
        })
        .exit_handler(move |_| on_exit())
        .build()
        .map_err(|e| Error::Spawn {
            thread: "decode pool",
            source: Box::new(e),
        })
}

/// The dispatcher: decodes batches in order until the source ends, a batch fails, or the
/// pipeline stops. For batch `k` in host slot `h`: waits for `DECODING(k)` (Acquire: the
/// samples and count come with it), decodes, then publishes `FILLED(k)` (Release: the
/// decoded bytes go with it) and wakes the copy thread. On failure it records the error,
/// publishes `FAILED(k)`, halts the feeder and returns.
pub(crate) fn run<B: Backend, D: Decode>(
    shared: &Shared<B>,
    buffers: &SampleBuffers<D::Sample>,
    decoder: &D,
) {
    let slots = shared.host_slots();
    let sample_bytes = shared.sample_bytes;
    let times = &shared.counters.decode;
    let mut k: u64 = 0;
    loop {
        let h = (k % slots as u64) as usize;
        let slot = &shared.host[h];
        let t = Instant::now();
        let mut state = HostState::Free;
        let waited = shared.wait(&shared.decoder, || {
            let (seq, s) = slot.state();
            state = s;
            seq == k && matches!(s, HostState::Decoding | HostState::End | HostState::Failed)
        });
        if waited != Waited::Ready || state != HostState::Decoding {
            return;
        }
        let t = times.waited_since(t);
        // SAFETY: the dispatcher owns host slot h: its stamp is DECODING(k).
        let n = slot.count.with(|c| unsafe { *c });
        let ring = &*shared.ring;
        let decode_all = |buf: &mut Vec<Option<D::Sample>>| {
            buf[..n]
                .par_iter_mut()
                .enumerate()
                .try_for_each(|(j, sample)| {
                    // SAFETY: host slot h is DECODING(k), owned by this dispatcher, so no copy
                    // out of it runs; sample j's range is disjoint from every other sample's,
                    // and each index is visited once.
                    let out = unsafe { ring.slot_mut(h, j * sample_bytes, sample_bytes) };
                    let Some(sample) = sample.take() else {
                        return Ok(());
                    };
                    match catch_unwind(AssertUnwindSafe(|| decoder.decode(sample, out))) {
                        Ok(Ok(())) => Ok(()),
                        Ok(Err(e)) => Err(Error::Decode {
                            seq: k,
                            sample: j,
                            message: e.0,
                        }),
                        Err(payload) => Err(Error::DecoderPanic {
                            seq: k,
                            sample: j,
                            message: panic_message(&*payload),
                        }),
                    }
                })
        };
        // SAFETY: the dispatcher owns host slot h (DECODING(k)) for the whole call.
        let result = unsafe { buffers.with_mut(h, decode_all) };
        times.busy_since(t);
        match result {
            Ok(()) => {
                slot.stamp.publish(k, HostState::Filled as u8);
                shared.copier.wake();
                k += 1;
            }
            Err(error) => {
                shared.record_failure(k, error);
                slot.stamp.publish(k, HostState::Failed as u8);
                #[cfg(pinring_loom)]
                if crate::loom_api::mutated(crate::loom_api::Mutation::FailWithoutWake) {
                    return; // Seeded bug (models only): FAILED published, nobody woken.
                }
                shared.copier.wake();
                shared.halt();
                return;
            }
        }
    }
}
