//! End-to-end behaviour of the pipeline on the cpu backend, through the public API.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use common::{
    check_batch, check_to_end, decoder, holds, Fault, Gate, GatedDecoder, TestDecoder, BOUND,
};
use pinring::{
    Config, ConfigBuilder, CpuEvent, CpuOptions, CpuStream, DeviceState, Error, Fence, HostState,
    LastBatch, Pipeline, TryPop,
};

const SAMPLE: usize = 96;

fn builder(per_batch: usize) -> ConfigBuilder {
    Config::builder()
        .batch_size(per_batch)
        .bytes_per_sample(SAMPLE)
        .decode_threads(2)
        .pop_timeout(BOUND)
}

#[test]
fn hundred_thousand_batches_arrive_intact_and_in_order_under_random_delays() {
    const BATCHES: u64 = 100_000;
    const PER: usize = 3;
    let config = builder(PER)
        .host_slots(5)
        .device_slots(3)
        .spin(Duration::from_micros(5))
        .backend::<pinring::Cpu>(CpuOptions::default().copy_delay(
            Duration::ZERO,
            Duration::from_micros(3),
            7,
        ))
        .build()
        .unwrap();
    let dec = TestDecoder {
        delay_every: 50,
        delay: Duration::from_micros(30),
        ..decoder()
    };
    let mut p = Pipeline::new(config, dec, 0..BATCHES * PER as u64).unwrap();
    let mut expected = 0;
    while let Some(batch) = p.pop().unwrap() {
        assert_eq!(batch.seq(), expected, "order");
        assert_eq!(batch.samples(), PER);
        check_batch(batch.bytes(), batch.seq(), PER, SAMPLE, PER);
        batch.release(Fence::Sync).unwrap();
        expected += 1;
    }
    assert_eq!(expected, BATCHES);
    let stats = p.stats();
    assert_eq!(stats.batches, BATCHES);
    assert_eq!(stats.bytes, BATCHES * (PER * SAMPLE) as u64);
}

#[test]
fn releases_out_of_order_from_other_threads_with_every_fence_form() {
    const PER: usize = 4;
    let config = builder(PER)
        .device_slots(4)
        .backend::<pinring::Cpu>(CpuOptions::default().copy_delay(
            Duration::ZERO,
            Duration::from_micros(200),
            3,
        ))
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..400 * PER as u64).unwrap();
    let stream = CpuStream::new();
    let event = CpuEvent::new();
    let (to_releaser, releaser_inbox) = mpsc::channel::<pinring::Batch>();
    let releaser = std::thread::spawn(move || {
        let stream = CpuStream::new();
        let mut n = 0;
        for batch in releaser_inbox {
            n += 1;
            match n % 2 {
                0 => batch.release(Fence::Stream(&stream)).unwrap(),
                _ => drop(batch),
            }
        }
        n
    });
    let mut held = Vec::new();
    let mut seen = 0u64;
    let mut sent = 0;
    while let Some(mut batch) = p.pop().unwrap() {
        assert_eq!(batch.seq(), seen);
        seen += 1;
        check_batch(batch.bytes(), batch.seq(), PER, SAMPLE, PER);
        batch.wait_on(&stream).unwrap();
        held.push(batch);
        if held.len() == 4 {
            // Release the four in reverse order, each a different way.
            let d = held.pop().unwrap();
            let c = held.pop().unwrap();
            let b = held.pop().unwrap();
            let a = held.pop().unwrap();
            to_releaser.send(d).unwrap();
            stream.record(&event);
            c.release(Fence::Event(&event)).unwrap();
            b.release(Fence::Stream(&stream)).unwrap();
            to_releaser.send(a).unwrap();
            sent += 2;
        }
    }
    drop(to_releaser);
    assert_eq!(releaser.join().unwrap(), sent);
    assert_eq!(seen, 400);
}

/// With D batches held, the copy thread must stall rather than overwrite them.
#[test]
fn holding_every_device_slot_stalls_the_copy_thread_instead_of_overwriting() {
    const PER: usize = 2;
    const D: usize = 3;
    let config = builder(PER)
        .device_slots(D)
        .host_slots(6)
        .backend::<pinring::Cpu>(CpuOptions::default().copy_delay(
            Duration::ZERO,
            Duration::from_micros(500),
            11,
        ))
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..40 * PER as u64).unwrap();
    let mut seq = 0;
    loop {
        let mut held: Vec<_> = (0..D).filter_map(|_| p.pop().unwrap()).collect();
        if held.is_empty() {
            break;
        }
        // Give the pipeline every chance to overwrite the slots we hold.
        std::thread::sleep(Duration::from_millis(5));
        assert!(matches!(
            p.try_pop().unwrap(),
            TryPop::NotReady | TryPop::End
        ));
        let stats = p.stats();
        assert!(
            held.len() < D
                || stats
                    .device_slots
                    .iter()
                    .all(|&(_, s)| s == DeviceState::Leased),
            "{stats:?}"
        );
        for b in &held {
            assert_eq!(b.seq(), seq);
            check_batch(b.bytes(), b.seq(), b.samples(), SAMPLE, PER);
            seq += 1;
        }
        held.drain(..).for_each(drop);
    }
    assert_eq!(seq, 40);
}

