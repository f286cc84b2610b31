//! The soundness issue's items that the cpu backend shows: each test failed on the code
//! before the fix (the comment says how) and passes now. Slow stages are driven by gates
//! and channels the test controls; a time bound only ever fails a hang.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use common::{check_batch, check_to_end, decoder, holds, Gate, BOUND};
use pinring::{Config, ConfigBuilder, ConfigError, CpuEvent, CpuStream, Error, Fence, Pipeline};

const SAMPLE: usize = 64;

/// Item 4: dropping the pipeline waits for the release fences still pending, so a "kernel"
/// queued on a CpuStream before the release still reads the slot. Before: the cpu backend
/// freed the slots at once and the kernel read freed memory (a 16 MiB slot is unmapped:
/// SIGSEGV).
#[test]
fn a_kernel_still_reading_a_released_slot_outlives_the_pipeline_drop() {
    const PER: usize = 4;
    const BIG: usize = 4 << 20; // 16 MiB batches: the slots are their own mapping
    let config = Config::builder()
        .batch_size(PER)
        .bytes_per_sample(BIG)
        .device_slots(1)
        .host_slots(1)
        .decode_threads(2)
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..PER as u64).unwrap();
    let mut batch = p.pop().unwrap().unwrap();
    let stream = CpuStream::new();
    batch.wait_on(&stream).unwrap();
    let gate = Gate::new();
    let (ptr, len) = (batch.device_ptr().as_ptr() as usize, batch.len());
    let (read_tx, read_rx) = mpsc::channel();
    {
        let gate = gate.clone();
        stream.enqueue(move || {
            gate.pass();
            // SAFETY: `len` bytes of the device slot of `p`, whose teardown waits for the
            // stream this runs on (the property under test).
            let intact = unsafe { holds(ptr, len, 0, PER, BIG) };
            read_tx.send(intact).unwrap();
        });
    }
    batch.release(Fence::Stream(&stream)).unwrap();
    let (dropped_tx, dropped_rx) = mpsc::channel();
    let dropper = std::thread::spawn(move || {
        drop(p);
        dropped_tx.send(()).unwrap();
    });
    gate.arrived(1);
    // The drop must wait for the kernel's fence; it may not return while the kernel is held.
    assert!(
        dropped_rx.recv_timeout(Duration::from_millis(200)).is_err(),
        "the pipeline's drop returned while a kernel still read a released slot"
    );
    gate.open();
    assert!(
        read_rx.recv_timeout(BOUND).unwrap(),
        "the kernel read another batch"
    );
    dropped_rx
        .recv_timeout(BOUND)
        .expect("the drop ends once the kernel has run");
    dropper.join().unwrap();
}

/// Samples per batch of the held-kernel tests.
const HELD_PER: usize = 2;

/// A pipeline of one device slot and `host_slots` host slots over eight batches of
/// [`HELD_PER`] samples.
fn one_device_slot(host_slots: usize) -> Pipeline {
    let config = Config::builder()
        .batch_size(HELD_PER)
        .bytes_per_sample(SAMPLE)
        .device_slots(1)
        .host_slots(host_slots)
        .decode_threads(1)
        .build()
        .unwrap();
    Pipeline::new(config, decoder(), 0..8 * HELD_PER as u64).unwrap()
}

/// Enqueues on `stream` a kernel that waits at `gate`, then reads batch 0 (`first`'s slot);
/// the flag says whether it read batch 0 intact.
fn held_kernel_reading(first: &pinring::Batch, stream: &CpuStream, gate: &Gate) -> Arc<AtomicBool> {
    let intact = Arc::new(AtomicBool::new(false));
    let (gate, read) = (gate.clone(), intact.clone());
    let (ptr, len) = (first.device_ptr().as_ptr() as usize, first.len());
    stream.enqueue(move || {
        gate.pass();
        // SAFETY: `len` bytes of `first`'s device slot, of a pipeline whose teardown waits
        // for the stream this runs on.
        let intact = unsafe { holds(ptr, len, 0, HELD_PER, SAMPLE) };
        read.store(intact, Ordering::Release);
    });
    intact
}

