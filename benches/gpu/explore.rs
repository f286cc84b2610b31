//! Section `explore` (only when named): the pipeline's knobs on the token workloads, the
//! driver calls of the copy thread's path, and the decoder alone (`EXPLORE` lines, for
//! tuning).

use std::time::{Duration, Instant};

use pinring::cudarc::driver::result;
use pinring::source::{TokenType, Tokens};
use pinring_benches::{cores, cores_but};

use crate::enqueue::enqueue_cost;
use crate::harness::{s, Gpu, Res};
use crate::report::{GB, GIB};
use crate::tokens::{drive_tokens, random_windows, token_pipeline_with, Knobs};

/// Not in the table: what the pipeline's knobs do to the small and large workloads,
/// and the decoder alone on one thread (`EXPLORE` lines, for tuning).
pub fn explore(gpu: &Gpu, shard: &str) -> Res {
    let k = Knobs::default();
    let h = Knobs::tuned;
    let small: Vec<(&str, Knobs)> = vec![
        ("H256 D32 cores-4", h(256, 32)),
        ("H256 D64 cores-4", h(256, 64)),
        ("H512 D64 cores-4", h(512, 64)),
        ("H256 D64 cores-3", h(256, 64).with_threads(cores_but(3))),
        ("H256 D64 cores-5", h(256, 64).with_threads(cores_but(5))),
        ("H256 D64 cores-6", h(256, 64).with_threads(cores_but(6))),
        ("H32 D32 cores-4", h(32, 32)),
        ("H64 D32 cores-4", h(64, 32)),
        ("H128 D32 cores-4", h(128, 32)),
        ("H128 D32 threads4", h(128, 32).with_threads(4)),
        ("H128 D32 threads8", h(128, 32).with_threads(8)),
        ("H128 D32 cores-2", h(128, 32).with_threads(cores_but(2))),
        (
            "H128 D32 spin0",
            Knobs {
                spin: Some(Duration::ZERO),
                ..h(128, 32)
            },
        ),
        (
            "H128 D32 spin200us",
            Knobs {
                spin: Some(Duration::from_micros(200)),
                ..h(128, 32)
            },
        ),
        (
            "H128 D32 pinned",
            Knobs {
                pin: true,
                ..h(128, 32)
            },
        ),
    ];
    let large: Vec<(&str, Knobs)> = vec![
        ("default", k),
        (
            "H8",
            Knobs {
                host_slots: Some(8),
                ..k
            },
        ),
        (
            "pinned",
            Knobs {
                pin: true,
                ..k.with_threads(cores() - 1)
            },
        ),
        ("threads8", k.with_threads(8)),
    ];
    // The small variants twice, in turn: one pass of each is within the host's noise.
    for (b, t1, unit, variants, rounds) in [
        (16usize, 4097u64, "batches/s", &small, 2),
        (64, 131_073, "GiB/s", &large, 1),
    ] {
        for (name, knobs) in (0..rounds).flat_map(|_| variants.iter()) {
            let mut p = token_pipeline_with(shard, b, t1, *knobs)?;
            let label = format!("explore_{b}_{}", name.replace(' ', "_"));
            let (n, secs, busiest) = drive_tokens(gpu, &label, &mut p, 200_000, 1.0)?;
            let rate = n as f64 / secs;
            let value = if unit == "GiB/s" {
                rate * (b as f64 * t1 as f64 * 4.0) / GIB
            } else {
                rate
            };
            println!("EXPLORE\t{b}x{t1}\t{name}\t{value:.2} {unit}\t{busiest}");
        }
    }
    driver_calls(gpu)?;
    enqueue_cost(gpu)?;
    // The decoder alone, one thread, into ordinary memory.
    let sampler = random_windows(shard, 4097, 3)?;
    let decoder = Tokens::new(TokenType::I32);
    let windows: Vec<_> = sampler.iter().take(50_000).collect();
    let mut out = vec![0u8; decoder.sample_bytes(4097)];
    let t = Instant::now();
    for w in windows {
        pinring::Decode::decode(&decoder, w, &mut out).map_err(s)?;
        std::hint::black_box(&out);
    }
    let per = t.elapsed().as_secs_f64() / 50_000.0;
    println!(
        "EXPLORE\tdecode_one_thread\t4097 tokens\t{:.2} us/window\t{:.1} GB/s out",
        per * 1e6,
        4097.0 * 4.0 / per / GB
    );
    let mut iter = sampler.iter();
    let t = Instant::now();
    for _ in 0..100_000 {
        std::hint::black_box(iter.next());
    }
    println!(
        "EXPLORE\tsampler_next\trandom\t{:.0} ns/window",
        t.elapsed().as_secs_f64() / 100_000.0 * 1e9
    );
    Ok(())
}

/// What the driver calls on the copy thread's path cost (ns a call, `EXPLORE` lines),
/// alone and while another thread polls an event in a tight loop (as a spinning
/// completion thread would).
pub fn driver_calls(gpu: &Gpu) -> Res {
    use pinring::cudarc::driver::sys;
    const N: u32 = 20_000;
    gpu.bind()?;
    let a = gpu.stream()?;
    let b = gpu.stream()?;
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING;
    let ev = result::event::create(flags).map_err(s)?;
    let other = result::event::create(flags).map_err(s)?;
    let (sa, sb) = (a.cu_stream(), b.cu_stream());
    let record = |e: sys::CUevent, st: sys::CUstream| -> Res {
        // SAFETY: live events and streams of the bound context.
        unsafe { result::event::record(e, st) }.map_err(s)
    };
    let wait = || -> Res {
        let flags = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
        // SAFETY: as above.
        unsafe { result::stream::wait_event(sa, ev, flags) }.map_err(s)
    };
    // SAFETY: as above (the `ev` query; `other`'s is the polling thread's).
    let query = |e: sys::CUevent| unsafe { result::event::query(e) };
    record(ev, sa)?;
    record(other, sb)?;
    a.synchronize().map_err(s)?;
    b.synchronize().map_err(s)?;
    let time = |f: &dyn Fn() -> Res| -> Res<f64> {
        let t = Instant::now();
        for _ in 0..N {
            f()?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e9 / f64::from(N))
    };
    let ops: [(&str, &dyn Fn() -> Res); 3] = [
        ("cuEventRecord", &|| record(ev, sa)),
        ("cuStreamWaitEvent", &wait),
        ("cuEventQuery(done)", &|| query(ev).map_err(s)),
    ];
    let polled = other as usize;
    for (name, op) in ops {
        let alone = time(op)?;
        a.synchronize().map_err(s)?;
        let stop = std::sync::atomic::AtomicBool::new(false);
        let beside = std::thread::scope(|scope| {
            scope.spawn(|| {
                let _ = gpu.ctx.bind_to_thread();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _ = query(polled as sys::CUevent);
                }
            });
            let r = time(op);
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            r
        })?;
        a.synchronize().map_err(s)?;
        println!(
            "EXPLORE\tdriver\t{name}\t{alone:.0} ns alone\t{beside:.0} ns beside a polling thread"
        );
    }
    for e in [ev, other] {
        // SAFETY: both events are idle (their streams synchronized) and not used again.
        unsafe { result::event::destroy(e) }.map_err(s)?;
    }
    Ok(())
}
