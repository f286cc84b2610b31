//! The copy thread: moves decoded batches to device slots, in sequence order.

use std::time::{Duration, Instant};

use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::park::Waited;
use crate::shared::{Shared, Token};
use crate::slot::{DeviceState, HostState};
use crate::sync::spsc::Producer;

/// How long the copy thread parks between polls of copy completion on backends that do
/// not wake it.
const POLL: Duration = Duration::from_micros(20);

/// Runs until the source ends, a batch fails, the backend fails, or the pipeline stops.
///
/// For batch `k` (host slot `h = k % H`, device slot `d = k % D`):
/// 1. waits for `FILLED(k)` on `h` (Acquire: the decoded bytes and count);
/// 2. waits for `d` to be `FREE(k)` (first use) or `RELEASED(k - D)` (Acquire: the
///    captured fence, which was recorded before that Release store — invariant 2);
/// 3. enqueues the stream-side wait on that fence, publishes `COPYING(k)` on `d` and
///    `IN_FLIGHT(k)` on `h`, enqueues the H2D and READY(d)/COPIED(h) records;
/// 4. publishes `LEASED(k)` on `d`, pushes the token and wakes the consumer.
///
/// Independently it retires copies in order: once COPIED(h) of the oldest batch in
/// flight has completed, `h` becomes `FREE(k + H)` and the feeder is woken — never
/// before, so no byte of a host slot is written while an H2D from it may run
/// (invariant 1).
pub(crate) fn run<B: Backend>(shared: &Shared<B>, mut ready: Producer<Token>) {
    let (host_slots, device_slots) = (shared.host_slots() as u64, shared.device_slots() as u64);
    let times = &shared.counters.copy;
    let mut next: u64 = 0;
    let mut retired: u64 = 0;
    let outcome: Result<Token> = loop {
        let t = Instant::now();
        if let Err(e) = retire(shared, &mut retired, next) {
            break Err(e);
        }
        let h = (next % host_slots) as usize;
        let d = (next % device_slots) as usize;
        match shared.host[h].state() {
            (seq, HostState::End) if seq == next => break Ok(Token::End),
            (seq, HostState::Failed) if seq == next => break Ok(Token::Failed),
            (seq, HostState::Filled) if seq == next && device_free(shared, d, next) => {
                if let Err(e) = copy_one(shared, &mut ready, next, h, d) {
                    break Err(e);
                }
                times.busy_since(t);
                next += 1;
                continue;
            }
            _ => {}
        }
        times.busy_since(t);
        let t = Instant::now();
        let progress = |retired: u64| {
            let (seq, state) = shared.host[h].state();
            let host_ready = seq == next
                && matches!(
                    state,
                    HostState::Filled | HostState::End | HostState::Failed
                );
            (host_ready && (state != HostState::Filled || device_free(shared, d, next)))
                || (retired < next
                    && shared
                        .backend
                        .copied((retired % host_slots) as usize)
                        .unwrap_or(true))
        };
        let waited = if !B::NOTIFIES_COPY_DONE && retired < next {
            // Copies in flight and no completion wake-up: poll with short parks.
            shared.copier.wait(
                shared.spin,
                Some(Instant::now() + POLL),
                || progress(retired),
                || shared.stopped(),
            )
        } else {
            shared.wait(&shared.copier, || progress(retired))
        };
        times.waited_since(t);
        if waited == Waited::Stopped {
            return;
        }
    };
    let token = match outcome {
        Ok(token) => token,
        Err(error) => {
            shared.record_failure(next, error);
            shared.halt();
            Token::Failed
        }
    };
    // Capacity D + 1 holds at most D batch tokens (one per device slot) and this one.
    let pushed = ready.push(token);
    debug_assert!(pushed.is_ok(), "ready ring full at the terminal token");
    shared.consumer.wake();
}

/// Whether device slot `d` can take batch `k`: never used (`FREE(k)`) or its previous
/// batch released (`RELEASED(k - D)`). Acquire, through the stamp load.
#[inline]
fn device_free<B: Backend>(shared: &Shared<B>, d: usize, k: u64) -> bool {
    match shared.device[d].state() {
        (seq, DeviceState::Free) => seq == k,
        (seq, DeviceState::Released) => seq + shared.device_slots() as u64 == k,
        _ => false,
    }
}

/// Steps 3 and 4 of [`run`] for batch `k`.
fn copy_one<B: Backend>(
    shared: &Shared<B>,
    ready: &mut Producer<Token>,
    k: u64,
    h: usize,
    d: usize,
) -> Result<()> {
    let dslot = &shared.device[d];
    let hslot = &shared.host[h];
    // SAFETY: device slot d is RELEASED(k - D) or FREE(k) (checked by the caller with an
    // Acquire load): the releasing thread is done with the fence cell and nobody else
    // touches it until this thread publishes LEASED(k).
    let fence = dslot.fence.with_mut(|f| unsafe { (*f).take() });
    if let Some(fence) = fence {
        shared.backend.wait_fence(d, fence)?;
    }
    dslot.stamp.publish(k, DeviceState::Copying as u8);
    // SAFETY: host slot h is FILLED(k) (Acquired by the caller); the feeder wrote the
    // count before publishing DECODING(k) and nobody writes it until FREE(k + H).
    let samples = hslot.count.with(|c| unsafe { *c });
    hslot.stamp.publish(k, HostState::InFlight as u8);
    shared
        .backend
        .copy(k, h, d, samples * shared.sample_bytes)?;
    dslot.stamp.publish(k, DeviceState::Leased as u8);
    ready
        .push(Token::Batch {
            seq: k,
            slot: d,
            samples,
        })
        .map_err(|_| Error::Backend {
            call: "ready ring push",
            code: 0,
            message: "ready ring full".into(),
        })?;
    shared.consumer.wake();
    Ok(())
}

/// Frees the host slots of every in-flight copy that has completed, oldest first.
fn retire<B: Backend>(shared: &Shared<B>, retired: &mut u64, next: u64) -> Result<()> {
    let host_slots = shared.host_slots() as u64;
    while *retired < next {
        let h = (*retired % host_slots) as usize;
        #[cfg(not(pinring_loom))]
        let copied = shared.backend.copied(h)?;
        // Seeded bug (models only): the slot freed before its copy completes.
        #[cfg(pinring_loom)]
        let copied = crate::loom_api::mutated(crate::loom_api::Mutation::FreeBeforeCopied)
            || shared.backend.copied(h)?;
        if !copied {
            break;
        }
        shared.host[h]
            .stamp
            .publish(*retired + host_slots, HostState::Free as u8);
        shared.feeder.wake();
        *retired += 1;
    }
    Ok(())
}