/// Waits on the host for `next` (a later lease of the held kernel's slot) on another thread
/// while the kernel waits at `gate`, then opens the gate and lets `stream` (the kernel's)
/// run; checks that `next` holds batch `seq`. Returns whether its copy completed while the
/// kernel was held (which it may not).
fn copied_while_held(next: pinring::Batch, seq: u64, gate: &Gate, stream: &CpuStream) -> bool {
    let (done_tx, done_rx) = mpsc::channel();
    let waiter = std::thread::spawn(move || {
        next.synchronize().unwrap();
        done_tx.send(()).unwrap();
        next
    });
    gate.arrived(1);
    let copied_early = done_rx.recv_timeout(Duration::from_millis(200)).is_ok();
    gate.open();
    stream.synchronize().unwrap();
    let next = waiter.join().unwrap();
    check_batch(next.bytes(), seq, HELD_PER, SAMPLE, HELD_PER);
    copied_early
}

/// Runs batch 0 of a one-device-slot pipeline through a kernel held at a gate on stream A,
/// releases it with `release`, then lets `after_release` do its part; returns whether the
/// kernel (which runs once the gate opens) read batch 0 intact, and whether the next copy
/// completed while the kernel was held (which it may not).
fn held_kernel(
    release: impl FnOnce(pinring::Batch, &CpuStream),
    after_release: impl FnOnce(&mut Pipeline),
) -> (bool, bool) {
    let mut p = one_device_slot(2);
    let mut first = p.pop().unwrap().unwrap();
    let stream = CpuStream::new();
    first.wait_on(&stream).unwrap();
    let gate = Gate::new();
    let intact = held_kernel_reading(&first, &stream, &gate);
    release(first, &stream);
    after_release(&mut p);
    // The next batch goes into the same slot: its copy must wait for the kernel.
    let second = p.pop().unwrap().unwrap();
    assert_eq!(second.slot(), 0);
    let copied_early = copied_while_held(second, 1, &gate, &stream);
    (intact.load(Ordering::Acquire), copied_early)
}

/// Item 5: a fence event recorded again later on an idle stream does not release the wait
/// already made (as CUDA's `cuStreamWaitEvent` waits for the record latest at the wait).
/// Before: each event kept one completed-epoch maximum, so the idle stream's later record
/// completed "the event" and the next copy overwrote the slot under the held kernel.
#[test]
fn rerecording_a_fence_event_elsewhere_does_not_move_the_fence() {
    let event = CpuEvent::new();
    let idle = CpuStream::new();
    let (intact, copied_early) = held_kernel(
        |batch, stream| {
            stream.record(&event);
            batch.release(Fence::Event(&event)).unwrap();
            idle.record(&event);
            idle.synchronize().unwrap(); // the later record has completed
        },
        |_| {},
    );
    assert!(!copied_early, "the next copy ran while the kernel was held");
    assert!(intact, "the held kernel read another batch");
}

/// Item 5, the second case: a slot's second lease released on an idle stream does not
/// release the first lease's fence. Before: the slot's one fence event kept the highest
/// completed record, so the second lease's record on the idle stream (completing at once)
/// let the copies queued behind the first lease's fence run under the held kernel.
#[test]
fn a_later_lease_released_on_an_idle_stream_does_not_release_an_earlier_fence() {
    let mut p = one_device_slot(3);
    let busy = CpuStream::new();
    let idle = CpuStream::new();
    let mut first = p.pop().unwrap().unwrap();
    first.wait_on(&busy).unwrap();
    let gate = Gate::new();
    let intact = held_kernel_reading(&first, &busy, &gate);
    first.release(Fence::Stream(&busy)).unwrap(); // fence: after the held kernel
                                                  // Lease 1 of the same slot: its copy waits behind lease 0's fence. Released at once on
                                                  // an idle stream, whose record completes at once.
    let second = p.pop().unwrap().unwrap();
    assert_eq!(second.slot(), 0);
    second.release(Fence::Stream(&idle)).unwrap();
    idle.synchronize().unwrap();
    // Lease 2: its copy is ready once lease 1's copy ran and its fence completed. It must
    // not complete while the kernel of lease 0 is held.
    let third = p.pop().unwrap().unwrap();
    let copied_early = copied_while_held(third, 2, &gate, &busy);
    assert!(
        !copied_early,
        "later copies into the slot ran while lease 0's kernel was held"
    );
    assert!(
        intact.load(Ordering::Acquire),
        "the held kernel read another batch"
    );
}

