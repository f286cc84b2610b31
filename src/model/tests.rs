//! The loom models of the slot protocol (ARCHITECTURE.md, invariants 1–4).
//!
//! Each model runs the pipeline's own feeder, decode workers, copy thread, consumer
//! (`pop`, `pop_for`, `try_pop`) and `Batch::release`/drop against the model device, on
//! loom threads, and loom explores their interleavings up to the preemption bound
//! (`LOOM_MAX_PREEMPTIONS`: 3 unless set for this binary; `scripts/loom.sh`, which CI
//! runs, sets 2; a model may cap it, see [`MODELS`]). Each model's seeded-bug twins must
//! fail with that bug's invariant.
//!
//! Every model runs in a process of its own: the test re-runs this test binary on the
//! ignored `child` test with the model's name, so a deadlock or an abort in one model fails
//! that model alone. Run: `scripts/loom.sh`.

use std::process::Command;
use std::time::{Duration, Instant};

use loom::thread;

use super::device::ModelOptions;
use super::rig::{device_slot, host_read, id_of, kernel_read, rig, unpopped, Rig, Spec};
use crate::config::LastBatch;
use crate::error::{Error, Stage};
use crate::sync::{set_mutation, Mutation};
use crate::Fence;

/// Model 1: two device slots, three batches: fill → copy → pop → release → reuse. The
/// consumer reads each batch with a kernel on its stream and releases fenced on that
/// stream; batch 2 reuses device slot 0. The device checks that no copy is enqueued into
/// a slot before its release fence was recorded and that the copy runs only after the
/// kernel that read the slot's previous batch.
fn device_slot_reuse() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&Spec::new(4, 2, 1, 3));
    // H = 4 > 3 batches: the feeder never waits, so the host side runs to completion first.
    feeder.run();
    decoder();
    let copy = thread::spawn(move || copier.run());
    let stream = device.stream();
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
    assert_eq!(device.leases(), (3, 3), "every token released exactly once");
}

/// Model 2: release from a third thread, and out of order. Batch 1 is released first, by
/// the consumer (`Fence::Sync`, nothing recorded); batch 0 by another thread, on an event
/// the consumer recorded after the kernel that reads it (`Fence::Event`, captured on the
/// slot's fence stream as the cuda backend does). Batch 2 reuses slot 0 once that release
/// lands.
fn release_elsewhere_out_of_order() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&Spec::new(4, 2, 1, 3));
    feeder.run();
    decoder();
    let copy = thread::spawn(move || copier.run());
    let stream = device.stream();
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
    assert_eq!(device.leases(), (3, 3));
}

/// Model 3: host-slot reuse on the polling path (a device that does not notify copy
/// completion: the copy thread polls it, the path a backend without a completion
/// notification takes). One host slot: batch 1 is
/// decoded into it only after batch 0's copy out of it completed (the model's decoder
/// checks it before it writes). The device moves when the copy thread polls. The decode
/// of batch 1 fails after writing, which ends the stages.
fn host_slot_reuse() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&Spec {
        fail_at: Some(1),
        device: ModelOptions {
            notifies: false,
            step_on_poll: true,
        },
        ..Spec::new(1, 1, 1, 2)
    });
    let decode = thread::spawn(move || decoder());
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
        ..Spec::new(3, 1, 1, 2)
    });
    // H = 3 > 2 batches: the feeder gathers both and publishes END without waiting.
    feeder.run();
    let decode = thread::spawn(move || decoder());
    let copy = thread::spawn(move || copier.run());
    let b0 = match pipeline.pop() {
        Ok(Some(b0)) => Some(b0),
        Err(Error::Stopped) => None,
        other => panic!("expected batch 0 or Stopped, got {other:?}"),
    };
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

