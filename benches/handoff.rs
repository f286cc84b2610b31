//! Token handoff between two threads, and the consumer's cost of `pop` + `release`.
//!
//! ```text
//! cargo bench -p pinring-benches --bench handoff
//! ```
//!
//! `handoff/*`: time per item handed from a producer thread to a consumer thread, for
//! - `pinring_pipeline`: pinring through its public API only — a cpu-backend pipeline of
//!   one-byte batches whose decoder writes nothing, so each item is a whole trip through
//!   the feeder, the decode pool, the copy thread, the ready ring (rtrb) and the consumer's
//!   `pop` + `release(Fence::Sync)` back to the copy thread (no `#[doc(hidden)]` hook: the
//!   raw ready ring *is* rtrb, measured on its own below);
//! - `rtrb`, `crossbeam_array_queue`, `std_sync_channel`: the raw queues, carrying a
//!   token of pinring's size (24 bytes), capacity 3 (pinring's ready ring with the
//!   default 2 device slots), the waiting side spinning briefly and then yielding.
//!
//! `consumer/pop_release`: one `pop` + `release(Fence::Sync)` when the batch is already in
//! the ready ring. 1024 device slots fill up while the clock is stopped; the clock runs
//! only while the consumer pops and releases them all.
//!
//! On a 2-core machine these numbers move with whatever else runs; the pipeline row in
//! particular has five threads (feeder, decode worker, copy thread, cpu copy stream,
//! consumer) sharing two cores.

use std::hint::black_box;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use crossbeam_queue::ArrayQueue;
use pinring::{decode_fn, Config, DeviceState, Fence, Pipeline, TryPop};

#[path = "criterion_config.rs"]
mod criterion_config;

/// What pinring's ready ring carries: sequence, device slot, sample count.
#[derive(Debug, Clone, Copy)]
struct Token {
    seq: u64,
    slot: usize,
    samples: usize,
}

impl Token {
    fn new(i: u64) -> Self {
        Token {
            seq: i,
            slot: (i % 2) as usize,
            samples: 1,
        }
    }
}

/// Capacity of the raw queues: pinring's ready ring holds `device_slots + 1` tokens.
const CAP: usize = 3;

/// Spins a little, then yields: the waiting side of the raw queues.
struct Backoff(u32);

impl Backoff {
    fn snooze(&mut self) {
        if self.0 < 64 {
            std::hint::spin_loop();
            self.0 += 1;
        } else {
            thread::yield_now();
        }
    }
}

/// Runs `produce` on a new thread and `consume` here; the time until both are done.
fn two_threads(produce: impl FnOnce() + Send + 'static, consume: impl FnOnce() -> u64) -> Duration {
    let t = Instant::now();
    let producer = thread::spawn(produce);
    black_box(consume());
    producer.join().expect("producer panicked");
    t.elapsed()
}

/// Hands `iters` tokens from a producer thread to this one through a raw queue, each side
/// spinning with [`Backoff`] while it is full (`push` gives the token back) or empty
/// (`pop` gives none).
fn spinning_items(
    iters: u64,
    mut push: impl FnMut(Token) -> Result<(), Token> + Send + 'static,
    mut pop: impl FnMut() -> Option<Token>,
) -> Duration {
    two_threads(
        move || {
            for i in 0..iters {
                let mut token = Token::new(i);
                let mut backoff = Backoff(0);
                while let Err(t) = push(token) {
                    token = t;
                    backoff.snooze();
                }
            }
        },
        move || {
            let mut sum = 0;
            for _ in 0..iters {
                let mut backoff = Backoff(0);
                loop {
                    if let Some(t) = pop() {
                        sum += t.seq + t.slot as u64 + t.samples as u64;
                        break;
                    }
                    backoff.snooze();
                }
            }
            sum
        },
    )
}

fn rtrb_items(iters: u64) -> Duration {
    let (mut p, mut c) = rtrb::RingBuffer::<Token>::new(CAP);
    spinning_items(
        iters,
        move |token| p.push(token).map_err(|rtrb::PushError::Full(t)| t),
        move || c.pop().ok(),
    )
}

fn array_queue_items(iters: u64) -> Duration {
    let q = std::sync::Arc::new(ArrayQueue::<Token>::new(CAP));
    let producer_q = q.clone();
    spinning_items(iters, move |token| producer_q.push(token), move || q.pop())
}