/// Item 7: dropping an unbound batch inside a CpuStream closure does not deadlock that
/// stream (the conservative fence records a marker on every stream; it no longer waits for
/// every stream, including the one running it, to drain).
#[test]
fn dropping_an_unbound_batch_inside_a_stream_closure_does_not_deadlock() {
    let config = Config::builder()
        .batch_size(2)
        .bytes_per_sample(SAMPLE)
        .decode_threads(1)
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..40u64).unwrap();
    let stream = CpuStream::new();
    let (done_tx, done_rx) = mpsc::channel();
    for _ in 0..5 {
        let batch = p.pop().unwrap().unwrap();
        let done = done_tx.clone();
        stream.enqueue(move || {
            drop(batch); // unbound: the conservative fence, on this stream's own thread
            done.send(()).unwrap();
        });
    }
    for _ in 0..5 {
        done_rx
            .recv_timeout(BOUND)
            .expect("the stream deadlocked in a conservative release");
    }
    // And the pipeline goes on: the slots came back.
    assert_eq!(5 + check_to_end(&mut p, 2, SAMPLE), 20);
}

/// A builder of one-sample batches of 8 bytes; the caller adds the settings under test.
fn one_sample_batches() -> ConfigBuilder {
    Config::builder().batch_size(1).bytes_per_sample(8)
}

/// A pipeline of ten one-sample batches into `device_slots` device slots, whose pops give
/// up on leased slots after `lease_timeout`.
fn leasing(device_slots: usize, lease_timeout: Duration) -> Pipeline {
    let config = one_sample_batches()
        .device_slots(device_slots)
        .lease_timeout(lease_timeout)
        .build()
        .unwrap();
    Pipeline::new(config, decoder(), 0..10u64).unwrap()
}

/// Item 8: a pop that cannot go on because every device slot is leased returns
/// `AllSlotsLeased` naming the leased slots and their batches, after the lease timeout;
/// before, it hung forever.
#[test]
fn a_pop_with_every_slot_leased_says_so_instead_of_hanging() {
    let mut p = leasing(2, Duration::from_millis(50));
    let a = p.pop().unwrap().unwrap();
    let b = p.pop().unwrap().unwrap();
    match p.pop() {
        Err(Error::AllSlotsLeased {
            leased,
            waited,
            device_slots,
        }) => {
            assert_eq!(leased, [(0, 0), (1, 1)]);
            assert_eq!(device_slots, 2);
            assert!(waited >= Duration::from_millis(50));
        }
        other => panic!("expected AllSlotsLeased, got {other:?}"),
    }
    let text = p.pop().unwrap_err().to_string();
    assert!(
        text.starts_with(
            "all 2 device slots are held by batches 0 and 1 that were never released: \
             release them (or drop them), or raise device_slots"
        ),
        "{text}"
    );
    // Released, the pipeline goes on where it was.
    drop(a);
    assert_eq!(p.pop().unwrap().unwrap().seq(), 2);
    drop(b);

    // A forgotten batch: its slot never comes back, and pop says so every time.
    let mut p = leasing(1, Duration::from_millis(20));
    std::mem::forget(p.pop().unwrap().unwrap());
    let text = p.pop().unwrap_err().to_string();
    assert!(
        text.starts_with(
            "the only device slot is held by batch 0, which was never released: release it \
             (or drop it), or raise device_slots"
        ),
        "{text}"
    );

    // The default is bounded.
    assert!(Config::DEFAULT_LEASE_TIMEOUT <= Duration::from_secs(60));
    let config = one_sample_batches().build().unwrap();
    assert_eq!(config.lease_timeout(), Config::DEFAULT_LEASE_TIMEOUT);
}