/// Model 5: a decode error mid-batch, with two samples a batch decoded as two items by two
/// workers. The second sample of batch 1 fails while the consumer holds and releases batch
/// 0 (stream-fenced). Batch 0 is delivered whole, then `pop` reports the error with its
/// batch and sample, then `Stopped`; every thread ends and the one token handed out is
/// released once.
fn decode_error() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&Spec {
        fail_at: Some(3),
        item_samples: 1,
        ..Spec::new(3, 1, 2, 4)
    });
    feeder.run();
    let second = decoder.clone();
    let decode = thread::spawn(move || decoder());
    let decode2 = thread::spawn(move || second());
    let copy = thread::spawn(move || copier.run());
    let stream = device.stream();
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
    decode2.join().unwrap();
    copy.join().unwrap();
    assert_eq!(unpopped(&mut pipeline), 0);
    drop(pipeline);
    device.drain();
    assert_eq!(device_slot(&device, 0), (Some(0), vec![0, 1]));
    assert_eq!(device.leases(), (1, 1));
}

/// Model 6: host-slot wraparound with two host slots and the feeder, decoder and copy
/// thread all overlapping (each on its own thread): batch 2 reuses host slot 0 and device
/// slot 0. The consumer waits for each batch on the host (which moves the device) and
/// releases it; the device wakes the copy thread when a run of copies completes.
fn wraparound() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&Spec::new(2, 2, 1, 3));
    let feed = thread::spawn(move || feeder.run());
    let decode = thread::spawn(move || decoder());
    let copy = thread::spawn(move || copier.run());
    for seq in 0..3 {
        let batch = pipeline.pop().expect("pop").expect("a batch");
        assert_eq!(batch.seq(), seq);
        batch.synchronize().expect("synchronize");
        assert_eq!(host_read(&batch), [seq]);
        batch.release(Fence::Sync).expect("release");
    }
    assert!(pipeline.pop().expect("pop").is_none());
    feed.join().unwrap();
    decode.join().unwrap();
    copy.join().unwrap();
    drop(pipeline);
    device.drain();
    assert_eq!(device.leases(), (3, 3));
}

/// Model 7: a short last batch, delivered (`LastBatch::Partial`) or dropped
/// (`LastBatch::Drop`), and a consumer that first tries `try_pop`, then a `pop_for` that
/// may time out (naming a stage), then waits.
fn short_batches(last_batch: LastBatch) {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&Spec {
        last_batch,
        ..Spec::new(3, 2, 2, 3)
    });
    // H = 3 > 2 batches: the feeder gathers both and publishes END without waiting.
    feeder.run();
    let decode = thread::spawn(move || decoder());
    let copy = thread::spawn(move || copier.run());
    let first = match pipeline.try_pop().expect("try_pop") {
        crate::TryPop::Batch(batch) => Some(batch),
        crate::TryPop::NotReady => None,
        crate::TryPop::End => panic!("End before batch 0"),
    };
    let first = match first {
        Some(batch) => batch,
        None => match pipeline.pop_for(Duration::from_micros(5)) {
            Ok(Some(batch)) => batch,
            Err(Error::PopTimeout { behind, .. }) => {
                assert!(
                    matches!(behind, Stage::Source | Stage::Decode | Stage::Copy),
                    "{behind:?}"
                );
                pipeline.pop().expect("pop").expect("batch 0")
            }
            other => panic!("expected batch 0 or a timeout, got {other:?}"),
        },
    };
    assert_eq!((first.seq(), first.samples()), (0, 2));
    first.synchronize().expect("synchronize");
    assert_eq!(host_read(&first), [0, 1]);
    drop(first);
    if last_batch == LastBatch::Partial {
        let short = pipeline.pop().expect("pop").expect("the short batch");
        assert_eq!((short.seq(), short.samples(), short.len()), (1, 1, 8));
        short.synchronize().expect("synchronize");
        assert_eq!(host_read(&short), [2]);
        short.release(Fence::Sync).expect("release");
    }
    assert!(pipeline.pop().expect("pop").is_none());
    decode.join().unwrap();
    copy.join().unwrap();
    drop(pipeline);
    device.drain();
    let n = if last_batch == LastBatch::Partial {
        2
    } else {
        1
    };
    assert_eq!(device.leases(), (n, n));
}

fn short_batch_partial() {
    short_batches(LastBatch::Partial);
}

fn short_batch_dropped() {
    short_batches(LastBatch::Drop);
}

