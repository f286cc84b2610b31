//! Waiting without burning, on the cpu backend (no GPU needed): the process CPU a pipeline
//! costs beside a slow consumer and beside a stalled one, and whether a pop timeout holds
//! on a loaded machine. The GPU benchmark (`benches/gpu/`, section `cpu`) measures the same on the cuda
//! backend.
//!
//! ```text
//! cargo bench -p pinring-benches --bench waiting
//! ```
//!
//! - `cpu beside a 10 ms/step consumer`: 16×4097 i32 token batches, the consumer takes
//!   10 ms per batch (a sleep: the trainer's step); process CPU time over wall time, with
//!   the decode workers' busy time (from `Stats`) taken out: what waiting costs. Target:
//!   at most 5% of one core.
//! - `beside a 100 µs/step consumer, D = 2`: the same batches, a consumer busy 100 µs a
//!   step: the release's p50 and the copy thread's own CPU share (`/proc/self/task`), what
//!   the copy thread's sleep before an expected release (src/cadence.rs) costs and saves.
//! - `cpu with the consumer stalled`: the consumer holds a batch and sleeps; the pipeline
//!   fills every slot and waits. Target: 0% (under 1% of one core).
//! - `pop_timeout(50 ms) on a starved pipeline`: a decoder that never finishes in time, two
//!   busy loops (threads of this process) beside it on every core of a small machine; each
//!   of 20 pops must return `PopTimeout` within 100 ms.
//!
//! Each result is a `ROW` line as the GPU benchmark prints them.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pinring::source::{Order, TokenShards, TokenType, Tokens};
use pinring::{decode_fn, Config, Error, Fence, Pipeline};
use pinring_benches::{cores, process_cpu_time, CpuMark, TempShard};

fn row(what: &str, value: &str, reference: &str, target: &str, met: bool) {
    let met = if met { "yes" } else { "NO" };
    println!("ROW\t{what}\t{value}\t{reference}\t{target}\t{met}");
}

/// A shard of `tokens` tokens in the temp dir (removed when dropped).
struct Shard(TempShard);

impl Shard {
    fn new(tokens: u32) -> Self {
        let mut i = 0u32;
        Shard(TempShard::write("waiting", tokens.into(), || {
            let token = (i * 7919 % 50257) as u16;
            i += 1;
            token
        }))
    }

    fn pipeline(&self) -> Pipeline {
        let decoder = Tokens::new(TokenType::I32);
        let sampler = TokenShards::open([self.0.path()])
            .expect("open the shard")
            .windows(4097)
            .order(Order::Random { seed: 1 })
            .build()
            .expect("sampler");
        let config = Config::builder()
            .batch_size(16)
            .bytes_per_sample(decoder.sample_bytes(4097))
            .build()
            .expect("config");
        Pipeline::new(config, decoder, sampler.iter()).expect("pipeline")
    }

    /// A pipeline whose first `batches` batches were popped and released back to back.
    fn warmed(&self, batches: usize) -> Pipeline {
        let mut p = self.pipeline();
        for _ in 0..batches {
            let b = p.pop().unwrap().unwrap();
            b.release(Fence::Sync).unwrap();
        }
        p
    }
}

fn beside_slow_consumer(shard: &Shard) {
    let mut p = shard.warmed(10);
    let steps = 100;
    let mark = CpuMark::now(p.stats().decode.busy).unwrap();
    for _ in 0..steps {
        let b = p.pop().unwrap().unwrap();
        std::thread::sleep(Duration::from_millis(10)); // the trainer's step
        b.release(Fence::Sync).unwrap();
    }
    let shares = mark.shares(p.stats().decode.busy).unwrap();
    row(
        "cpu beside a 10 ms/step consumer (cpu backend)",
        &format!("{:.1}% of a core", shares.waiting * 100.0),
        &format!(
            "process {:.1}% of a core over {:.2} s, decode busy {:.1}%",
            shares.process * 100.0,
            shares.wall.as_secs_f64(),
            shares.decode * 100.0
        ),
        "<= 5% of a core",
        shares.waiting <= 0.05,
    );
}

/// CPU time (utime + stime) of this process's threads named `name`, from
/// `/proc/self/task/*/stat` (USER_HZ ticks, 10 ms each).
fn thread_cpu(name: &str) -> Duration {
    let mut ticks = 0u64;
    for task in std::fs::read_dir("/proc/self/task")
        .into_iter()
        .flatten()
        .flatten()
    {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        // The fields after the command's closing parenthesis: state is the 3rd field,
        // utime the 14th and stime the 15th.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        for i in [11, 12] {
            ticks += fields.get(i).and_then(|f| f.parse().ok()).unwrap_or(0);
        }
    }
    Duration::from_millis(ticks * 10)
}

