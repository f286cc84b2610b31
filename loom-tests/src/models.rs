//! The loom models of the slot protocol (ARCHITECTURE.md, invariants 1–4).
//!
//! Each model runs the pipeline's own feeder, decode workers, copy thread, consumer
//! (`pop`, `pop_for`, `try_pop`) and `Batch::release`/drop against the model device, on
//! loom threads, and loom explores their interleavings up to the preemption bound (see
//! [`explore()`](crate::explore())); a model may cap it (see [`MODELS`]). Each model's
//! seeded-bug twins must fail with that bug's invariant (`tests/models.rs`).

use std::time::Duration;

use loom::thread;
use pinring::model_hooks::{suppress_wakes, unpopped_batches};
use pinring::{Error, Fence, LastBatch, Stage, TryPop};

use crate::device::ModelOptions;
use crate::mutation::{mutation, Mutation};
use crate::rig::{device_slot, host_read, id_of, kernel_read, model_fields, rig, Rig, Spec};

/// Model 1: two device slots, three batches: fill → copy → pop → release → reuse. The
/// consumer reads each batch with a kernel on its stream and releases fenced on that
/// stream (batch 0 with `Fence::Bound`: the stream `wait_on` bound it to); batch 2 reuses
/// device slot 0. The device checks that no copy is enqueued into a slot before its
/// release fence was recorded and that the copy runs only after the kernel that read the
/// slot's previous batch. Batch 1 is waited for on the host first, so its `wait_on` finds
/// the copy count past it and enqueues no wait: its kernel must still find it.
fn device_slot_reuse() {
    let mut rig = rig(&Spec {
        device: ModelOptions {
            notifies: true,
            user_streams_first: true,
            ..ModelOptions::default()
        },
        ..Spec::new(4, 2, 1, 3)
    });
    // H = 4 > 3 batches: the feeder never waits, so the host side runs to completion first.
    rig.host_side_then_copier();
    let stream = rig.device.stream();
    let mut take = |seq: u64| {
        let mut batch = rig.pipeline.pop().expect("pop").expect("a batch");
        assert_eq!((batch.seq(), batch.slot()), (seq, seq as usize % 2));
        if seq == 1 {
            batch.synchronize().expect("synchronize");
        }
        batch.wait_on(&stream).expect("wait_on");
        kernel_read(&stream, &batch);
        batch
    };
    let b0 = take(0);
    let b1 = take(1);
    b0.release(Fence::Bound).expect("release");
    let b2 = take(2);
    b1.release(Fence::Stream(&stream)).expect("release");
    b2.release(Fence::Stream(&stream)).expect("release");
    assert_end(&mut rig, "End after 3 batches");
    rig.assert_all_popped();
    rig.finish(3);
}

/// Model 2: release from a third thread, and out of order. Batch 1 is released first, by
/// the consumer (`Fence::Sync`, nothing recorded); batch 0 by another thread, on an event
/// the consumer recorded after the kernel that reads it (`Fence::Event`, captured on the
/// slot's fence stream as the cuda backend does). Batch 2 reuses slot 0 once that release
/// lands.
fn release_elsewhere_out_of_order() {
    let mut rig = rig(&Spec::new(4, 2, 1, 3));
    rig.host_side_then_copier();
    let stream = rig.device.stream();
    let mut b0 = rig.pipeline.pop().expect("pop").expect("batch 0");
    let b1 = rig.pipeline.pop().expect("pop").expect("batch 1");
    assert_eq!((b0.seq(), b1.seq()), (0, 1));
    b0.wait_on(&stream).expect("wait_on");
    kernel_read(&stream, &b0);
    let done = rig.device.event();
    stream.record(&done);
    b1.release(Fence::Sync).expect("release");
    let releaser = thread::spawn(move || {
        b0.release(Fence::Event(&done)).expect("release");
    });
    let b2 = rig.pipeline.pop().expect("pop").expect("batch 2");
    assert_eq!((b2.seq(), b2.slot()), (2, 0));
    b2.synchronize().expect("synchronize");
    assert_eq!(host_read(&rig.device, &b2), [2]);
    b2.release(Fence::Sync).expect("release");
    assert_end(&mut rig, "End after 3 batches");
    releaser.join().unwrap();
    rig.assert_all_popped();
    rig.finish(3);
}