/// Model 8: a pop with every device slot leased returns `AllSlotsLeased` naming the slot
/// and its batch after the lease timeout, instead of hanging; after a release the next pop
/// goes on.
fn all_slots_leased() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&Spec {
        lease_timeout: Duration::from_millis(1),
        // Three host slots: the feeder runs to the source's end (two batches and END)
        // before the other stages start.
        ..Spec::new(3, 1, 1, 2)
    });
    feeder.run();
    decoder();
    let copy = thread::spawn(move || copier.run());
    let b0 = pipeline.pop().expect("pop").expect("batch 0");
    match pipeline.pop() {
        Err(Error::AllSlotsLeased { leased, .. }) => assert_eq!(leased, [(0, 0)]),
        other => panic!("expected AllSlotsLeased, got {other:?}"),
    }
    b0.release(Fence::Sync).expect("release");
    let b1 = pipeline.pop().expect("pop").expect("batch 1");
    assert_eq!(b1.seq(), 1);
    drop(b1);
    assert!(pipeline.pop().expect("pop").is_none());
    copy.join().unwrap();
    drop(pipeline);
    device.drain();
    assert_eq!(device.leases(), (2, 2));
}

/// Model 9: an epoch's short batch in mid-stream. Samples of one item each, batches of two,
/// epochs of three samples: batches of 2, 1 (the end of epoch 0) and 1 (epoch 1). The lone
/// decode worker claims items in sequence order, so it also claims the missing second item
/// of batch 1, and finds that batch filled (or already copied and its slot reused): it must
/// go on to batch 2, not end. The feeder runs first, to the source's end.
fn epoch_ends() {
    let Rig {
        mut pipeline,
        feeder,
        decoder,
        copier,
        device,
    } = rig(&Spec {
        epoch_len: Some(3),
        item_samples: 1,
        ..Spec::new(4, 1, 2, 4)
    });
    feeder.run();
    let decode = thread::spawn(move || decoder());
    let copy = thread::spawn(move || copier.run());
    for (seq, want) in [vec![0, 1], vec![2], vec![3]].into_iter().enumerate() {
        let batch = pipeline.pop().expect("pop").expect("a batch");
        assert_eq!(batch.seq(), seq as u64);
        assert_eq!(batch.sample_ids(), want, "batch {seq}'s ids");
        assert_eq!(batch.epoch(), u64::from(seq == 2));
        batch.synchronize().expect("synchronize");
        let read: Vec<u64> = host_read(&batch).into_iter().map(id_of).collect();
        assert_eq!(read, want, "batch {seq}'s bytes");
        batch.release(Fence::Sync).expect("release");
    }
    assert!(pipeline.pop().expect("pop").is_none());
    decode.join().unwrap();
    copy.join().unwrap();
    drop(pipeline);
    device.drain();
    assert_eq!(device.leases(), (3, 3));
}

