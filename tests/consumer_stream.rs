//! The consumer stream declared once (`ConfigBuilder::consumer_stream`) and `Fence::Bound`,
//! on the cpu backend: every `pop` makes the declared stream wait for its batch and binds
//! the batch to it, and a release with `Fence::Bound` (or a drop) fences the slot's reuse
//! on it.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{check_batch, decoder, holds, Gate, BOUND};
use pinring::{Config, ConfigBuilder, CpuOptions, CpuStream, Error, Fence, Pipeline};

const SAMPLE: usize = 96;
const PER: usize = 2;
/// How many times a test looks for a copy that a sound fence keeps from happening.
const LOOKS: usize = 20_000;

fn builder() -> ConfigBuilder {
    Config::builder()
        .batch_size(PER)
        .bytes_per_sample(SAMPLE)
        .decode_threads(2)
        .pop_timeout(BOUND)
}

/// One device slot, two batches. Batch 0 is popped (never `wait_on`'d: `pop` binds it to
/// the declared stream) and read by a "kernel" on the declared stream: one read at once
/// (the stream waited for the batch's copy), one after a gate the test holds closed while
/// it releases the batch with `Fence::Bound` (`release`) or drops it. Batch 1's copy into
/// the same slot must wait for the gated read. Returns whether both reads saw batch 0.
fn declared_stream_reader_sees_its_batch(release: bool) -> bool {
    let stream = CpuStream::new();
    // Slow copies: a stream that did not wait for the copy would read before it landed.
    let slow =
        CpuOptions::default().copy_delay(Duration::from_micros(500), Duration::from_millis(2), 3);
    let config = builder()
        .device_slots(1)
        .host_slots(2)
        .backend::<pinring::Cpu>(slow)
        .consumer_stream(stream.clone())
        .build()
        .unwrap();
    assert!(config.consumer_stream().is_some());
    let mut p = Pipeline::new(config, decoder(), 0..2 * PER as u64).unwrap();
    let first = p.pop().unwrap().unwrap();
    let ptr = first.device_ptr().as_ptr() as usize;
    let (at_once, after_gate) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let gate = Gate::new();
    {
        let (at_once, after_gate, gate) = (at_once.clone(), after_gate.clone(), gate.clone());
        stream.enqueue(move || {
            // SAFETY: `PER * SAMPLE` bytes of a device slot, alive as long as the pipeline
            // (which outlives the stream's work: the test synchronizes the stream first).
            let intact = unsafe { holds(ptr, PER * SAMPLE, 0, PER, SAMPLE) };
            at_once.store(intact, Ordering::Release);
            gate.pass();
            // SAFETY: as above; when the protocol is broken the copy thread may be
            // writing them now, which is what the test detects.
            let intact = unsafe { holds(ptr, PER * SAMPLE, 0, PER, SAMPLE) };
            after_gate.store(intact, Ordering::Release);
        });
    }
    gate.arrived(1);
    if release {
        first.release(Fence::Bound).unwrap();
    } else {
        drop(first);
    }
    // Batch 1's copy is enqueued behind the fence on the declared stream, still held at
    // the gate; unfenced, it would overwrite the slot now. Give such a copy the time to
    // land (and its host slot to be retired) before the gate opens, so that the read
    // behind the gate would see it; fenced, this ends after its bounded number of looks
    // (it only lets a broken fence show itself, and cannot fail a sound one).
    let second = p.pop().unwrap().unwrap();
    assert_eq!((second.seq(), second.slot()), (1, 0));
    for _ in 0..LOOKS {
        if p.stats().host_slots[1].0 > 1 {
            break; // batch 1's copy completed and its host slot was reused: unfenced
        }
        std::thread::yield_now();
    }
    gate.open();
    check_batch(second.bytes(), 1, PER, SAMPLE, PER);
    second.release(Fence::Bound).unwrap();
    assert!(p.pop().unwrap().is_none());
    stream.synchronize().unwrap();
    at_once.load(Ordering::Acquire) && after_gate.load(Ordering::Acquire)
}

#[test]
fn a_reader_on_the_declared_stream_waits_for_the_batch_and_is_fenced_by_fence_bound() {
    assert!(
        declared_stream_reader_sees_its_batch(true),
        "the declared stream read another batch than the one popped"
    );
}

#[test]
fn a_dropped_batch_is_fenced_on_the_declared_stream() {
    assert!(
        declared_stream_reader_sees_its_batch(false),
        "the drop let the next copy in before the declared stream's read"
    );
}

/// `Fence::Bound` fences on the streams `wait_on` bound (no declared stream needed), and
/// a batch bound to none is refused, handed back still leased.
#[test]
fn fence_bound_covers_wait_on_bindings_and_refuses_an_unbound_batch() {
    let config = builder().device_slots(2).build().unwrap();
    assert!(config.consumer_stream().is_none());
    let mut p = Pipeline::new(config, decoder(), 0..2 * PER as u64).unwrap();
    let unbound = p.pop().unwrap().unwrap();
    let refused = unbound.release(Fence::Bound).unwrap_err();
    assert!(
        matches!(refused.error, Error::Fence(_)),
        "{:?}",
        refused.error
    );
    assert!(refused.error.to_string().contains("bound to no stream"));
    let unbound = refused.batch;
    check_batch(unbound.bytes(), 0, PER, SAMPLE, PER);
    unbound.release(Fence::Sync).unwrap();

    let stream = CpuStream::new();
    let mut bound = p.pop().unwrap().unwrap();
    bound.wait_on(&stream).unwrap();
    bound.release(Fence::Bound).unwrap();
    assert!(p.pop().unwrap().is_none());
    stream.synchronize().unwrap();
}

/// The declared stream belongs to the backend chosen before it: switching backends
/// afterwards forgets it.
#[test]
fn switching_backends_forgets_the_declared_stream() {
    let config = builder()
        .consumer_stream(CpuStream::new())
        .backend::<pinring::Cpu>(CpuOptions::default())
        .build()
        .unwrap();
    assert!(config.consumer_stream().is_none());
}