/// Issue 19 item 6: the lease clock runs across consecutive `pop_for` calls. A caller that
/// waits in short slices (the Python binding waits in 30 ms ones) with every device slot
/// held gets `AllSlotsLeased` once the lease timeout has passed over all of them; before,
/// each call restarted the clock, so the loop got `PopTimeout` forever (here: until the
/// bound, then the test fails).
#[test]
fn the_lease_clock_runs_across_short_pop_for_calls() {
    let lease_timeout = Duration::from_millis(40);
    let mut p = leasing(2, lease_timeout);
    let held = [p.pop().unwrap().unwrap(), p.pop().unwrap().unwrap()];
    let start = Instant::now();
    let mut slices = 0u32;
    let error = loop {
        match p.pop_for(Duration::from_millis(2)) {
            Err(Error::PopTimeout { .. }) => slices += 1,
            other => break other,
        }
        assert!(
            start.elapsed() < BOUND,
            "{slices} pop_for slices and still no AllSlotsLeased"
        );
    };
    match error {
        Err(Error::AllSlotsLeased {
            leased,
            waited,
            device_slots: 2,
        }) => {
            assert_eq!(leased, [(0, 0), (1, 1)]);
            assert!(waited >= lease_timeout, "{waited:?}");
        }
        other => panic!("expected AllSlotsLeased, got {other:?}"),
    }
    // Released, the next pop goes on (and the clock starts over for the next batch).
    drop(held);
    assert_eq!(p.pop_for(BOUND).unwrap().unwrap().seq(), 2);
}

/// Item 10: more decode threads than a pipeline supports is a `ConfigError` that says why.
#[test]
fn decode_threads_are_capped_with_a_reason() {
    for n in [1_000, 10_000, Config::MAX_DECODE_THREADS + 1] {
        let e = one_sample_batches().decode_threads(n).build().unwrap_err();
        assert_eq!(
            e,
            ConfigError::TooMany {
                field: "decode_threads",
                n,
                max: Config::MAX_DECODE_THREADS
            }
        );
        let text = e.to_string();
        assert!(
            text.contains("decode_threads") && text.contains("cores"),
            "{text}"
        );
    }
    assert!(one_sample_batches()
        .decode_threads(Config::MAX_DECODE_THREADS)
        .build()
        .is_ok());
}

/// Item 10: a host ring larger than the memory available is refused up front, before any
/// of it is mapped or touched.
#[test]
fn a_host_ring_larger_than_the_machine_is_refused_up_front() {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap();
    let available: u64 = info
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .map(|kib: u64| kib * 1024)
        .unwrap();
    let batch = usize::try_from(available).unwrap() + (1 << 20);
    let config = Config::builder()
        .batch_size(1)
        .batch_bytes(batch)
        .host_slots(1)
        .device_slots(1)
        .host_budget(usize::MAX)
        .device_budget(usize::MAX)
        .decode_threads(1)
        .build()
        .unwrap();
    let start = Instant::now();
    match Pipeline::new(config, decoder(), 0..1u64) {
        Err(Error::HostMemory {
            bytes,
            available: a,
        }) => {
            assert!(bytes as u64 > a);
            let text = Error::HostMemory {
                bytes,
                available: a,
            }
            .to_string();
            assert!(text.contains("host_slots"), "{text}");
        }
        Err(other) => panic!("expected HostMemory, got {other}"),
        Ok(_) => panic!("a ring larger than the machine's memory was mapped"),
    }
    assert!(start.elapsed() < BOUND);
}