/// With eight device slots a release wakes the copy thread only once four wait
/// (src/slot/release_wake.rs): a consumer that holds seven batches and released one must
/// still get the next batch, from `pop` (which asks for it) and from a `try_pop` loop;
/// and every batch arrives whole, in order, while releases come one at a time.
#[test]
fn a_consumer_holding_leases_gets_its_batch_though_few_slots_were_released() {
    const PER: usize = 2;
    const D: usize = 8;
    const BATCHES: u64 = 64;
    for polled in [false, true] {
        let config = builder(PER).device_slots(D).host_slots(16).build().unwrap();
        let mut p = Pipeline::new(config, decoder(), 0..BATCHES * PER as u64).unwrap();
        let mut held = std::collections::VecDeque::new();
        let mut seq = 0;
        while seq < BATCHES {
            // Hold D - 1 leases: one slot released at a time, below the threshold.
            while held.len() >= D - 1 {
                let b: pinring::Batch = held.pop_front().unwrap();
                b.release(Fence::Sync).unwrap();
            }
            let batch = if polled {
                let deadline = std::time::Instant::now() + BOUND;
                loop {
                    match p.try_pop().unwrap() {
                        TryPop::Batch(b) => break b,
                        TryPop::End => panic!("ended at batch {seq}"),
                        TryPop::NotReady => {
                            assert!(
                                std::time::Instant::now() < deadline,
                                "batch {seq} never came"
                            );
                            std::thread::yield_now();
                        }
                    }
                }
            } else {
                p.pop().unwrap().expect("a batch")
            };
            assert_eq!(batch.seq(), seq);
            check_batch(batch.bytes(), batch.seq(), batch.samples(), SAMPLE, PER);
            held.push_back(batch);
            seq += 1;
        }
        held.drain(..).for_each(drop);
        assert!(p.pop().unwrap().is_none());
    }
}

/// With eight device slots a release wakes the copy thread only once four wait: a consumer
/// that pops every batch, releases three (fewer than that) and then only watches `stats()`
/// (no pop asks for more) still sees those slots refilled, because the copy thread's wait
/// for a device slot looks again on its own (src/slot/release_wake.rs).
#[test]
fn slots_released_below_the_wake_threshold_refill_without_a_pop() {
    const PER: usize = 2;
    const D: usize = 8;
    let config = builder(PER).device_slots(D).host_slots(16).build().unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..(4 * D * PER) as u64).unwrap();
    let leased = |p: &Pipeline| {
        p.stats()
            .device_slots
            .iter()
            .filter(|&&(_, s)| s == DeviceState::Leased)
            .count()
    };
    let mut held: Vec<_> = (0..D).map(|_| p.pop().unwrap().expect("a batch")).collect();
    // Time for the copy thread to give up its spin (30 µs) and park, the case where a
    // release below the threshold wakes no one. Correctness does not rest on it: the
    // slots must refill whether it parked or not.
    std::thread::sleep(Duration::from_millis(50));
    for b in held.drain(..3) {
        b.release(Fence::Sync).unwrap();
    }
    let deadline = std::time::Instant::now() + BOUND;
    // Five held, three refilled: every slot leased (held ones count as leased too).
    while leased(&p) < D {
        assert!(
            std::time::Instant::now() < deadline,
            "the three released slots were never refilled: {:?}",
            p.stats().device_slots
        );
        std::thread::yield_now();
    }
    for (i, b) in held.iter().enumerate() {
        assert_eq!(b.seq(), 3 + i as u64);
    }
    drop(held);
    let mut seq = D as u64;
    while let Some(b) = p.pop().unwrap() {
        assert_eq!(b.seq(), seq);
        check_batch(b.bytes(), b.seq(), b.samples(), SAMPLE, PER);
        seq += 1;
    }
    assert_eq!(seq, 4 * D as u64);
}

/// Enqueues on `stream` a "kernel" that reads `first`'s device slot (batch 0, of `per`
/// samples); the flag, once the stream has run it, says whether it saw batch 0 whole.
fn read_batch_0_on(stream: &CpuStream, first: &pinring::Batch, per: usize) -> Arc<AtomicBool> {
    let intact = Arc::new(AtomicBool::new(false));
    let read = intact.clone();
    let (ptr, len) = (first.device_ptr().as_ptr() as usize, first.len());
    stream.enqueue(move || {
        // SAFETY: `len` bytes of device slot 0, which lives as long as the pipeline;
        // unfenced, the copy thread may be writing them, the bug the callers show.
        let intact = unsafe { holds(ptr, len, 0, per, SAMPLE) };
        read.store(intact, Ordering::Release);
    });
    intact
}

