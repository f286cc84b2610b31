//! Loom models of the slot protocol (ARCHITECTURE.md, invariants 1–4).
//!
//! Each model runs pinring's own feeder, decode dispatcher, copy thread, consumer (`pop`)
//! and `Batch::release`/drop against the model device (`pinring::loom_api`), on loom
//! threads, and loom explores their interleavings up to the preemption bound
//! (`LOOM_MAX_PREEMPTIONS`, 3 unless set). Each model also runs with a seeded protocol
//! bug and must be rejected (`#[should_panic]`).
//!
//! Run: `scripts/loom.sh` (`RUSTFLAGS="--cfg pinring_loom" cargo test -p loom-tests --release`).
#![cfg(pinring_loom)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use loom::thread;
use pinring::loom_api::{
    device_slot, host_read, kernel_read, rig, set_mutation, unpopped, Error, Fence, ModelStream,
    Mutation, Rig, Spec,
};

/// Explores `model` with `mutation` seeded; prints the interleavings explored and the time.
fn explore(name: &str, mutation: Mutation, model: fn()) {
    set_mutation(mutation);
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = builder.preemption_bound.or(Some(3));
    builder.max_branches = 100_000;
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let start = Instant::now();
    builder.check(move || {
        counted.fetch_add(1, Ordering::Relaxed);
        model();
    });
    println!(
        "model {name}: {} interleavings, preemption bound {}, {:.1?}",
        runs.load(Ordering::Relaxed),
        builder.preemption_bound.unwrap_or(0),
        start.elapsed()
    );
}

fn spec(host_slots: usize, device_slots: usize, samples_per_batch: usize, samples: u64) -> Spec {
    Spec {
        host_slots,
        device_slots,
        samples_per_batch,
        samples,
        fail_at: None,
        stop_at: None,
        step_on_poll: false,
    }
}

/// Model 1: two device slots, three batches, in order: fill → copy → pop → release → reuse.
/// The consumer reads each batch with a kernel on its stream and releases fenced on that
/// stream; batch 2 reuses device slot 0. The device checks that no H2D is enqueued into a
/// slot before its release fence was recorded, that no wait is on an unrecorded fence, and
/// that the H2D runs only after the kernel that read the slot's previous batch.
fn device_slot_reuse() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&spec(4, 2, 1, 3));
    // H = 4 > 3 batches: the feeder never waits, so the host side runs to completion first.
    feeder.run();
    decoder.run();
    let copy = thread::spawn(move || copier.run());
    let stream = ModelStream::new(&device);

    let mut take = |seq: u64| {
        let mut batch = pipeline.pop().expect("pop").expect("a batch");
        assert_eq!((batch.seq(), batch.slot()), (seq, seq as usize % 2));
        batch.wait_on(&stream).expect("wait_on");
        kernel_read(&stream, &batch);
        batch
    };
    let b0 = take(0);
    let b1 = take(1);
    b0.release(Fence::Stream(&stream)).expect("release");
    let b2 = take(2);
    b1.release(Fence::Stream(&stream)).expect("release");
    b2.release(Fence::Stream(&stream)).expect("release");
    assert!(
        pipeline.pop().expect("pop").is_none(),
        "End after 3 batches"
    );

    copy.join().unwrap();
    assert_eq!(unpopped(&mut pipeline), 0);
    drop(pipeline);
    device.drain();
    drop(stream);
    assert_eq!(device.leases(), (3, 3), "every token released exactly once");
}

/// Model 2: release from a third thread, and out of order. Batch 1 is released first, by
/// the consumer; batch 0 by another thread, on an event the consumer recorded after the
/// kernel that reads it. Batch 2 reuses slot 0 once that release lands.
fn release_elsewhere_out_of_order() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&spec(4, 2, 1, 3));
    feeder.run();
    decoder.run();
    let copy = thread::spawn(move || copier.run());
    let stream = ModelStream::new(&device);

    let mut b0 = pipeline.pop().expect("pop").expect("batch 0");
    let b1 = pipeline.pop().expect("pop").expect("batch 1");
    assert_eq!((b0.seq(), b1.seq()), (0, 1));
    b0.wait_on(&stream).expect("wait_on");
    kernel_read(&stream, &b0);
    let done = device.event();
    stream.record(&done);
    b1.release(Fence::Sync).expect("release");
    let releaser = thread::spawn(move || {
        b0.release(Fence::Event(&done)).expect("release");
    });
    let b2 = pipeline.pop().expect("pop").expect("batch 2");
    assert_eq!((b2.seq(), b2.slot()), (2, 0));
    b2.synchronize().expect("synchronize");
    assert_eq!(host_read(&b2), [2]);
    b2.release(Fence::Sync).expect("release");
    assert!(pipeline.pop().expect("pop").is_none());

    releaser.join().unwrap();
    copy.join().unwrap();
    assert_eq!(unpopped(&mut pipeline), 0);
    drop(pipeline);
    device.drain();
    drop(stream);
    assert_eq!(device.leases(), (3, 3));
}

