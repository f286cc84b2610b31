//! Shutdown never hangs: dropping or stopping the pipeline at any moment ends every one
//! of its threads within a bound these tests enforce, and leased batches stay valid.
//!
//! The tests count the process's threads named `pinring*` (Linux `/proc/self/task`), so
//! they run one at a time.

mod common;

use std::sync::{mpsc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use common::{check_batch, decoder, TestDecoder, BOUND};
use pinring::{Config, Error, Fence, Pipeline};

const SAMPLE: usize = 64;

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Threads of this process whose name starts with `prefix`.
fn threads_named(prefix: &str) -> usize {
    std::fs::read_dir("/proc/self/task")
        .map(|dir| {
            dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .filter(|name| name.starts_with(prefix))
                .count()
        })
        .unwrap_or(0)
}

/// The scheduler state (`R`, `S`, `D`, ...) of this process's thread named `name`, if one
/// is (Linux `/proc/self/task/*/stat`, third field).
fn thread_state(name: &str) -> Option<char> {
    std::fs::read_dir("/proc/self/task").ok()?.find_map(|t| {
        let task = t.ok()?.path();
        let comm = std::fs::read_to_string(task.join("comm")).ok()?;
        if comm.trim_end() != name {
            return None;
        }
        let stat = std::fs::read_to_string(task.join("stat")).ok()?;
        // "tid (comm) S ...": the state follows the last ')'.
        stat[stat.rfind(')')? + 1..].trim_start().chars().next()
    })
}

/// Threads of this process whose name starts with "pinring".
fn pinring_threads() -> usize {
    threads_named("pinring")
}

/// Waits, polling, until `done` holds, failing with `why()` past `bound`.
fn wait_until(bound: Duration, done: impl Fn() -> bool, why: impl Fn() -> String) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < bound, "{}", why());
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Waits until no pinring thread is left, failing past `bound`.
fn assert_threads_end_within(bound: Duration) {
    wait_until(
        bound,
        || pinring_threads() == 0,
        || {
            format!(
                "{} pinring threads still alive after {bound:?}",
                pinring_threads()
            )
        },
    );
}

/// Drops the pipeline, failing if the drop takes [`BOUND`] or longer.
fn drop_within_bound(p: Pipeline) {
    let start = Instant::now();
    drop(p);
    let took = start.elapsed();
    assert!(took < BOUND, "drop took {took:?}");
}

fn config(per: usize) -> pinring::ConfigBuilder {
    Config::builder()
        .batch_size(per)
        .bytes_per_sample(SAMPLE)
        .decode_threads(2)
}

/// A pipeline of `per`-sample batches over an endless source.
fn endless(per: usize) -> Pipeline {
    Pipeline::new(config(per).build().unwrap(), decoder(), 0u64..).unwrap()
}

#[test]
fn drop_with_batches_leased_keeps_them_valid_and_ends_every_thread() {
    let _serial = serial();
    let mut p = Pipeline::new(config(4).build().unwrap(), decoder(), 0..1000u64).unwrap();
    let a = p.pop().unwrap().unwrap();
    let b = p.pop().unwrap().unwrap();
    assert!(pinring_threads() > 0);
    drop_within_bound(p);
    check_batch(a.bytes(), 0, 4, SAMPLE, 4);
    check_batch(b.bytes(), 1, 4, SAMPLE, 4);
    b.release(Fence::Sync).unwrap();
    drop(a);
    assert_threads_end_within(BOUND);
}

#[test]
fn drop_while_decodes_run_waits_only_for_the_decode_in_progress() {
    let _serial = serial();
    let dec = TestDecoder {
        always_sleep: Duration::from_millis(150),
        ..decoder()
    };
    let p = Pipeline::new(config(8).build().unwrap(), dec, 0..1000u64).unwrap();
    std::thread::sleep(Duration::from_millis(30));
    // Each worker finishes at most its current 150 ms sample; then everything ends.
    drop_within_bound(p);
    assert_threads_end_within(BOUND);
}