/// A "kernel" on a user stream reads the slot after a delay. Fenced on that stream, the
/// next copy into the slot waits for it; released with a false `Fence::Sync`, the next
/// copy overwrites the slot first, and the kernel sees the wrong batch — so the check can
/// fail.
fn kernel_reads_slot_after_release(fenced: bool) -> bool {
    const PER: usize = 2;
    let config = builder(PER).device_slots(1).host_slots(2).build().unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..2 * PER as u64).unwrap();
    let stream = CpuStream::new();
    let gate = CpuEvent::new();
    let gate_stream = CpuStream::new();
    // The gate completes only when the test says so: its stream waits on a flag.
    let open = Arc::new(AtomicBool::new(false));
    {
        let open = open.clone();
        gate_stream.enqueue(move || {
            while !open.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_micros(100));
            }
        });
    }
    gate_stream.record(&gate);

    let mut first = p.pop().unwrap().unwrap();
    first.wait_on(&stream).unwrap();
    if fenced {
        stream.sleep(Duration::from_millis(30));
    } else {
        stream.wait_event(&gate);
    }
    let intact = read_batch_0_on(&stream, &first, PER);
    if fenced {
        first.release(Fence::Stream(&stream)).unwrap();
    } else {
        first.release(Fence::Sync).unwrap();
    }
    let second = p.pop().unwrap().unwrap();
    assert_eq!(second.slot(), 0);
    if !fenced {
        // Batch 1's copy into slot 0 has completed; only now may the kernel run.
        second.synchronize().unwrap();
        open.store(true, Ordering::Release);
    }
    second.synchronize().unwrap();
    // Never leave the gate closed: a conservative fence (an unbound drop anywhere in the
    // process) synchronizes every CpuStream, this one too.
    open.store(true, Ordering::Release);
    stream.synchronize().unwrap();
    check_batch(second.bytes(), 1, PER, SAMPLE, PER);
    second.release(Fence::Sync).unwrap();
    intact.load(Ordering::Acquire)
}

#[test]
fn stream_fence_keeps_the_slot_until_the_kernel_has_read_it() {
    assert!(kernel_reads_slot_after_release(true));
}

#[test]
fn a_false_sync_fence_lets_the_next_copy_overwrite_a_slot_still_being_read() {
    assert!(
        !kernel_reads_slot_after_release(false),
        "the unfenced kernel should have seen batch 1's bytes"
    );
}

#[test]
fn batches_can_be_released_from_another_thread_after_the_pipeline_is_dropped() {
    let config = builder(2).build().unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..100u64).unwrap();
    let a = p.pop().unwrap().unwrap();
    let b = p.pop().unwrap().unwrap();
    drop(p);
    let t = std::thread::spawn(move || {
        check_batch(b.bytes(), 1, 2, SAMPLE, 2);
        b.release(Fence::Sync).unwrap();
        check_batch(a.bytes(), 0, 2, SAMPLE, 2);
        drop(a);
    });
    t.join().unwrap();
}

/// Runs a pipeline of `per`-sample batches whose decoder faults (`fault`, a
/// `Fault::FailAt` or `Fault::PanicAt`) on sample `sample` of batch `seq`: every earlier
/// batch arrives whole and in order, later pops report a stopped pipeline; returns the
/// error `pop` reported.
fn fault_in_batch(fault: fn(u64) -> Fault, per: usize, seq: u64, sample: u64) -> Error {
    let dec = TestDecoder {
        fault: fault(seq * per as u64 + sample),
        ..decoder()
    };
    let config = builder(per).build().unwrap();
    let mut p = Pipeline::new(config, dec, 0..1000).unwrap();
    let mut delivered = 0;
    let error = loop {
        match p.pop() {
            Ok(Some(batch)) => {
                assert_eq!(batch.seq(), delivered);
                check_batch(batch.bytes(), batch.seq(), per, SAMPLE, per);
                delivered += 1;
            }
            Ok(None) => panic!("source ended without the injected failure"),
            Err(e) => break e,
        }
    };
    assert_eq!(delivered, seq, "the batches before the fault");
    assert!(
        matches!(p.pop(), Err(Error::Stopped)),
        "later pops report a stopped pipeline"
    );
    assert!(matches!(p.try_pop(), Err(Error::Stopped)));
    error
}

#[test]
fn a_decode_error_surfaces_with_its_batch_and_sample_after_every_earlier_batch() {
    match fault_in_batch(Fault::FailAt, 5, 7, 3) {
        Error::Decode {
            seq: 7,
            sample: 3,
            message,
        } => assert!(message.contains("corrupt"), "{message}"),
        other => panic!("expected the decode error of batch 7, sample 3, got {other:?}"),
    }
}

