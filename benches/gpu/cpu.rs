//! Section `cpu`: the process's CPU use beside a slow consumer, and with the consumer
//! stalled.

use std::time::{Duration, Instant};

use pinring::{CuStream, Fence};
use pinring_benches::{process_cpu_time, CpuMark};

use crate::harness::{s, Gpu, Res};
use crate::report::row;
use crate::tokens::token_pipeline;

/// Process CPU beside a consumer that takes 10 ms a step (decode busy time taken out),
/// and with the consumer stalled (a batch held, every slot filled): what waiting costs.
pub fn cpu(gpu: &Gpu, shard: &str) -> Res {
    gpu.bind()?;
    let stream = gpu.stream()?;
    let cs = CuStream::from(&stream);
    let mut p = token_pipeline(shard, 16, 4097, None)?;
    for _ in 0..10 {
        let mut b = p.pop().map_err(s)?.ok_or("ended")?;
        b.wait_on(&cs).map_err(s)?;
        b.release(Fence::Stream(&cs)).map_err(|e| s(e.error))?;
    }
    let steps = 100;
    let mark = CpuMark::now(p.stats().decode.busy).ok_or("no /proc/self/stat")?;
    for _ in 0..steps {
        let mut b = p.pop().map_err(s)?.ok_or("ended")?;
        b.wait_on(&cs).map_err(s)?;
        std::thread::sleep(Duration::from_millis(10)); // the trainer's step
        b.release(Fence::Stream(&cs)).map_err(|e| s(e.error))?;
    }
    let shares = mark
        .shares(p.stats().decode.busy)
        .ok_or("no /proc/self/stat")?;
    row(
        "cpu beside a 10 ms/step consumer (cuda)",
        &format!("{:.1}% of a core", shares.waiting * 100.0),
        &format!(
            "process {:.1}%, decode busy {:.1}% (of a core), {:.2} s",
            shares.process * 100.0,
            shares.decode * 100.0,
            shares.wall.as_secs_f64()
        ),
        "<= 5% of a core",
        Some(shares.waiting <= 0.05),
    );
    let held = p.pop().map_err(s)?.ok_or("ended")?;
    std::thread::sleep(Duration::from_millis(300));
    let cpu0 = process_cpu_time().ok_or("no /proc/self/stat")?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs(1));
    let cpu = process_cpu_time()
        .ok_or("no /proc/self/stat")?
        .saturating_sub(cpu0);
    let share = cpu.as_secs_f64() / t0.elapsed().as_secs_f64();
    row(
        "cpu with the consumer stalled (cuda)",
        &format!("{:.2}% of a core", share * 100.0),
        "one batch held, every slot filled",
        "0% (< 1%)",
        Some(share < 0.01),
    );
    drop(held);
    Ok(())
}