#[test]
fn stopping_while_the_consumer_is_parked_in_pop_on_another_thread() {
    let _serial = serial();
    // The source blocks at its first sample until the test lets go: no batch can come.
    let (gate, blocked) = mpsc::channel::<()>();
    let blocked = Mutex::new(blocked);
    let gated = (0..1000u64).inspect(move |_| {
        let _ = blocked.lock().unwrap().recv();
    });
    let p = Pipeline::new(config(16).build().unwrap(), decoder(), gated).unwrap();
    let stop = p.stop_handle();
    let (done, finished) = mpsc::channel();
    let consumer = std::thread::Builder::new()
        .name("parked-consumer".into())
        .spawn(move || {
            let mut p = p;
            let result = p.pop(); // parks: the source gives nothing
            drop(p);
            done.send(()).unwrap();
            result
        })
        .unwrap();
    // Stopped only once the consumer sleeps in the kernel: parked inside `pop`.
    wait_until(
        BOUND,
        || thread_state("parked-consumer") == Some('S'),
        || "the consumer never parked in pop".to_owned(),
    );
    stop.stop();
    drop(gate); // the source goes on (and sees the stop)
    finished
        .recv_timeout(BOUND)
        .expect("the parked consumer must wake up and finish");
    assert!(matches!(consumer.join().unwrap(), Err(Error::Stopped)));
    drop(stop);
    assert_threads_end_within(BOUND);
}

#[test]
fn dropping_mid_stream_with_an_infinite_source() {
    let _serial = serial();
    let mut p = endless(4);
    for seq in 0..50 {
        let b = p.pop().unwrap().unwrap();
        check_batch(b.bytes(), seq, 4, SAMPLE, 4);
    }
    drop_within_bound(p);
    assert_threads_end_within(BOUND);
}

/// A pipeline of 2-sample batches, with `shutdown_timeout`, whose source blocks in `next`
/// at sample 6 until the returned sender goes (dropped); batches 0 to 2 already popped.
/// The receiver hears once the source has reached that sample.
fn blocked_after_three_batches(
    shutdown_timeout: Duration,
) -> (Pipeline, mpsc::Sender<()>, mpsc::Receiver<()>) {
    let (unblock, blocked) = mpsc::channel::<()>();
    let blocked = Mutex::new(blocked);
    let (entered_tx, entered) = mpsc::channel::<()>();
    let entered_tx = Mutex::new(entered_tx);
    let source = (0..1000u64).inspect(move |&g| {
        if g == 6 {
            let _ = entered_tx.lock().unwrap().send(());
            // Blocks until the test lets go (or the sender is dropped).
            let _ = blocked.lock().unwrap().recv();
        }
    });
    let config = config(2)
        .shutdown_timeout(shutdown_timeout)
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, decoder(), source).unwrap();
    for seq in 0..3 {
        assert_eq!(p.pop().unwrap().unwrap().seq(), seq);
    }
    (p, unblock, entered)
}

#[test]
fn a_blocked_source_does_not_hold_up_drop_past_the_shutdown_timeout() {
    let _serial = serial();
    let (p, unblock, _entered) = blocked_after_three_batches(Duration::from_millis(100));
    drop_within_bound(p);
    // The feeder is still inside the source's `next`: it ends as soon as that returns.
    assert!(pinring_threads() >= 1);
    drop(unblock);
    assert_threads_end_within(BOUND);
}

#[test]
fn stop_then_pop_reports_stopped_and_batches_already_out_stay_valid() {
    let _serial = serial();
    let mut p = endless(2);
    let a = p.pop().unwrap().unwrap();
    p.stop_handle().stop();
    assert!(matches!(p.pop(), Err(Error::Stopped)));
    assert!(matches!(p.try_pop(), Err(Error::Stopped)));
    check_batch(a.bytes(), 0, 2, SAMPLE, 2);
    drop(p);
    drop(a);
    assert_threads_end_within(BOUND);
}

/// A source blocked in `next` holds no device or pinned memory after the pipeline is
/// dropped: the backend goes at once (its copy stream thread, `pinring-cpucopy`, ends)
/// while the feeder is still inside `next`. Before, the feeder held the whole shared state,
/// backend and ring included, until `next` returned.
#[test]
fn a_blocked_source_keeps_no_device_or_pinned_memory_after_drop() {
    let _serial = serial();
    let (p, unblock, entered) = blocked_after_three_batches(Duration::from_millis(50));
    entered
        .recv_timeout(BOUND)
        .expect("the source reached its blocking sample");
    // The copy stream's thread exists, but on a loaded machine it may not have run yet
    // (the stream runs small copies inline while idle), and a thread takes its name when
    // it first runs: wait, bounded, until it shows under its name.
    wait_until(
        BOUND,
        || threads_named("pinring-cpucopy") == 1,
        || "the backend's copy stream thread never ran".into(),
    );
    drop(p);
    // The feeder is still inside the source's `next`...
    assert_eq!(threads_named("pinring-feeder"), 1);
    // ...but the backend is gone: its copy stream's thread ends.
    wait_until(
        BOUND,
        || threads_named("pinring-cpucopy") == 0,
        || "the backend outlived the pipeline while the source was blocked".into(),
    );
    drop(unblock);
    assert_threads_end_within(BOUND);
}