#[test]
fn a_decoder_panic_is_caught_and_reported_with_its_batch_and_sample() {
    match fault_in_batch(Fault::PanicAt, 4, 12, 2) {
        Error::DecoderPanic {
            seq: 12,
            sample: 2,
            message,
        } => assert!(message.contains("decoder bug on sample 50"), "{message}"),
        other => panic!("expected the decoder panic of batch 12, sample 2, got {other:?}"),
    }
}

#[test]
fn a_source_panic_is_caught_and_reported_with_its_batch_and_sample() {
    let config = builder(4).build().unwrap();
    let source = (0..1000u64).map(|g| {
        if g == 4 * 9 + 1 {
            panic!("source broke at {g}")
        } else {
            g
        }
    });
    let mut p = Pipeline::new(config, decoder(), source).unwrap();
    for seq in 0..9 {
        let b = p.pop().unwrap().unwrap();
        check_batch(b.bytes(), seq, 4, SAMPLE, 4);
    }
    match p.pop() {
        Err(Error::SourcePanic {
            seq: 9,
            sample: 1,
            message,
        }) => assert!(message.contains("source broke at 37")),
        other => panic!("expected a source panic, got {other:?}"),
    }
    assert!(matches!(p.pop(), Err(Error::Stopped)));
}

#[test]
fn a_copy_failure_reaches_the_consumer_after_every_earlier_batch() {
    let config = builder(2)
        .backend::<pinring::Cpu>(CpuOptions::default().fail_copy_at(5))
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..100u64).unwrap();
    for seq in 0..5 {
        let b = p.pop().unwrap().unwrap();
        assert_eq!(b.seq(), seq);
    }
    match p.pop() {
        Err(Error::Backend {
            call: "cpu copy",
            message,
            ..
        }) => assert!(message.contains("batch 5")),
        other => panic!("expected a backend error, got {other:?}"),
    }
    assert!(matches!(p.pop(), Err(Error::Stopped)));
}

#[test]
fn after_a_failure_every_slot_comes_back_once_batches_are_dropped() {
    let config = builder(2).device_slots(2).build().unwrap();
    let mut p = Pipeline::new(
        config,
        TestDecoder {
            fault: Fault::FailAt(9),
            ..decoder()
        },
        0..100u64,
    )
    .unwrap();
    let a = p.pop().unwrap().unwrap();
    let b = p.pop().unwrap().unwrap();
    drop((a, b));
    let mut n = 2;
    let error = loop {
        match p.pop() {
            Ok(Some(_)) => n += 1,
            Ok(None) => panic!("no error"),
            Err(e) => break e,
        }
    };
    assert_eq!(n, 4);
    assert!(matches!(
        error,
        Error::Decode {
            seq: 4,
            sample: 1,
            ..
        }
    ));
    let stats = p.stats();
    assert!(
        stats
            .device_slots
            .iter()
            .all(|&(_, s)| s == DeviceState::Released),
        "{stats:?}"
    );
}

#[test]
fn an_empty_source_ends_at_once() {
    let mut p = Pipeline::new(builder(4).build().unwrap(), decoder(), std::iter::empty()).unwrap();
    assert!(p.pop().unwrap().is_none());
    assert!(p.pop().unwrap().is_none(), "end is sticky");
    assert!(matches!(p.try_pop().unwrap(), TryPop::End));
}

#[test]
fn a_source_shorter_than_one_batch_gives_one_short_batch_or_none() {
    let mut p = Pipeline::new(builder(8).build().unwrap(), decoder(), 0..3u64).unwrap();
    let b = p.pop().unwrap().unwrap();
    assert_eq!((b.seq(), b.samples(), b.len()), (0, 3, 3 * SAMPLE));
    check_batch(b.bytes(), 0, 3, SAMPLE, 8);
    drop(b);
    assert!(p.pop().unwrap().is_none());

    let config = builder(8).last_batch(LastBatch::Drop).build().unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..3u64).unwrap();
    assert!(p.pop().unwrap().is_none());
}

#[test]
fn a_short_last_batch_is_delivered_with_its_true_count_or_dropped() {
    for (mode, expect) in [(LastBatch::Partial, 6), (LastBatch::Drop, 5)] {
        let config = builder(4).last_batch(mode).build().unwrap();
        let mut p = Pipeline::new(config, decoder(), 0..22u64).unwrap();
        let mut n = 0;
        while let Some(b) = p.pop().unwrap() {
            let samples = if b.seq() == 5 { 2 } else { 4 };
            assert_eq!(b.samples(), samples);
            check_batch(b.bytes(), b.seq(), samples, SAMPLE, 4);
            n += 1;
        }
        assert_eq!(n, expect, "{mode:?}");
    }
}

#[test]
fn an_exact_multiple_ends_without_a_short_batch() {
    let mut p = Pipeline::new(builder(4).build().unwrap(), decoder(), 0..20u64).unwrap();
    let mut n = 0;
    while let Some(b) = p.pop().unwrap() {
        assert_eq!(b.samples(), 4);
        n += 1;
    }
    assert_eq!(n, 5);
}