/// Item 10: a decode pool that fails to start midway (here: thread stacks beyond the
/// address-space limit) is an error, and does not count its threads twice — before, the
/// threads that had started were counted out twice and the drop of the half-built pipeline
/// waited out the whole shutdown timeout (here an hour). Runs in a process of its own.
#[test]
fn a_decode_pool_that_fails_to_start_midway_is_an_error_promptly() {
    let exe = std::env::current_exe().unwrap();
    let command = format!(
        "ulimit -v 6291456; exec '{}' --exact pool_child --ignored --nocapture",
        exe.display()
    );
    let mut child = std::process::Command::new("sh")
        .args(["-c", &command])
        .env("RUST_MIN_STACK", (1u64 << 30).to_string())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > BOUND {
            let _ = child.kill();
            panic!("a pipeline whose decode pool failed midway hung in its drop");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("POOL_CHILD"), "{text}");
}

#[test]
#[ignore = "run by a_decode_pool_that_fails_to_start_midway_is_an_error_promptly"]
fn pool_child() {
    let config = one_sample_batches()
        .decode_threads(64)
        .shutdown_timeout(Duration::from_secs(3600))
        .build()
        .unwrap();
    match Pipeline::new(config, decoder(), 0..10u64) {
        Err(Error::Spawn { thread, .. }) => println!("POOL_CHILD spawn failed: {thread}"),
        Err(other) => println!("POOL_CHILD other error: {other}"),
        Ok(p) => {
            // The limit let every thread start (a machine with more address space): the
            // property is then not exercised, but nothing may hang either.
            drop(p);
            println!("POOL_CHILD started (limit not reached)");
        }
    }
}

/// Issue 19 item 7: a closure that panics on a `CpuStream` is an error on that stream, not
/// a hang: `synchronize` returns it, a batch whose slot was fenced on the stream is still
/// copied and readable (`Batch::bytes` returns), and the pipeline reports the error at
/// the next batch instead of waiting forever. Before, the panic killed the stream's
/// thread: `synchronize` and every wait on the stream hung (here: the child is killed at
/// the bound). In a process of its own: a failed user stream is marked by every
/// conservative fence in the process while it lives.
#[test]
fn a_panicking_stream_closure_is_an_error_on_its_stream_not_a_hang() {
    let (passed, text) = common::run_child("panicking_stream_child", &[]);
    assert!(
        passed && text.contains("PANICKING_STREAM_CHILD done"),
        "{text}"
    );
}

#[test]
#[ignore = "run by a_panicking_stream_closure_is_an_error_on_its_stream_not_a_hang"]
fn panicking_stream_child() {
    const PER: usize = 2;
    let config = Config::builder()
        .batch_size(PER)
        .bytes_per_sample(8)
        .device_slots(1)
        .pop_timeout(BOUND)
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, decoder(), 0..3 * PER as u64).unwrap();
    let stream = CpuStream::new();
    let mut first = p.pop().unwrap().unwrap();
    first.wait_on(&stream).unwrap();
    stream.enqueue(|| panic!("a kernel bug"));
    first.release(Fence::Stream(&stream)).unwrap();
    let error = stream.synchronize().unwrap_err();
    assert!(
        error.to_string().contains("panicked: a kernel bug"),
        "{error}"
    );
    // Batch 1 reuses the slot fenced on the failed stream: it is copied all the same.
    let second = p.pop().unwrap().unwrap();
    check_batch(second.bytes(), 1, PER, 8, PER);
    drop(second);
    // The pipeline saw its copy stream wait on the failed stream: an error, not a hang.
    match p.pop() {
        Err(Error::Backend { message, .. }) => {
            assert!(message.contains("a kernel bug"), "{message}")
        }
        other => panic!("expected the stream's failure, got {other:?}"),
    }
    // Later work on the stream still runs (and the stream stays failed).
    let ran = Arc::new(AtomicBool::new(false));
    let flag = ran.clone();
    stream.enqueue(move || flag.store(true, Ordering::Release));
    assert!(stream.synchronize().is_err());
    assert!(ran.load(Ordering::Acquire));
    println!("PANICKING_STREAM_CHILD done");
}