/// Model 3: host-slot reuse on the polling path (a device that does not notify copy
/// completion: the copy thread polls it, the path a backend without a completion
/// notification takes). One host slot: batch 1 is
/// decoded into it only after batch 0's copy out of it completed (the model's decoder
/// checks it before it writes). The device moves when the copy thread polls. The decode
/// of batch 1 fails after writing, which ends the stages.
fn host_slot_reuse() {
    let mut rig = rig(&Spec {
        fail_at: Some(1),
        device: ModelOptions {
            notifies: false,
            step_on_poll: true,
            ..ModelOptions::default()
        },
        ..Spec::new(1, 1, 1, 2)
    });
    rig.spawn_decoders(1);
    rig.spawn_copier();
    rig.feed();
    rig.join_stages();
    let b0 = rig.pipeline.pop().expect("pop").expect("batch 0");
    b0.synchronize().expect("synchronize");
    assert_eq!(host_read(&rig.device, &b0), [0]);
    b0.release(Fence::Sync).expect("release");
    assert!(matches!(
        rig.pipeline.pop(),
        Err(Error::Decode { seq: 1, .. })
    ));
    rig.assert_all_popped();
    rig.finish(1);
}

/// Model 4: shutdown while a batch is leased, while the consumer is parked in `pop`, and
/// while a decode is in flight (the decode of batch 1 stops the pipeline). One device slot:
/// batch 1 cannot be copied while batch 0 is leased. Every thread ends, `pop` reports the
/// stop, a leased batch stays readable after the pipeline is gone, and every token is
/// either handed out and released exactly once or never handed out.
fn shutdown() {
    let mut rig = rig(&Spec {
        stop_at: Some(1),
        ..Spec::new(3, 1, 1, 2)
    });
    // H = 3 > 2 batches: the feeder gathers both and publishes END without waiting.
    rig.feed_then_spawn(1);
    let b0 = match rig.pipeline.pop() {
        Ok(Some(b0)) => Some(b0),
        Err(Error::Stopped) => None,
        other => panic!("expected batch 0 or Stopped, got {other:?}"),
    };
    assert!(matches!(rig.pipeline.pop(), Err(Error::Stopped)));
    rig.join_stages();
    let left = unpopped_batches(&mut rig.pipeline);
    let device = rig.close();
    let popped = u64::from(b0.is_some());
    if let Some(b0) = b0 {
        b0.synchronize().expect("synchronize");
        assert_eq!(host_read(&device, &b0), [0]);
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
    let mut rig = rig(&Spec {
        fail_at: Some(3),
        item_samples: 1,
        ..Spec::new(3, 1, 2, 4)
    });
    rig.feed_then_spawn(2);
    let stream = rig.device.stream();
    let mut b0 = rig.pipeline.pop().expect("pop").expect("batch 0");
    b0.wait_on(&stream).expect("wait_on");
    kernel_read(&stream, &b0);
    b0.release(Fence::Stream(&stream)).expect("release");
    match rig.pipeline.pop() {
        Err(Error::Decode { seq, sample, .. }) => assert_eq!((seq, sample), (1, 1)),
        other => panic!("expected the decode error of batch 1, got {other:?}"),
    }
    assert!(matches!(rig.pipeline.pop(), Err(Error::Stopped)));
    rig.assert_all_popped();
    let device = rig.finish(1);
    assert_eq!(device_slot(&device, 0), (Some(0), vec![0, 1]));
}

/// Model 6: host-slot wraparound with two host slots and the feeder, decoder and copy
/// thread all overlapping (each on its own thread): batch 2 reuses host slot 0 and device
/// slot 0. The consumer waits for each batch on the host (which moves the device) and
/// releases it; the device wakes the copy thread when a run of copies completes.
fn wraparound() {
    let mut rig = rig(&Spec::new(2, 2, 1, 3));
    rig.spawn_feeder();
    rig.spawn_decoders(1);
    rig.spawn_copier();
    take_in_order(&mut rig, 3);
    rig.finish(3);
}

/// Model 7: a short last batch, delivered (`LastBatch::Partial`) or dropped
/// (`LastBatch::Drop`), and a consumer that first tries `try_pop`, then a `pop_for` that
/// may time out (naming a stage), then waits.
fn short_batches(last_batch: LastBatch) {
    let mut rig = rig(&Spec {
        last_batch,
        ..Spec::new(3, 2, 2, 3)
    });
    // H = 3 > 2 batches: the feeder gathers both and publishes END without waiting.
    rig.feed_then_spawn(1);
    let pipeline = &mut rig.pipeline;
    let first = match pipeline.try_pop().expect("try_pop") {
        TryPop::Batch(batch) => Some(batch),
        TryPop::NotReady => None,
        TryPop::End => panic!("End before batch 0"),
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
    assert_eq!(host_read(&rig.device, &first), [0, 1]);
    drop(first);
    let delivered = if last_batch == LastBatch::Partial {
        let short = rig.pipeline.pop().expect("pop").expect("the short batch");
        assert_eq!((short.seq(), short.samples(), short.len()), (1, 1, 8));
        short.synchronize().expect("synchronize");
        assert_eq!(host_read(&rig.device, &short), [2]);
        short.release(Fence::Sync).expect("release");
        2
    } else {
        1
    };
    assert_end(&mut rig, "End after the last batch");
    rig.finish(delivered);
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
    let mut rig = rig(&Spec {
        lease_timeout: Duration::from_millis(1),
        // Three host slots: the feeder runs to the source's end (two batches and END)
        // before the other stages start.
        ..Spec::new(3, 1, 1, 2)
    });
    rig.host_side_then_copier();
    let b0 = rig.pipeline.pop().expect("pop").expect("batch 0");
    match rig.pipeline.pop() {
        Err(Error::AllSlotsLeased { leased, .. }) => assert_eq!(leased, [(0, 0)]),
        other => panic!("expected AllSlotsLeased, got {other:?}"),
    }
    b0.release(Fence::Sync).expect("release");
    let b1 = rig.pipeline.pop().expect("pop").expect("batch 1");
    assert_eq!(b1.seq(), 1);
    drop(b1);
    assert_end(&mut rig, "End after 2 batches");
    rig.finish(2);
}

/// Model 9: an epoch's short batch in mid-stream. Samples of one item each, batches of two,
/// epochs of three samples: batches of 2, 1 (the end of epoch 0) and 1 (epoch 1). The lone
/// decode worker claims items in sequence order, so it also claims the missing second item
/// of batch 1, and finds that batch filled (or already copied and its slot reused): it must
/// go on to batch 2, not end. The feeder runs first, to the source's end.
fn epoch_ends() {
    let mut rig = rig(&Spec {
        epoch_len: Some(3),
        item_samples: 1,
        ..Spec::new(4, 1, 2, 4)
    });
    rig.feed_then_spawn(1);
    for (seq, want) in [vec![0, 1], vec![2], vec![3]].into_iter().enumerate() {
        let batch = rig.pipeline.pop().expect("pop").expect("a batch");
        assert_eq!(batch.seq(), seq as u64);
        assert_eq!(batch.sample_ids(), want, "batch {seq}'s ids");
        assert_eq!(batch.epoch(), u64::from(seq == 2));
        batch.synchronize().expect("synchronize");
        let read: Vec<u64> = host_read(&rig.device, &batch)
            .into_iter()
            .map(id_of)
            .collect();
        assert_eq!(read, want, "batch {seq}'s bytes");
        batch.release(Fence::Sync).expect("release");
    }
    assert_end(&mut rig, "End after 3 batches");
    rig.finish(3);
}

/// Model 10: `Batch::synchronize` parks on the copy count, as on cuda (READY points are
/// plain events there, for stream-side waits only; the completion thread publishes the
/// count when a run's COPIED record completes). The host side fills both batches first;
/// the copy thread enqueues them as one run, hands out both tokens and, at the end of the
/// stream, runs the copies (`finish_copies`, the device's only mover here) and publishes
/// the count. The consumer synchronizes on each batch, before or after that publish, and
/// reads it on the host: the wait must not end before the batch's copy ran, and a waiter
/// parked before the publish must be woken by it.
fn synchronize_parks() {
    let mut rig = parking_rig(false, 2);
    rig.host_side_then_copier();
    take_in_order(&mut rig, 2);
    rig.finish(2);
}

/// Model 11: the device is lost while the consumer synchronizes on a batch whose copy never
/// runs: the copy count fails (as the cuda completion thread's does on a device error, or
/// when it ends), which must end the parked wait with an error, and `pop` then reports the
/// pipeline's failure. Nothing hangs.
fn synchronize_device_lost() {
    let mut rig = parking_rig(true, 1);
    rig.host_side_then_copier();
    let batch = rig.pipeline.pop().expect("pop").expect("batch 0");
    assert!(
        batch.synchronize().is_err(),
        "the lost device's count failed"
    );
    batch.release(Fence::Sync).expect("release");
    assert!(matches!(rig.pipeline.pop(), Err(Error::Internal(_))));
    rig.finish(1);
}

/// A model: its name, its body, and the most preemptions it is explored at (`None`: as
/// many as `LOOM_MAX_PREEMPTIONS` says).
#[derive(Debug, Clone, Copy)]
pub struct Entry {
    /// What the model is called (in `MODEL` lines and by the tests).
    pub name: &'static str,
    /// The model, to run inside `loom::model`.
    pub body: fn(),
    /// The most preemptions it is explored at, whatever `LOOM_MAX_PREEMPTIONS` says.
    pub preemption_cap: Option<usize>,
}

/// Models 10 and 11's rig: four host slots, two device slots, `batches` batches of one
/// sample; `synchronize` parks on the copy count, which wakes it when published (and fails
/// at the end of the stream where `lost_at_end`).
fn parking_rig(lost_at_end: bool, batches: u64) -> Rig {
    rig(&Spec {
        device: ModelOptions {
            notifies: true,
            synchronize_parks: true,
            lost_at_end,
            ..ModelOptions::default()
        },
        ..Spec::new(4, 2, 1, batches)
    })
}

/// Model 12: batches of two fields and a description (a row, a step, extents), over two
/// device slots, three batches: batch 2 reuses slot 0 after batch 0's release. Every field
/// of a batch rides its one copy and READY point, and its description the slot protocol:
/// each popped batch must show, in both fields and in its rows, step and dims, its own
/// sample, whichever interleaving the copy thread and the releases take.
fn multi_field_batches() {
    let mut rig = rig(&Spec {
        fields: true,
        ..Spec::new(4, 2, 1, 3)
    });
    rig.host_side_then_copier();
    let stream = rig.device.stream();
    let fields = model_fields();
    let (a, b) = (fields.get("a").unwrap(), fields.get("b").unwrap());
    let device = &rig.device;
    let mut take = |seq: u64| {
        let batch = rig.pipeline.pop().expect("pop").expect("a batch");
        assert_eq!(batch.seq(), seq);
        assert_eq!(batch.sample_ids(), [seq], "batch {seq}'s rows");
        assert_eq!(batch.row_lens(), [1]);
        assert_eq!(batch.row_sources(), [(seq % 3) as u16]);
        assert_eq!(batch.step(), Some(seq), "batch {seq}'s step");
        assert_eq!(&batch.dims()[..2], [1, 2]);
        let (fa, fb) = (batch.field("a").unwrap(), batch.field("b").unwrap());
        assert_eq!(
            (fa.offset, fa.len, fb.offset, fb.len),
            (a.offset, 1, b.offset, 2)
        );
        batch.synchronize().expect("synchronize");
        let bytes = device.host_read(batch.slot(), batch.seq(), batch.len());
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        assert_eq!(
            (word(fa.offset), word(fb.offset), word(fb.offset + 8)),
            (seq, seq, seq + 1),
            "batch {seq}'s fields"
        );
        kernel_read(&stream, &batch);
        batch
    };
    let b0 = take(0);
    let b1 = take(1);
    let on = stream.clone();
    let releaser = thread::spawn(move || b0.release(Fence::Stream(&on)).expect("release"));
    let b2 = take(2);
    releaser.join().unwrap();
    drop(b1);
    drop(b2);
    assert_end(&mut rig, "End after 3 batches");
    rig.finish(3);
}

/// Pops batches `0..n` in order, each waited for on the host, read whole there and
/// released (`Fence::Sync`); then the end of the stream.
fn take_in_order(rig: &mut Rig, n: u64) {
    for seq in 0..n {
        let batch = rig.pipeline.pop().expect("pop").expect("a batch");
        assert_eq!(batch.seq(), seq);
        batch.synchronize().expect("synchronize");
        assert_eq!(host_read(&rig.device, &batch), [seq]);
        batch.release(Fence::Sync).expect("release");
    }
    assert_end(rig, "End after the last batch");
}

/// The next pop reports the end of the stream.
/// Model 13: four device slots, so a release wakes the copy thread only once two wait
/// (src/slot/release_wake.rs). The consumer holds all four batches; batches 0 and 1 are
/// released from another thread while the consumer pops batches 4 and 5: each pop that
/// finds nothing asks (HURRY, then a wake), and a release one slot short of the threshold
/// must wake the copy thread if it comes after the ask, whether or not the copy thread
/// took its slot before the release counted it.
fn lazy_release_wake() {
    // H = 7 > 6 batches: the feeder never waits, so the host side runs to completion first.
    let mut rig = rig(&Spec::new(7, 4, 1, 6));
    rig.host_side_then_copier();
    let mut held: Vec<_> = (0..4)
        .map(|seq| {
            let batch = rig.pipeline.pop().expect("pop").expect("a batch");
            assert_eq!(batch.seq(), seq);
            batch
        })
        .collect();
    let mut held = held.drain(..);
    let (b0, b1) = (held.next().unwrap(), held.next().unwrap());
    let releaser = thread::spawn(move || {
        b0.release(Fence::Sync).expect("release");
        b1.release(Fence::Sync).expect("release");
    });
    if mutation() == Mutation::AskWithoutWake {
        suppress_wakes(); // Seeded bug: the pop's request wakes nobody.
    }
    let b4 = rig.pipeline.pop().expect("pop").expect("batch 4");
    assert_eq!(b4.seq(), 4);
    let b5 = rig.pipeline.pop().expect("pop").expect("batch 5");
    assert_eq!(b5.seq(), 5);
    releaser.join().unwrap();
    for batch in held.chain([b4, b5]) {
        batch.release(Fence::Sync).expect("release");
    }
    assert_end(&mut rig, "End after 6 batches");
    rig.assert_all_popped();
    rig.finish(6);
}

fn assert_end(rig: &mut Rig, what: &str) {
    assert!(rig.pipeline.pop().expect("pop").is_none(), "{what}");
}

/// Every model, by name, with the most preemptions it is explored at. The wraparound
/// model has four threads (feeder, decode worker, copy thread, consumer) that all block on
/// each other: at two preemptions it ran past 25 minutes on 2 cores, so it is explored at
/// one (338,790 interleavings, about 1 minute, since `synchronize` waits on the copy count).
pub const MODELS: &[Entry] = &[
    entry("device_slot_reuse", device_slot_reuse, None),
    entry(
        "release_elsewhere_out_of_order",
        release_elsewhere_out_of_order,
        None,
    ),
    entry("host_slot_reuse", host_slot_reuse, None),
    entry("shutdown", shutdown, None),
    entry("decode_error", decode_error, None),
    entry("wraparound", wraparound, Some(1)),
    entry("short_batch_partial", short_batch_partial, None),
    entry("short_batch_dropped", short_batch_dropped, None),
    entry("all_slots_leased", all_slots_leased, None),
    entry("epoch_ends", epoch_ends, None),
    entry("synchronize_parks", synchronize_parks, None),
    entry("synchronize_device_lost", synchronize_device_lost, None),
    entry("multi_field_batches", multi_field_batches, None),
    entry("lazy_release_wake", lazy_release_wake, None),
];

const fn entry(name: &'static str, body: fn(), preemption_cap: Option<usize>) -> Entry {
    Entry {
        name,
        body,
        preemption_cap,
    }
}

/// The model of this name, if any.
pub fn model_named(name: &str) -> Option<&'static Entry> {
    MODELS.iter().find(|m| m.name == name)
}