#[test]
fn try_pop_never_blocks_and_sees_every_batch() {
    let config = builder(2).build().unwrap();
    let gate = Gate::new();
    let dec = GatedDecoder {
        gate: gate.clone(),
        inner: decoder(),
    };
    let mut p = Pipeline::new(config, dec, 0..40u64).unwrap();
    // Decode is held at the gate: nothing can be ready, and try_pop says so at once.
    gate.arrived(1);
    assert!(matches!(p.try_pop().unwrap(), TryPop::NotReady));
    gate.open();
    let mut seq = 0;
    loop {
        match p.try_pop().unwrap() {
            TryPop::Batch(b) => {
                assert_eq!(b.seq(), seq);
                check_batch(b.bytes(), b.seq(), 2, SAMPLE, 2);
                seq += 1;
            }
            TryPop::NotReady => std::thread::yield_now(),
            TryPop::End => break,
        }
    }
    assert_eq!(seq, 20);
    assert!(
        matches!(p.try_pop().unwrap(), TryPop::End),
        "the end is sticky"
    );
}

#[test]
fn a_starved_pop_times_out_naming_the_stage_behind() {
    let starved = || {
        Config::builder()
            .batch_size(1)
            .bytes_per_sample(8)
            .pop_timeout(Duration::from_millis(50))
    };

    // Decode is held at a gate (and known to be there): the pop times out naming it.
    let gate = Gate::new();
    let dec = GatedDecoder {
        gate: gate.clone(),
        inner: decoder(),
    };
    let mut p = Pipeline::new(starved().build().unwrap(), dec, 0..10u64).unwrap();
    gate.arrived(1);
    match p.pop() {
        Err(Error::PopTimeout {
            behind: pinring::Stage::Decode,
            waited,
        }) => assert!(waited >= Duration::from_millis(50)),
        other => panic!("expected a decode timeout, got {other:?}"),
    }
    gate.open();
    assert_eq!(p.pop().unwrap().unwrap().seq(), 0, "nothing was lost");
    drop(p);

    // The source is held at a gate inside `next`.
    let gate = Gate::new();
    let held = gate.clone();
    let slow = (0..10u64).inspect(move |_| held.pass());
    let mut p = Pipeline::new(starved().build().unwrap(), decoder(), slow).unwrap();
    gate.arrived(1);
    assert!(matches!(
        p.pop(),
        Err(Error::PopTimeout {
            behind: pinring::Stage::Source,
            ..
        })
    ));
    gate.open();
    assert_eq!(p.pop().unwrap().unwrap().seq(), 0);
    drop(p);

    // The consumer holds every device slot. Its two batches are waited for without the
    // short timeout (a loaded machine may take longer to decode them), and the pop that
    // times out comes once batch 2 is decoded, so nothing but the consumer holds it up.
    let config = starved().device_slots(2).build().unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..10u64).unwrap();
    let _a = p.pop_for(BOUND).unwrap().unwrap();
    let _b = p.pop_for(BOUND).unwrap().unwrap();
    let start = std::time::Instant::now();
    while !p
        .stats()
        .host_slots
        .iter()
        .any(|&(seq, state)| seq == 2 && state == HostState::Filled)
    {
        assert!(start.elapsed() < BOUND, "batch 2 was never decoded");
        std::thread::yield_now();
    }
    match p.pop() {
        Err(Error::PopTimeout {
            behind: pinring::Stage::Consumer,
            ..
        }) => {}
        other => panic!("expected a consumer timeout, got {other:?}"),
    }
}

#[test]
fn stats_count_stages_and_slot_states() {
    let config = builder(4).build().unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..400u64).unwrap();
    let mut n = 0;
    while let Some(b) = p.pop().unwrap() {
        n += 1;
        drop(b);
    }
    let s = p.stats();
    assert_eq!((s.batches, s.bytes, n), (100, 400 * SAMPLE as u64, 100));
    assert!(
        s.decode.busy > Duration::ZERO
            && s.copy.busy > Duration::ZERO
            && s.source.busy > Duration::ZERO
    );
    assert_eq!(s.host_slots.len(), 4);
    assert_eq!(s.device_slots.len(), 2);
    assert!(s.to_string().contains("batches"));
}

/// Decodes batch 0 (one sample a batch) only after batches 1..n have been decoded, so the
/// copy thread finds them all filled at once; fills each sample with its index.
struct LastFirst {
    after: u64,
    decoded: Arc<(std::sync::Mutex<u64>, std::sync::Condvar)>,
}

impl pinring::Decode for LastFirst {
    type Sample = u64;

    fn decode(&self, g: u64, out: &mut [u8]) -> Result<(), pinring::DecodeError> {
        let (lock, cv) = &*self.decoded;
        if g == 0 {
            let mut n = lock.lock().unwrap();
            while *n < self.after {
                n = cv.wait_timeout(n, BOUND).unwrap().0;
            }
        }
        out.fill(g as u8);
        *lock.lock().unwrap() += 1;
        cv.notify_all();
        Ok(())
    }
}