fn sync_channel_items(iters: u64) -> Duration {
    let (tx, rx) = mpsc::sync_channel::<Token>(CAP);
    two_threads(
        move || {
            for i in 0..iters {
                tx.send(Token::new(i)).expect("receiver alive");
            }
        },
        move || {
            let mut sum = 0;
            for _ in 0..iters {
                let t = rx.recv().expect("sender alive");
                sum += t.seq + t.slot as u64 + t.samples as u64;
            }
            sum
        },
    )
}

/// An endless pipeline of one-byte batches whose decoder writes nothing; a waiting stage
/// spins for `spin` before it parks.
fn tiny_pipeline(host_slots: usize, device_slots: usize, spin: Duration) -> Pipeline {
    let config = Config::builder()
        .batch_size(1)
        .bytes_per_sample(1)
        .host_slots(host_slots)
        .device_slots(device_slots)
        .decode_threads(1)
        .spin(spin)
        .build()
        .expect("valid config");
    let decoder = decode_fn(|_: (), _: &mut [u8]| Ok(()));
    Pipeline::new(config, decoder, std::iter::repeat(())).expect("pipeline starts")
}

fn handoff(c: &mut Criterion) {
    let mut group = c.benchmark_group("handoff");
    group.throughput(Throughput::Elements(1));
    group.bench_function("rtrb", |b| b.iter_custom(rtrb_items));
    group.bench_function("crossbeam_array_queue", |b| {
        b.iter_custom(array_queue_items)
    });
    group.bench_function("std_sync_channel", |b| b.iter_custom(sync_channel_items));
    // The default spin time, then none: with five pipeline threads on two cores, a
    // spinning stage takes the core from the one it waits for.
    for (name, spin) in [
        ("pinring_pipeline", Config::DEFAULT_SPIN),
        ("pinring_pipeline_spin0", Duration::ZERO),
    ] {
        let mut pipeline = tiny_pipeline(4, 2, spin);
        group.bench_function(name, |b| {
            b.iter_custom(|iters| {
                let t = Instant::now();
                for _ in 0..iters {
                    let batch = pipeline.pop().expect("pop").expect("endless source");
                    black_box(batch.seq());
                    batch
                        .release(Fence::Sync)
                        .expect("a Sync fence always captures");
                }
                t.elapsed()
            })
        });
    }
    group.finish();
}

/// Waits (clock stopped) until every device slot holds a batch waiting to be popped.
fn wait_all_leased(pipeline: &Pipeline) {
    loop {
        let stats = pipeline.stats();
        if stats
            .device_slots
            .iter()
            .all(|&(_, state)| state == DeviceState::Leased)
        {
            return;
        }
        thread::sleep(Duration::from_micros(200));
    }
}

fn consumer(c: &mut Criterion) {
    const SLOTS: usize = 1024;
    let mut group = c.benchmark_group("consumer");
    group.throughput(Throughput::Elements(1));
    // Criterion sizes runs by the measured (clock-running) time only; the refills between
    // rounds are about 50 times longer, so keep the measured part short.
    group.warm_up_time(Duration::from_millis(30));
    group.measurement_time(Duration::from_millis(100));
    let mut pipeline = tiny_pipeline(64, SLOTS, Config::DEFAULT_SPIN);
    group.bench_function("pop_release", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters;
            while left > 0 {
                wait_all_leased(&pipeline);
                let n = left.min(SLOTS as u64);
                let t = Instant::now();
                for _ in 0..n {
                    // The token is in the ring (its slot is LEASED): this never waits,
                    // except for the push that may trail the last LEASED store by a moment.
                    let batch = match pipeline.try_pop().expect("try_pop") {
                        TryPop::Batch(batch) => batch,
                        _ => pipeline.pop().expect("pop").expect("endless source"),
                    };
                    black_box(batch.seq());
                    batch
                        .release(Fence::Sync)
                        .expect("a Sync fence always captures");
                }
                total += t.elapsed();
                left -= n;
                // The rest of the round, untimed: with this many device slots a release
                // wakes the copy thread only once half of them wait (or a pop finds
                // nothing), and `wait_all_leased` does not pop.
                for _ in n..SLOTS as u64 {
                    let batch = pipeline.pop().expect("pop").expect("endless source");
                    batch
                        .release(Fence::Sync)
                        .expect("a Sync fence always captures");
                }
            }
            total
        })
    });
    group.finish();
}

criterion_group! {
    name = benches;
    config = criterion_config::ten_samples(Duration::from_millis(300), Duration::from_secs(1));
    targets = handoff, consumer
}
criterion_main!(benches);