/// Issue 19 item 10: the samples' bookkeeping counts in the host budget. Every host and
/// device slot keeps its batch's description (a 64-byte head and 14 bytes a row: id,
/// length, source; a row per sample), which the config counts beside the ring;
/// every host slot keeps one cell per sample of the decoder's sample type, which
/// `Pipeline::new` counts before it allocates or starts anything. Before, only the ring
/// counted: both configs here started.
#[test]
fn per_sample_bookkeeping_counts_in_the_host_budget() {
    const BATCH: usize = 1 << 16;
    let with_host_budget = |budget| {
        Config::builder()
            .batch_size(BATCH)
            .bytes_per_sample(1)
            .host_budget(budget)
            .build()
    };
    // The descriptions: 6 slots × (64 + 2^16 × 14) bytes = 5.25 MiB, over a 1 MiB budget
    // the ring (4 × 64 KiB) fits in.
    let over = with_host_budget(1 << 20).unwrap_err();
    match over {
        ConfigError::OverBudget {
            bytes,
            budget,
            knob: "host_budget",
            ..
        } => assert_eq!(
            (bytes, budget),
            (4 * BATCH + 6 * (64 + BATCH * 14), 1 << 20)
        ),
        other => panic!("expected the host budget, got {other:?}"),
    }
    // The cells: 4 × 2^16 samples of 256 bytes (and more) = 64 MiB, over a 16 MiB budget
    // the ring and the descriptions fit in.
    let config = with_host_budget(16 << 20).unwrap();
    assert!(config.to_string().contains("sample cells"), "{config}");
    let decoder = pinring::decode_fn(|_: [u8; 256], _: &mut [u8]| Ok(()));
    match Pipeline::new(config, decoder, std::iter::repeat([0u8; 256])) {
        Err(Error::Config(ConfigError::OverBudget {
            bytes,
            budget,
            knob: "host_budget",
            ..
        })) => assert!(
            bytes > budget && bytes >= 4 * BATCH * 256,
            "{bytes} {budget}"
        ),
        other => panic!("expected the host budget, got {other:?}"),
    }
}

/// Issue 19 item 10, as reported: `FixedRecords` of 1-byte records in batches of 2^27
/// (about 20 GiB of sample cells beside a 512 MiB ring) is a budget error before anything
/// is allocated; before, the allocation aborted the process. And bookkeeping past the
/// memory the machine has (with the budget lifted) is `HostMemory`, up front.
#[test]
fn a_huge_batch_of_tiny_records_is_a_budget_error_not_an_abort() {
    use pinring::source::{FixedRecords, RecordBytes, Sampler};
    let path =
        std::env::temp_dir().join(format!("pinring-tiny-records-{}.bin", std::process::id()));
    std::fs::write(&path, vec![7u8; 4096]).unwrap();
    let sampler = Sampler::builder(FixedRecords::open([&path], 1).unwrap())
        .build()
        .unwrap();
    let config = Config::builder()
        .batch_size(1 << 27)
        .bytes_per_sample(1)
        .build()
        .unwrap();
    let start = Instant::now();
    match Pipeline::new(config, RecordBytes, sampler.iter()) {
        Err(Error::Config(ConfigError::OverBudget {
            knob: "host_budget",
            ..
        })) => {}
        other => panic!("expected the host budget, got {other:?}"),
    }
    // Lifted budget: the machine's memory is the limit (1 KiB samples: 512 GiB of cells).
    let config = Config::builder()
        .batch_size(1 << 27)
        .bytes_per_sample(1)
        .host_budget(usize::MAX)
        .build()
        .unwrap();
    let decoder = pinring::decode_fn(|_: [u8; 1024], _: &mut [u8]| Ok(()));
    match Pipeline::new(config, decoder, std::iter::repeat([0u8; 1024])) {
        Err(Error::HostMemory { bytes, available }) => assert!(bytes as u64 > available),
        other => panic!("expected HostMemory, got {other:?}"),
    }
    assert!(start.elapsed() < BOUND);
    std::fs::remove_file(&path).unwrap();
}