/// Runs 8 batches of one `bytes`-byte sample through 8 host and 8 device slots, batch 0
/// filled last; returns `Stats::copies`.
fn copies_of_eight_batches_filled_together(bytes: usize) -> u64 {
    let config = Config::builder()
        .batch_size(1)
        .bytes_per_sample(bytes)
        .decode_threads(2)
        .host_slots(8)
        .device_slots(8)
        .pop_timeout(BOUND)
        .build()
        .unwrap();
    let decoder = LastFirst {
        after: 7,
        decoded: Default::default(),
    };
    let mut p = Pipeline::new(config, decoder, 0..8u64).unwrap();
    let mut held = Vec::new();
    while let Some(b) = p.pop().unwrap() {
        assert!(
            b.bytes().iter().all(|&x| x == b.seq() as u8),
            "batch {}",
            b.seq()
        );
        held.push(b);
    }
    assert_eq!(held.len(), 8);
    p.stats().copies
}

#[test]
fn small_batches_filled_together_go_in_one_copy_and_large_ones_one_a_copy() {
    // 64 KiB batches: the copy thread finds batch 0 and (nearly always all of) 1..7 filled
    // and moves them in one copy run (two if the last fill lands just after batch 0's).
    let small = copies_of_eight_batches_filled_together(64 << 10);
    assert!(small <= 2, "{small} copy runs for 8 small batches");
    // 3 MiB batches: a run holds one (a run waits for every slot's fence, and its first
    // batch is ready only when its last one has landed).
    let large = copies_of_eight_batches_filled_together(3 << 20);
    assert_eq!(large, 8, "copy runs for 8 large batches");
}

#[test]
fn huge_pages_are_used_or_the_fallback_says_why() {
    let config = builder(4).huge_pages(true).build().unwrap();
    assert_eq!(config.host_stride() % (2 << 20), 0);
    let mut p = Pipeline::new(config, decoder(), 0..40u64).unwrap();
    match p.huge_pages() {
        pinring::HugePages::On => {}
        pinring::HugePages::Fallback(why) => assert!(why.contains("MAP_HUGETLB"), "{why}"),
        pinring::HugePages::Off => panic!("huge pages were asked for"),
    }
    assert_eq!(check_to_end(&mut p, 4, SAMPLE), 10);
}

#[test]
fn decode_threads_can_be_pinned() {
    let cores = core_affinity_count();
    let config = builder(4)
        .decode_cores(0..cores)
        .copy_core(cores - 1)
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..400u64).unwrap();
    assert_eq!(check_to_end(&mut p, 4, SAMPLE), 100);
}

fn core_affinity_count() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

#[test]
fn many_pipelines_run_side_by_side() {
    let counter = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let counter = counter.clone();
            std::thread::spawn(move || {
                let mut p = Pipeline::new(
                    builder(3).decode_threads(1).build().unwrap(),
                    decoder(),
                    0..300u64,
                )
                .unwrap();
                while let Some(b) = p.pop().unwrap() {
                    check_batch(b.bytes(), b.seq(), 3, SAMPLE, 3);
                    counter.fetch_add(1, Ordering::Relaxed);
                }
                i
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(counter.load(Ordering::Relaxed), 400);
}

#[test]
fn pop_for_bounds_one_call_and_the_pipeline_goes_on() {
    // No configured pop timeout: only the per-call bound applies.
    let config = Config::builder()
        .batch_size(1)
        .bytes_per_sample(8)
        .device_slots(1)
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..3u64).unwrap();
    let first = p.pop_for(BOUND).unwrap().expect("batch 0");
    assert_eq!(first.seq(), 0);
    // The one device slot is leased: the next pop cannot be served until it is released.
    match p.pop_for(Duration::from_millis(20)) {
        Err(Error::PopTimeout {
            behind: pinring::Stage::Consumer,
            waited,
        }) => assert!(waited >= Duration::from_millis(20)),
        other => panic!("expected a consumer timeout, got {other:?}"),
    }
    first.release(Fence::Sync).unwrap();
    // The timed-out call lost nothing: batches 1 and 2 follow in order, then the end.
    for seq in 1..3 {
        let b = p.pop_for(BOUND).unwrap().expect("a batch");
        assert_eq!(b.seq(), seq);
        check_batch(b.bytes(), seq, 1, 8, 1);
        b.release(Fence::Sync).unwrap();
    }
    assert!(p.pop_for(BOUND).unwrap().is_none());
}

/// Issue 19 item 13: `pop_for(Duration::ZERO)` never waits, and names the stage really
/// behind: with every device slot leased, the consumer. Before, it went into the wait
/// (spinning up to the spin time) and reported what it had waited.
#[test]
fn a_zero_pop_for_never_waits_and_names_the_consumer_when_every_slot_is_leased() {
    let config = Config::builder()
        .batch_size(1)
        .bytes_per_sample(8)
        .device_slots(2)
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..10u64).unwrap();
    let held = [p.pop().unwrap().unwrap(), p.pop().unwrap().unwrap()];
    for _ in 0..3 {
        match p.pop_for(Duration::ZERO) {
            Err(Error::PopTimeout {
                behind: pinring::Stage::Consumer,
                waited,
            }) => assert_eq!(waited, Duration::ZERO),
            other => panic!("expected a consumer timeout without a wait, got {other:?}"),
        }
    }
    drop(held);
    // The batch a zero pop finds ready, it returns.
    let start = std::time::Instant::now();
    let next = loop {
        match p.pop_for(Duration::ZERO) {
            Ok(Some(batch)) => break batch,
            Err(Error::PopTimeout { .. }) => assert!(start.elapsed() < BOUND, "no batch came"),
            other => panic!("expected batch 2, got {other:?}"),
        }
        std::thread::yield_now();
    };
    assert_eq!(next.seq(), 2);
}