/// A consumer that works 100 µs a step (a busy loop) with the default two device slots:
/// the copy thread waits for each release (src/cadence.rs sleeps it until just before
/// one, then spins). The release's p50 and the copy thread's own CPU share.
fn beside_100us_consumer(shard: &Shard) {
    let mut p = shard.warmed(200);
    let steps = 5000;
    let mut releases = Vec::with_capacity(steps);
    let (copy0, t0) = (thread_cpu("pinring-copy"), Instant::now());
    for _ in 0..steps {
        let b = p.pop().unwrap().unwrap();
        let until = Instant::now() + Duration::from_micros(100);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        let t = Instant::now();
        b.release(Fence::Sync).unwrap();
        releases.push(t.elapsed());
    }
    let (copy, wall) = (thread_cpu("pinring-copy") - copy0, t0.elapsed());
    releases.sort();
    println!(
        "ROW\tbeside a 100 µs/step consumer, D = 2 (cpu backend)\trelease(Sync) p50 {:.2} µs\t\
         copy thread {:.0}% of a core over {:.2} s ({steps} steps)\t-\t-",
        releases[steps / 2].as_secs_f64() * 1e6,
        copy.as_secs_f64() / wall.as_secs_f64() * 100.0,
        wall.as_secs_f64()
    );
}

fn stalled_consumer(shard: &Shard) {
    let mut p = shard.pipeline();
    let held = p.pop().unwrap().unwrap();
    // Let the pipeline fill every slot it can, then measure a second of it waiting.
    std::thread::sleep(Duration::from_millis(300));
    let (cpu0, t0) = (process_cpu_time().unwrap(), Instant::now());
    std::thread::sleep(Duration::from_secs(1));
    let (cpu, wall) = (
        process_cpu_time().unwrap().saturating_sub(cpu0),
        t0.elapsed(),
    );
    let share = cpu.as_secs_f64() / wall.as_secs_f64();
    row(
        "cpu with the consumer stalled (cpu backend)",
        &format!("{:.2}% of a core", share * 100.0),
        "one batch held, every slot filled",
        "0% (< 1%)",
        share < 0.01,
    );
    drop(held);
}

fn deadline_under_load() {
    let stop = Arc::new(AtomicBool::new(false));
    let busy: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    let release = Arc::new(AtomicBool::new(false));
    let gate = release.clone();
    let decoder = decode_fn(move |_: u64, out: &mut [u8]| {
        while !gate.load(Ordering::Acquire) {
            std::thread::sleep(Duration::from_millis(1));
        }
        out.fill(0);
        Ok(())
    });
    let config = Config::builder()
        .batch_size(1)
        .bytes_per_sample(8)
        .decode_threads(1)
        .pop_timeout(Duration::from_millis(50))
        .build()
        .expect("config");
    let mut p = Pipeline::new(config, decoder, 0u64..).expect("pipeline");
    let mut took = Vec::new();
    for _ in 0..20 {
        let t = Instant::now();
        let r = p.pop();
        took.push(t.elapsed());
        assert!(matches!(r, Err(Error::PopTimeout { .. })), "{r:?}");
    }
    release.store(true, Ordering::Release);
    stop.store(true, Ordering::Relaxed);
    busy.into_iter().for_each(|t| t.join().unwrap());
    let within = took
        .iter()
        .filter(|t| **t < Duration::from_millis(100))
        .count();
    let worst = took.iter().max().copied().unwrap_or_default();
    row(
        "pop_timeout(50 ms), starved, two busy loops",
        &format!("{within} of 20 within 100 ms"),
        &format!(
            "worst {:.1} ms, median {:.1} ms ({} cores)",
            worst.as_secs_f64() * 1e3,
            {
                let mut v = took.clone();
                v.sort();
                v[v.len() / 2].as_secs_f64() * 1e3
            },
            cores()
        ),
        "20 of 20",
        within == 20,
    );
}

fn main() {
    let shard = Shard::new(4 << 20);
    beside_slow_consumer(&shard);
    beside_100us_consumer(&shard);
    stalled_consumer(&shard);
    deadline_under_load();
}