/// Model 3: host-slot reuse. One host slot: batch 1 is gathered and decoded into host
/// slot 0 only after batch 0's H2D out of it has completed (the model's decoder checks it
/// before it writes, loom checks that the bytes' accesses are ordered, and the consumer
/// checks that batch 0 arrived intact). The feeder runs on the model's thread, the decoder
/// and copy thread on two more; the device completes a copy when the copy thread polls it.
/// The decode of batch 1 fails after writing, which ends the stages.
fn host_slot_reuse() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&Spec {
        step_on_poll: true,
        fail_at: Some(1),
        ..spec(1, 1, 1, 2)
    });
    let decode = thread::spawn(move || decoder.run());
    let copy = thread::spawn(move || copier.run());
    feeder.run();
    decode.join().unwrap();
    copy.join().unwrap();

    let b0 = pipeline.pop().expect("pop").expect("batch 0");
    b0.synchronize().expect("synchronize");
    assert_eq!(host_read(&b0), [0]);
    b0.release(Fence::Sync).expect("release");
    assert!(matches!(pipeline.pop(), Err(Error::Decode { seq: 1, .. })));
    assert_eq!(unpopped(&mut pipeline), 0);
    drop(pipeline);
    device.drain();
    assert_eq!(device.leases(), (1, 1));
}

/// Model 4: shutdown while a batch is leased, while the consumer is parked in `pop`, and
/// while a decode is in flight (the decode of batch 1 stops the pipeline). One device slot:
/// batch 1 cannot be copied while batch 0 is leased. Every thread ends, `pop` reports the
/// stop, a leased batch stays readable after the pipeline is gone, and every token is
/// either handed out and released exactly once or never handed out.
fn shutdown() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&Spec {
        stop_at: Some(1),
        ..spec(3, 1, 1, 2)
    });
    // H = 3 > 2 batches: the feeder gathers both and publishes END without waiting.
    feeder.run();
    let decode = thread::spawn(move || decoder.run());
    let copy = thread::spawn(move || copier.run());

    // Batch 0, unless the stop came before its copy; then only `Stopped`.
    let b0 = match pipeline.pop() {
        Ok(Some(b0)) => Some(b0),
        Err(Error::Stopped) => None,
        other => panic!("expected batch 0 or Stopped, got {other:?}"),
    };
    assert!(matches!(pipeline.pop(), Err(Error::Stopped)));
    assert!(matches!(pipeline.pop(), Err(Error::Stopped)));

    decode.join().unwrap();
    copy.join().unwrap();
    let left = unpopped(&mut pipeline);
    drop(pipeline);
    let popped = u64::from(b0.is_some());
    if let Some(b0) = b0 {
        b0.synchronize().expect("synchronize");
        assert_eq!(host_read(&b0), [0]);
        drop(b0); // unbound: fenced conservatively
    }
    device.drain();
    assert_eq!(device.leases(), (popped + left, popped));
}

/// Model 5: a decode error mid-batch. One device slot, two samples a batch; the second
/// sample of batch 1 fails while the consumer holds and releases batch 0 (stream-fenced).
/// Batch 0 is delivered whole, then `pop` reports the error with its batch and sample, then
/// `Stopped`; every thread ends and the one token handed out is released once.
fn decode_error() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&Spec {
        fail_at: Some(3),
        ..spec(3, 1, 2, 4)
    });
    // H = 3 > 2 batches: the feeder gathers both and publishes END without waiting.
    feeder.run();
    let decode = thread::spawn(move || decoder.run());
    let copy = thread::spawn(move || copier.run());
    let stream = ModelStream::new(&device);

    let mut b0 = pipeline.pop().expect("pop").expect("batch 0");
    b0.wait_on(&stream).expect("wait_on");
    kernel_read(&stream, &b0);
    b0.release(Fence::Stream(&stream)).expect("release");
    match pipeline.pop() {
        Err(Error::Decode { seq, sample, .. }) => assert_eq!((seq, sample), (1, 1)),
        other => panic!("expected the decode error of batch 1, got {other:?}"),
    }
    assert!(matches!(pipeline.pop(), Err(Error::Stopped)));

    decode.join().unwrap();
    copy.join().unwrap();
    assert_eq!(unpopped(&mut pipeline), 0);
    drop(pipeline);
    device.drain();
    drop(stream);
    assert_eq!(device_slot(&device, 0), (Some(0), vec![0, 1]));
    assert_eq!(device.leases(), (1, 1));
}

#[test]
fn model_1_device_slot_reuse() {
    explore("1 device-slot reuse", Mutation::None, device_slot_reuse);
}

#[test]
#[should_panic(expected = "Causality violation")]
fn model_1_rejects_publish_before_record() {
    explore(
        "1 (mutated)",
        Mutation::PublishBeforeRecord,
        device_slot_reuse,
    );
}

#[test]
fn model_2_release_elsewhere_out_of_order() {
    explore(
        "2 release from a third thread, out of order",
        Mutation::None,
        release_elsewhere_out_of_order,
    );
}

#[test]
#[should_panic(expected = "Causality violation")]
fn model_2_rejects_publish_before_record() {
    explore(
        "2 (mutated)",
        Mutation::PublishBeforeRecord,
        release_elsewhere_out_of_order,
    );
}

#[test]
fn model_3_host_slot_reuse() {
    explore("3 host-slot reuse", Mutation::None, host_slot_reuse);
}

#[test]
#[should_panic(expected = "invariant 1")]
fn model_3_rejects_free_before_copied() {
    explore("3 (mutated)", Mutation::FreeBeforeCopied, host_slot_reuse);
}

#[test]
fn model_4_shutdown() {
    explore("4 shutdown", Mutation::None, shutdown);
}

#[test]
#[should_panic(expected = "deadlock")]
fn model_4_rejects_stop_without_wake() {
    explore("4 (mutated)", Mutation::StopWithoutWake, shutdown);
}

#[test]
fn model_5_decode_error() {
    explore("5 decode error mid-batch", Mutation::None, decode_error);
}

#[test]
#[should_panic(expected = "deadlock")]
fn model_5_rejects_fail_without_wake() {
    explore("5 (mutated)", Mutation::FailWithoutWake, decode_error);
}