/// Issue 19 item 17: the `PopTimeout` text reads well for every stage. Before, it was
/// "no batch after 50ms: the consumer (all device slots are leased) stage is behind".
#[test]
fn pop_timeout_texts_read_well_for_every_stage() {
    use pinring::Stage;
    let text = |behind| {
        Error::PopTimeout {
            waited: Duration::from_millis(50),
            behind,
        }
        .to_string()
    };
    assert_eq!(
        text(Stage::Source),
        "no batch after 50ms: the source has not produced the next batch's samples yet"
    );
    assert_eq!(
        text(Stage::Decode),
        "no batch after 50ms: the decode workers have not finished the next batch yet"
    );
    assert_eq!(
        text(Stage::Copy),
        "no batch after 50ms: the next batch is decoded but its copy to the device has not \
         completed"
    );
    assert_eq!(
        text(Stage::Consumer),
        "no batch after 50ms: the device slot it needs is held by a batch not yet released \
         (release or drop one to let it in)"
    );
    // The stage's own name stays short (bindings and Stats use it).
    assert_eq!(Stage::Consumer.to_string(), "consumer");
}

/// Issue 19 item 12: once `pop` has returned the end, `stats()` shows no copy in flight:
/// the copy thread retires the last copies before it hands out the end. Here the last
/// copy waits behind a release fence held at a gate while the source ends; before, the
/// copy thread handed out the end at once and left the last host slot IN_FLIGHT for good.
#[test]
fn stats_after_the_end_show_no_copy_in_flight() {
    const PER: usize = 2;
    let config = builder(PER).device_slots(1).host_slots(4).build().unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..2 * PER as u64).unwrap();
    let stream = CpuStream::new();
    let gate = Gate::new();
    let first = p.pop().unwrap().unwrap();
    {
        let gate = gate.clone();
        stream.enqueue(move || gate.pass());
    }
    gate.arrived(1);
    first.release(Fence::Stream(&stream)).unwrap();
    // Batch 1's copy is enqueued behind the held fence; its token comes before it runs.
    let second = p.pop().unwrap().unwrap();
    // The source has ended (END on batch 2's host slot) while that copy still waits.
    let start = std::time::Instant::now();
    while !p
        .stats()
        .host_slots
        .iter()
        .any(|&(seq, state)| (seq, state) == (2, HostState::End))
    {
        assert!(start.elapsed() < BOUND, "the source did not end");
        std::thread::yield_now();
    }
    gate.open();
    check_batch(second.bytes(), 1, PER, SAMPLE, PER);
    second.release(Fence::Sync).unwrap();
    assert!(p.pop().unwrap().is_none());
    let in_flight: Vec<_> = (p.stats().host_slots.into_iter())
        .filter(|&(_, state)| state == HostState::InFlight)
        .collect();
    assert!(
        in_flight.is_empty(),
        "still in flight after the end: {in_flight:?}"
    );
    stream.synchronize().unwrap();
}

/// A batch bound to two streams, read by a "kernel" on the first (a long op, then a read
/// of the slot), released on the second (`release`) or dropped (`drop`): whether the
/// kernel saw its own batch. The next batch reuses the slot (one device slot).
fn reader_on_the_first_of_two_streams_sees_its_batch(release: bool) -> bool {
    const PER: usize = 2;
    let config = builder(PER).device_slots(1).host_slots(2).build().unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..2 * PER as u64).unwrap();
    let (reading, other) = (CpuStream::new(), CpuStream::new());
    let mut first = p.pop().unwrap().unwrap();
    first.wait_on(&reading).unwrap();
    first.wait_on(&reading).unwrap(); // bound once, whatever the calls
    first.wait_on(&other).unwrap();
    reading.sleep(Duration::from_millis(30));
    let intact = read_batch_0_on(&reading, &first, PER);
    if release {
        first.release(Fence::Stream(&other)).unwrap();
    } else {
        drop(first);
    }
    let second = p.pop().unwrap().unwrap();
    assert_eq!(second.slot(), 0);
    check_batch(second.bytes(), 1, PER, SAMPLE, PER);
    reading.synchronize().unwrap();
    second.release(Fence::Sync).unwrap();
    intact.load(Ordering::Acquire)
}