/// A model: its name, its body, and the most preemptions it is explored at.
type Model = (&'static str, fn(), Option<usize>);

/// Every model, by name, with the most preemptions it is explored at (`None`: as many as
/// `LOOM_MAX_PREEMPTIONS` says). The wraparound model has four threads (feeder, decode
/// worker, copy thread, consumer) that all block on each other: at two preemptions it ran
/// past 25 minutes on 2 cores, so it is explored at one (302,295 interleavings, about
/// 1 minute).
const MODELS: &[Model] = &[
    ("device_slot_reuse", device_slot_reuse, None),
    (
        "release_elsewhere_out_of_order",
        release_elsewhere_out_of_order,
        None,
    ),
    ("host_slot_reuse", host_slot_reuse, None),
    ("shutdown", shutdown, None),
    ("decode_error", decode_error, None),
    ("wraparound", wraparound, Some(1)),
    ("short_batch_partial", short_batch_partial, None),
    ("short_batch_dropped", short_batch_dropped, None),
    ("all_slots_leased", all_slots_leased, None),
    ("epoch_ends", epoch_ends, None),
];

fn mutation_named(name: &str) -> Mutation {
    match name {
        "None" => Mutation::None,
        "PublishBeforeRecord" => Mutation::PublishBeforeRecord,
        "FreeBeforeCopied" => Mutation::FreeBeforeCopied,
        "WrongSlotRetire" => Mutation::WrongSlotRetire,
        "StopWithoutWake" => Mutation::StopWithoutWake,
        "FailWithoutWake" => Mutation::FailWithoutWake,
        other => panic!("unknown mutation {other}"),
    }
}

/// Runs one model in this process (the child side of [`isolated`]).
#[test]
#[ignore = "run by the model tests below, one process per model"]
fn child() {
    let name = std::env::var("PINRING_MODEL").expect("PINRING_MODEL names the model");
    let mutation = std::env::var("PINRING_MUTATION").unwrap_or_else(|_| "None".into());
    let &(_, model, cap) = MODELS
        .iter()
        .find(|(n, _, _)| *n == name)
        .unwrap_or_else(|| panic!("no model {name}"));
    set_mutation(mutation_named(&mutation));
    let mut builder = loom::model::Builder::new();
    let bound = builder.preemption_bound.unwrap_or(3);
    builder.preemption_bound = Some(cap.map_or(bound, |cap| cap.min(bound)));
    builder.max_branches = 100_000;
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    let start = Instant::now();
    builder.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    println!(
        "\nMODEL\t{name}\t{mutation}\t{} interleavings\tpreemption bound {}\t{:.1?}",
        runs.load(std::sync::atomic::Ordering::Relaxed),
        builder.preemption_bound.unwrap_or(0),
        start.elapsed()
    );
}

/// Runs model `name` with `mutation` seeded in a process of its own; returns whether it
/// passed, and its output.
fn isolated(name: &str, mutation: &str) -> (bool, String) {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new(exe)
        .args([
            "--exact",
            "model::tests::child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PINRING_MODEL", name)
        .env("PINRING_MUTATION", mutation)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run the model's process");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for line in text
        .lines()
        .filter_map(|l| l.find("MODEL\t").map(|i| &l[i..]))
    {
        println!("{line}");
    }
    (out.status.success(), text)
}

/// The model passes.
fn passes(name: &str) {
    let (ok, text) = isolated(name, "None");
    assert!(ok, "model {name} failed:\n{text}");
}

/// The model fails with the seeded bug, with `expected` in its failure.
fn rejects(name: &str, mutation: &str, expected: &str) {
    let (ok, text) = isolated(name, mutation);
    assert!(
        !ok,
        "model {name} accepted the seeded bug {mutation}:\n{text}"
    );
    assert!(
        text.contains(expected),
        "model {name} with {mutation} failed without \"{expected}\":\n{text}"
    );
}

#[test]
fn model_1_device_slot_reuse() {
    passes("device_slot_reuse");
}

#[test]
fn model_1_rejects_publish_before_record() {
    rejects("device_slot_reuse", "PublishBeforeRecord", "invariant 2");
}

#[test]
fn model_2_release_elsewhere_out_of_order() {
    passes("release_elsewhere_out_of_order");
}

#[test]
fn model_2_rejects_publish_before_record() {
    rejects(
        "release_elsewhere_out_of_order",
        "PublishBeforeRecord",
        "invariant 2",
    );
}

#[test]
fn model_3_host_slot_reuse_polling() {
    passes("host_slot_reuse");
}

#[test]
fn model_3_rejects_free_before_copied() {
    rejects("host_slot_reuse", "FreeBeforeCopied", "invariant 1");
}

#[test]
fn model_4_shutdown() {
    passes("shutdown");
}

#[test]
fn model_4_rejects_stop_without_wake() {
    rejects("shutdown", "StopWithoutWake", "deadlock");
}

#[test]
fn model_5_decode_error_two_workers() {
    passes("decode_error");
}

#[test]
fn model_5_rejects_fail_without_wake() {
    rejects("decode_error", "FailWithoutWake", "deadlock");
}

#[test]
fn model_6_wraparound() {
    passes("wraparound");
}

#[test]
fn model_6_rejects_wrong_slot_retire() {
    rejects("wraparound", "WrongSlotRetire", "invariant 1");
}

#[test]
fn model_6_rejects_free_before_copied() {
    rejects("wraparound", "FreeBeforeCopied", "invariant 1");
}

#[test]
fn model_7_short_batch_partial() {
    passes("short_batch_partial");
}

#[test]
fn model_7_short_batch_dropped() {
    passes("short_batch_dropped");
}

#[test]
fn model_8_all_slots_leased() {
    passes("all_slots_leased");
}

#[test]
fn model_9_epoch_ends() {
    passes("epoch_ends");
}