/// Pops steps `0..kept` of `p`, whose source skips every later step (so its feeder walks
/// over them inside the source's `next`), then drops it on a thread of its own — its drop
/// waits for the feeder: the tests set a shutdown timeout far past the bound — failing if
/// the drop has not returned within [`BOUND`]: the walk did not end when the pipeline
/// stopped.
fn pop_then_drop_while_walking(mut p: Pipeline, kept: u64) {
    for step in 0..kept {
        let batch = p
            .pop_for(BOUND)
            .unwrap()
            .expect("a step before the skipped ones");
        assert_eq!(batch.step(), Some(step));
        batch.release(Fence::Sync).unwrap();
    }
    let (done, dropped) = mpsc::channel();
    std::thread::spawn(move || {
        drop(p);
        let _ = done.send(());
    });
    assert!(
        dropped.recv_timeout(BOUND).is_ok(),
        "the pipeline's drop waited past {BOUND:?} for a feeder walking over skipped steps"
    );
}

/// Issue 28: a Documents run whose skipped steps reach far past its data (steps 5 to
/// 2**62, no epoch cap) walks them inside the source's `next`, on the feeder thread. A
/// dropped pipeline stops that walk: the feeder ends (its drop waits for it, the shutdown
/// timeout set long enough that a feeder walking on would hold it up), and no pinring
/// thread is left once the source is gone.
#[test]
fn dropping_a_documents_pipeline_ends_its_walk_over_skipped_steps() {
    use pinring::source::{write_shard, Documents, TokenShards};
    let _serial = serial();
    let dir = std::env::temp_dir().join(format!("pinring-shutdown-walk-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("train_000.bin");
    // 1000 documents of 10 tokens; a step of 19 + 1 tokens packs 2: 500 steps an epoch.
    let tokens: Vec<u16> = (0..10_000u32)
        .map(|i| {
            if i % 10 == 0 {
                50256
            } else {
                (i % 1000) as u16
            }
        })
        .collect();
    write_shard(&path, &tokens).unwrap();
    let docs = Documents::builder(TokenShards::open([&path]).unwrap())
        .tokens_per_batch(19)
        .max_seq_len(64)
        .skip_steps([(5, 1 << 62)])
        .build()
        .unwrap();
    let config = docs
        .config()
        .decode_threads(1)
        .shutdown_timeout(Duration::from_secs(3600))
        .build()
        .unwrap();
    let p = Pipeline::new(config, docs.decoder(), docs.iter()).unwrap();
    pop_then_drop_while_walking(p, 5);
    drop(docs);
    assert_threads_end_within(BOUND);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The same for a mixture of samplers without a stop rule: steps 3 to 2**62 skipped are
/// walked position by position in the source's `next`; dropping the pipeline ends it.
#[test]
fn dropping_a_mixture_pipeline_ends_its_walk_over_skipped_steps() {
    use pinring::source::{Mixture, TokenType, Tokens};
    let _serial = serial();
    let dir = std::env::temp_dir().join(format!("pinring-shutdown-mix-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("train_000.bin");
    let sampler = common::counting_windows(&path, 1000, 10);
    let mix = Mixture::builder([sampler.clone(), sampler])
        .batch_size(4)
        .skip_steps([(3, 1 << 62)])
        .build()
        .unwrap();
    let config = Config::builder()
        .batch_size(4)
        .bytes_per_sample(10 * 2)
        .decode_threads(1)
        .shutdown_timeout(Duration::from_secs(3600))
        .build()
        .unwrap();
    let p = Pipeline::new(config, mix.decoder(Tokens::new(TokenType::U16)), mix.iter()).unwrap();
    pop_then_drop_while_walking(p, 3);
    assert_threads_end_within(BOUND);
    std::fs::remove_dir_all(&dir).unwrap();
}