/// Issue 19 item 2: every stream a batch was bound to is fenced, by `release` and by the
/// drop. Before, only the last stream `wait_on` was called with was remembered: released on
/// the second stream (or dropped), the next copy overwrote the slot while the kernel on the
/// first had yet to read it (the long op stands in for a long kernel; fenced, the order
/// no longer depends on it).
#[test]
fn a_reader_on_the_first_of_two_bound_streams_is_fenced_by_release_and_by_drop() {
    assert!(
        reader_on_the_first_of_two_streams_sees_its_batch(true),
        "release on the second stream let the next copy in before the first stream's read"
    );
    assert!(
        reader_on_the_first_of_two_streams_sees_its_batch(false),
        "the drop let the next copy in before the first stream's read"
    );
}

/// Issue 19 item 5, poison mode: a slot released with `Fence::Sync` (the caller promises
/// the device is done) is filled with 0xFF by the release itself, so a view kept past the
/// release reads -1 / 0xFF... instead of the batch. Without the mode, it keeps the
/// batch's bytes (until the next copy), the silent mistake the mode shows. Before, the
/// setting was stored only.
#[test]
fn poison_mode_fills_a_slot_released_with_a_sync_fence() {
    const PER: usize = 2;
    for poison in [true, false] {
        let config = builder(PER).poison_released(poison).build().unwrap();
        assert_eq!(config.poison_released(), poison);
        // One batch: nothing copies into the slot after it.
        let mut p = Pipeline::new(config, decoder(), 0..PER as u64).unwrap();
        let batch = p.pop().unwrap().unwrap();
        check_batch(batch.bytes(), 0, PER, SAMPLE, PER);
        let (ptr, len) = (batch.device_ptr().as_ptr(), batch.len());
        batch.release(Fence::Sync).unwrap();
        // SAFETY: `len` bytes of device slot 0, alive as long as the pipeline; the fill was
        // made by the release on this thread, and nothing copies into the slot again.
        let kept = unsafe { std::slice::from_raw_parts(ptr, len) };
        if poison {
            assert!(kept.iter().all(|&b| b == 0xFF), "not poisoned: {kept:?}");
            let first = i32::from_le_bytes(kept[..4].try_into().unwrap());
            assert_eq!(first, -1);
        } else {
            check_batch(kept, 0, PER, SAMPLE, PER);
        }
        assert!(p.pop().unwrap().is_none());
    }
}

/// Issue 19 item 5, poison mode, stream-ordered: a slot released on a stream is poisoned
/// only once the stream's work before the release is done (held here at a gate: the slot
/// still holds its batch), and before the slot's next copy, not deferred to it: batch 1
/// (one sample) is copied into the poisoned slot, and the part of the slot it does not
/// cover reads the pattern. Before, it still read batch 0's second sample.
#[test]
fn poison_mode_fills_a_released_slot_after_its_fence_and_before_its_next_copy() {
    const PER: usize = 2;
    let config = builder(PER)
        .device_slots(1)
        .host_slots(2)
        .poison_released(true)
        .build()
        .unwrap();
    // Batch 0 has two samples, batch 1 one.
    let mut p = Pipeline::new(config, decoder(), 0..3u64).unwrap();
    let stream = CpuStream::new();
    let gate = Gate::new();
    let mut first = p.pop().unwrap().unwrap();
    first.wait_on(&stream).unwrap();
    let ptr = first.device_ptr().as_ptr();
    {
        let gate = gate.clone();
        stream.enqueue(move || gate.pass());
    }
    gate.arrived(1);
    first.release(Fence::Stream(&stream)).unwrap();
    // SAFETY: two samples of device slot 0, alive as long as the pipeline. The poison fill
    // and the next copy both wait for the fence on `stream`, held at the gate: nothing
    // writes the slot while this view is read.
    let kept = unsafe { std::slice::from_raw_parts(ptr, PER * SAMPLE) };
    check_batch(kept, 0, PER, SAMPLE, PER);
    gate.open();
    let second = p.pop().unwrap().unwrap();
    assert_eq!((second.seq(), second.samples(), second.slot()), (1, 1, 0));
    check_batch(second.bytes(), 1, 1, SAMPLE, PER);
    // SAFETY: as above; batch 1's copy has completed (`bytes` waited for it) and nothing
    // writes the slot while batch 1 is leased.
    let kept = unsafe { std::slice::from_raw_parts(ptr, PER * SAMPLE) };
    assert!(
        kept[SAMPLE..].iter().all(|&b| b == 0xFF),
        "the slot past batch 1 was not poisoned before its copy"
    );
    second.release(Fence::Sync).unwrap();
    stream.synchronize().unwrap();
}
