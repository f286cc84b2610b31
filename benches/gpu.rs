//! The GPU benchmark: pinring's cuda backend against the limits and the peers, one process.
//! Needs an NVIDIA GPU; `scripts/gpu-check.sh --run` (or `--bench`) builds it here, makes
//! its inputs there (the token shard, the PyTorch figures from
//! `benches/torch_dataloader.py`), runs it and prints the table.
//!
//! ```text
//! cargo bench -p pinring-benches --bench gpu -- --shard PATH [--torch FILE] [--only SECTION[,SECTION...]]
//! ```
//!
//! `--shard`: a uint16 token shard (`make_shard`), at least 10 Mi tokens.
//! `--torch`: `TORCH\t<key>\t<value>` lines from `benches/torch_dataloader.py`.
//! Sections: transport, small, large, overlap, scaling, consumer, cpu (default: all of
//! these); `explore` (only when named) tries the pipeline's knobs on the token workloads
//! and prints `EXPLORE` lines, for tuning; `enqueue` (only when named) prints what one
//! `cuMemcpyHtoDAsync` call costs by size and kind of pinned memory, and what stream-side
//! waits on completed events cost the copy stream. The kernels (`hold`, `spin`) are the
//! GPU suite's, shared through `tests/gpu/harness.rs`.
//!
//! Diagnostics, set in the environment: `PINRING_BENCH_TRACE=DIR` writes each section's
//! pipeline timeline (Perfetto JSON) there; `PINRING_BENCH_TIMELINE=1` prints the overlap
//! section's GPU-side waits before each kernel (`TIMELINE` lines);
//! `PINRING_BENCH_CONSUMER_SPLIT=1` prints the token consumers' time per batch in `pop`,
//! `wait_on` and `release` (`SPLIT` lines).
//!
//! Each result is a line `ROW\t<what>\t<pinring>\t<reference>\t<target>\t<met>`; stage
//! times behind it are `STATS\t...` lines; a section that fails prints
//! `RESULT\tbench_<section>\tFAIL\t<why>`. GB = 1e9 bytes, GiB = 2^30 bytes.

use std::process::ExitCode;

#[cfg(feature = "cuda")]
#[path = "../tests/gpu/harness.rs"]
mod harness;

const USAGE: &str = "usage: gpu --shard PATH [--torch FILE] \
    [--only transport,small,large,overlap,scaling,consumer,cpu,explore,enqueue]";

const SECTIONS: &[&str] = &[
    "explore",
    "enqueue",
    "transport",
    "small",
    "large",
    "overlap",
    "scaling",
    "consumer",
    "cpu",
];

/// The command line.
#[derive(Debug)]
#[cfg_attr(not(feature = "cuda"), allow(dead_code))]
struct Args {
    shard: String,
    torch: Option<String>,
    only: Vec<String>,
}

fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let (mut shard, mut torch, mut only) = (None, None, Vec::new());
    let mut it = args.into_iter();
    while let Some(arg) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--shard" => shard = Some(value()?),
            "--torch" => torch = Some(value()?),
            "--only" => {
                for s in value()?.split(',').filter(|s| !s.is_empty()) {
                    if !SECTIONS.contains(&s) {
                        return Err(format!("--only: unknown section `{s}`"));
                    }
                    only.push(s.to_string());
                }
            }
            // What `cargo bench` passes to a harness-less bench.
            "--bench" => {}
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unexpected argument `{other}`")),
        }
    }
    Ok(Args {
        shard: shard.ok_or("--shard is required")?,
        torch,
        only,
    })
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(why) => {
            if !why.is_empty() {
                eprintln!("error: {why}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    #[cfg(feature = "cuda")]
    return bench::main(&args);
    #[cfg(not(feature = "cuda"))]
    {
        let _ = args;
        eprintln!("the GPU benchmark needs the `cuda` feature");
        ExitCode::from(2)
    }
}

#[cfg(feature = "cuda")]
mod bench {
    use std::collections::HashMap;
    use std::process::ExitCode;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use pinring::cudarc::driver::{result, sys, CudaStream, DevicePtr};
    use pinring::source::{Order, TokenShards, TokenType, Tokens};
    use pinring::{
        decode_fn, Config, ConfigBuilder, CuStream, Cuda, CudaOptions, DeviceState, Fence,
        Pipeline, StageTimes, Stats, TryPop,
    };

    use super::Args;

    use crate::harness::{s, Gpu, Res};
    use pinring_benches::{median, percentile, process_cpu_time};

    const GB: f64 = 1e9;
    const GIB: f64 = (1u64 << 30) as f64;

    fn row(what: &str, pinring: &str, reference: &str, target: &str, met: Option<bool>) {
        let met = match met {
            Some(true) => "yes",
            Some(false) => "NO",
            None => "-",
        };
        println!("ROW\t{what}\t{pinring}\t{reference}\t{target}\t{met}");
    }

    /// Stage times between two snapshots, as fractions of `wall`, on one `STATS` line;
    /// returns the stage that was busiest.
    fn stats_line(name: &str, before: &Stats, after: &Stats, wall: Duration) -> String {
        let frac = |a: StageTimes, b: StageTimes| {
            (
                (b.busy.saturating_sub(a.busy)).as_secs_f64() / wall.as_secs_f64(),
                (b.waited.saturating_sub(a.waited)).as_secs_f64() / wall.as_secs_f64(),
            )
        };
        let stages = [
            ("source", frac(before.source, after.source)),
            ("decode", frac(before.decode, after.decode)),
            ("copy", frac(before.copy, after.copy)),
        ];
        let stall = (after
            .consumer_stall_time
            .saturating_sub(before.consumer_stall_time))
        .as_secs_f64()
            / wall.as_secs_f64();
        let mut line = format!("STATS\t{name}");
        for (stage, (busy, waited)) in stages {
            line.push_str(&format!(
                "\t{stage} busy {:.0}% waited {:.0}%",
                busy * 100.0,
                waited * 100.0
            ));
        }
        let batches = after.batches - before.batches;
        let copies = (after.copies - before.copies).max(1);
        line.push_str(&format!(
            "\tcopy runs of {:.1} batches",
            batches as f64 / copies as f64
        ));
        line.push_str(&format!(
            "\tconsumer stalled {:.0}% ({} of {} pops)",
            stall * 100.0,
            after.consumer_stalls - before.consumer_stalls,
            after.batches - before.batches
        ));
        line.push_str(&format!("\t{}", after.since(before).bottleneck().1));
        println!("{line}");
        let (busiest, (busy, _)) = stages
            .into_iter()
            .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
            .expect("three stages");
        format!("{busiest} busy {:.0}%", busy * 100.0)
    }

    // ----------------------------------------------------------------------------------
    // 1. Transport: a decoder that writes nothing vs raw copies from the same memory.

    fn nothing_config(size: usize, host_slots: usize) -> Res<Config<Cuda>> {
        nothing_config_slots(size, host_slots, 2)
    }

    fn nothing_config_slots(
        size: usize,
        host_slots: usize,
        device_slots: usize,
    ) -> Res<Config<Cuda>> {
        nothing_builder(size, host_slots, device_slots)
            .cuda(CudaOptions::ordinal(0))
            .build()
            .map_err(s)
    }

    /// The configuration of a pipeline of `size`-byte batches that a decoder writing
    /// nothing fills, before its backend is chosen.
    fn nothing_builder(size: usize, host_slots: usize, device_slots: usize) -> ConfigBuilder {
        let builder = Config::builder()
            .batch_size(1)
            .bytes_per_sample(size)
            .host_slots(host_slots)
            .device_slots(device_slots)
            .decode_threads(2)
            .pop_timeout(Duration::from_secs(20));
        if std::env::var_os(TRACE_DIR).is_some() {
            builder.trace(1 << 16)
        } else {
            builder
        }
    }

    /// Pops and releases (nothing on the device reads them) every batch left in `p`; its
    /// source ended, its registered ring is then idle, for raw copies out of it.
    fn drain(p: &mut Pipeline<Cuda>) -> Res {
        while let Some(b) = p.pop().map_err(s)? {
            b.release(Fence::Sync).map_err(|e| s(e.error))?;
        }
        Ok(())
    }

    /// A pipeline of `config` run through a source of one batch per host slot, then
    /// drained: pinned memory of the pipeline's own kind, idle, for raw copies.
    fn idle_pipeline(config: Config<Cuda>) -> Res<Pipeline<Cuda>> {
        let batches = config.host_slots();
        let mut p =
            Pipeline::new(config, nothing(), std::iter::repeat_n((), batches)).map_err(s)?;
        drain(&mut p)?;
        Ok(p)
    }

    fn nothing() -> impl pinring::Decode<Sample = ()> {
        decode_fn(|_: (), _: &mut [u8]| Ok(()))
    }

    /// Back-to-back `cuMemcpyHtoDAsync` of `size` bytes from the pipeline's own registered
    /// ring (idle: its source has ended) into two device buffers; seconds per copy.
    fn raw_copies(gpu: &Gpu, p: &Pipeline<Cuda>, size: usize, n: usize) -> Res<f64> {
        let (base, len) = p.backend().host_ring();
        let slots = len / size;
        if slots == 0 {
            return Err("ring smaller than a batch".into());
        }
        let stride = len / slots;
        let stream = gpu.ctx.new_stream().map_err(s)?;
        let dst = stream.alloc_zeros::<u8>(2 * size).map_err(s)?;
        let dst_ptr = dst.device_ptr(&stream).0;
        let raw = stream.cu_stream();
        let copy = |i: usize| -> Res {
            // SAFETY: slot i % slots starts inside the ring (slots × stride ≤ its length).
            let start = unsafe { base.add((i % slots) * stride) };
            // SAFETY: `size` bytes from `start` lie in the registered ring, which nothing
            // writes now (the pipeline's source has ended).
            let src = unsafe { std::slice::from_raw_parts(start, size) };
            // SAFETY: the destination lies in `dst`, alive until the stream is synchronized
            // below; the source stays registered while the pipeline lives.
            unsafe { result::memcpy_htod_async(dst_ptr + ((i % 2) * size) as u64, src, raw) }
                .map_err(s)
        };
        for i in 0..3 {
            copy(i)?;
        }
        stream.synchronize().map_err(s)?;
        let t = Instant::now();
        for i in 0..n {
            copy(i)?;
        }
        stream.synchronize().map_err(s)?;
        let secs = t.elapsed().as_secs_f64() / n as f64;
        drop(dst);
        Ok(secs)
    }

    /// The overlap bench's schedule without pinring: copies into two device buffers on
    /// one stream, a kernel holding another stream `ns` per copy, each copy waiting
    /// (stream-side) for the kernel that read its buffer two steps before; all enqueued
    /// from this thread. Seconds per step.
    fn raw_overlap(gpu: &Gpu, p: &Pipeline<Cuda>, size: usize, ns: u64, n: usize) -> Res<f64> {
        let (base, len) = p.backend().host_ring();
        let slots = len / size;
        if slots == 0 {
            return Err("ring smaller than a batch".into());
        }
        let copies = gpu.ctx.new_stream().map_err(s)?;
        let compute = gpu.ctx.new_stream().map_err(s)?;
        let dst = copies.alloc_zeros::<u8>(2 * size).map_err(s)?;
        let dst_ptr = dst.device_ptr(&copies).0;
        let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING;
        let events: Vec<sys::CUevent> = (0..4)
            .map(|_| result::event::create(flags).map_err(s))
            .collect::<Res<_>>()?;
        let (copied, computed) = (&events[..2], &events[2..]);
        let wait = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
        let step = |i: usize, timeline: &mut Option<Timeline>| -> Res {
            let b = i % 2;
            if i >= 2 {
                // SAFETY: live events and streams of the bound context.
                unsafe { result::stream::wait_event(copies.cu_stream(), computed[b], wait) }
                    .map_err(s)?;
            }
            // SAFETY: slot i % slots starts inside the ring (slots × stride ≤ its length).
            let start = unsafe { base.add((i % slots) * (len / slots)) };
            // SAFETY: `size` bytes from `start` lie in the registered ring, which nothing
            // writes (the pipeline's source has ended).
            let src = unsafe { std::slice::from_raw_parts(start, size) };
            let to = dst_ptr + (b * size) as u64;
            // SAFETY: the destination lies in `dst`, alive until both streams are
            // synchronized below; the source stays registered while the pipeline lives.
            unsafe { result::memcpy_htod_async(to, src, copies.cu_stream()) }.map_err(s)?;
            // SAFETY: as above.
            unsafe { result::event::record(copied[b], copies.cu_stream()) }.map_err(s)?;
            // SAFETY: as above.
            unsafe { result::stream::wait_event(compute.cu_stream(), copied[b], wait) }
                .map_err(s)?;
            Timeline::hold(timeline, gpu, &compute, ns)?;
            // SAFETY: as above.
            unsafe { result::event::record(computed[b], compute.cu_stream()) }.map_err(s)?;
            Ok(())
        };
        for i in 0..4 {
            step(i, &mut None)?;
        }
        compute.synchronize().map_err(s)?;
        copies.synchronize().map_err(s)?;
        let mut timeline = Timeline::new(&compute);
        let t = Instant::now();
        for i in 4..4 + n {
            step(i, &mut timeline)?;
        }
        compute.synchronize().map_err(s)?;
        copies.synchronize().map_err(s)?;
        let secs = t.elapsed().as_secs_f64() / n as f64;
        if let Some(t) = timeline {
            t.report("without pinring", 0)?;
        }
        for e in events {
            // SAFETY: idle (both streams synchronized) and not used again.
            unsafe { result::event::destroy(e) }.map_err(s)?;
        }
        drop(dst);
        Ok(secs)
    }

    /// (pipeline GB/s, raw GB/s) for `size`-byte batches.
    fn transport_once(gpu: &Gpu, size: usize, n: usize, (h, d): (usize, usize)) -> Res<(f64, f64)> {
        const WARM: usize = 10;
        gpu.bind()?;
        let mut p = Pipeline::new(
            nothing_config_slots(size, h, d)?,
            nothing(),
            std::iter::repeat_n((), n + WARM),
        )
        .map_err(s)?;
        let (mut t0, mut t1, mut before) = (None, None, None);
        while let Some(batch) = p.pop().map_err(s)? {
            let k = batch.seq() as usize;
            if k + 1 == WARM {
                batch.synchronize().map_err(s)?;
                t0 = Some(Instant::now());
                before = Some(p.stats());
            }
            if k + 1 == n + WARM {
                batch.synchronize().map_err(s)?;
                t1 = Some(Instant::now());
            }
            // Nothing on the device reads the batch: no fence needed.
            batch.release(Fence::Sync).map_err(|e| s(e.error))?;
        }
        let (t0, t1) = (t0.ok_or("no warm-up")?, t1.ok_or("no last batch")?);
        let pipe = (n * size) as f64 / (t1 - t0).as_secs_f64() / GB;
        let before = before.ok_or("no warm-up")?;
        stats_line(
            &format!("transport_{}MiB", size >> 20),
            &before,
            &p.stats(),
            t1 - t0,
        );
        let raw = size as f64 / raw_copies(gpu, &p, size, n)? / GB;
        Ok((pipe, raw))
    }

    fn transport(gpu: &Gpu) -> Res {
        for (mib, n) in [(1usize, 3000usize), (8, 400), (64, 60)] {
            let size = mib << 20;
            let (mut pipe, mut raw) = (Vec::new(), Vec::new());
            // Slots by the sizing guide's rule: enough of them to cover the per-batch
            // hand-off (pop, release, the copy thread's wake-up), which at 1 MiB (about
            // 20 us a copy) is no longer small beside a copy: 32 MiB of host ring and
            // 8 MiB of device slots, and at least the defaults (H4 D2).
            let slots = ((32 << 20) / size).max(4);
            let slots = (slots, ((8 << 20) / size).max(2));
            for _ in 0..3 {
                let (p, r) = transport_once(gpu, size, n, slots)?;
                pipe.push(p);
                raw.push(r);
            }
            let (p, r) = (median(&mut pipe), median(&mut raw));
            row(
                &format!(
                    "transport {mib} MiB (writes nothing), H{} D{}",
                    slots.0, slots.1
                ),
                &format!("{p:.1} GB/s"),
                &format!("raw H2D {r:.1} GB/s: {:.1}%", 100.0 * p / r),
                ">= 95% of raw",
                Some(p / r >= 0.95),
            );
        }
        Ok(())
    }

    // ----------------------------------------------------------------------------------
    // 2, 3, 5. Token batches from the shard.

    /// Settings the explore section varies (`None`: the default).
    #[derive(Debug, Clone, Copy, Default)]
    struct Knobs {
        threads: Option<usize>,
        host_slots: Option<usize>,
        device_slots: Option<usize>,
        spin: Option<Duration>,
        /// Copy thread on core 0, decode workers on the other cores.
        pin: bool,
        /// Batches the source holds (endless when `None`).
        batches: Option<usize>,
    }

    /// A pipeline of `b` windows of `t1` tokens at random offsets, widened to i32.
    fn token_pipeline(
        shard: &str,
        b: usize,
        t1: u64,
        threads: Option<usize>,
    ) -> Res<Pipeline<Cuda>> {
        let knobs = Knobs {
            threads,
            ..Knobs::default()
        };
        token_pipeline_with(shard, b, t1, knobs)
    }

    fn token_pipeline_with(shard: &str, b: usize, t1: u64, knobs: Knobs) -> Res<Pipeline<Cuda>> {
        let decoder = Tokens::new(TokenType::I32);
        let sampler = TokenShards::open([shard])
            .map_err(s)?
            .windows(t1)
            .order(Order::Random { seed: 1 })
            .build()
            .map_err(s)?;
        let mut builder = Config::builder()
            .batch_size(b)
            .bytes_per_sample(decoder.sample_bytes(t1))
            .pop_timeout(Duration::from_secs(20));
        if let Some(n) = knobs.threads {
            builder = builder.decode_threads(n);
        }
        if let Some(n) = knobs.host_slots {
            builder = builder.host_slots(n);
        }
        if let Some(n) = knobs.device_slots {
            builder = builder.device_slots(n);
        }
        if let Some(n) = knobs.spin {
            builder = builder.spin(n);
        }
        if knobs.pin {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            builder = builder.copy_core(0).decode_cores(1..cores.max(2));
        }
        if std::env::var_os(TRACE_DIR).is_some() {
            builder = builder.trace(1 << 16);
        }
        let config = builder.cuda(CudaOptions::ordinal(0)).build().map_err(s)?;
        let windows = sampler
            .iter()
            .take(knobs.batches.map_or(usize::MAX, |n| n * b));
        Pipeline::new(config, decoder, windows).map_err(s)
    }

    /// Context switches so far of this process's threads, summed by name (`CTXSW` line):
    /// involuntary ones mean a thread was preempted (more runnable threads than cores).
    fn context_switches(name: &str) {
        let mut by: std::collections::BTreeMap<String, (u64, u64, u32)> = Default::default();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return;
        };
        for task in tasks.flatten() {
            let path = task.path();
            let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
            let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
            let field = |key: &str| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix(key))
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .unwrap_or(0)
            };
            let group = comm
                .trim()
                .trim_end_matches(|c: char| c.is_ascii_digit())
                .to_string();
            let e = by.entry(group).or_default();
            e.0 += field("voluntary_ctxt_switches:");
            e.1 += field("nonvoluntary_ctxt_switches:");
            e.2 += 1;
        }
        let cells: Vec<String> = by
            .iter()
            .map(|(g, (v, n, t))| format!("{g} x{t}: {v} vol {n} invol"))
            .collect();
        println!("CTXSW\t{name}\t{}", cells.join("\t"));
    }

    /// When set, token pipelines record a trace, written to `$PINRING_BENCH_TRACE/NAME.json`
    /// after each run (for scripts/trace-summary.py).
    const TRACE_DIR: &str = "PINRING_BENCH_TRACE";

    fn write_trace(p: &Pipeline<Cuda>, name: &str) -> Res {
        let Some(dir) = std::env::var_os(TRACE_DIR) else {
            return Ok(());
        };
        let file: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let path = std::path::Path::new(&dir).join(format!("{file}.json"));
        let out = std::fs::File::create(&path).map_err(s)?;
        p.write_trace(std::io::BufWriter::new(out)).map_err(s)?;
        Ok(())
    }

    /// Runs a token pipeline as a trainer would consume it (`wait_on` its stream, release
    /// fenced on it) for `n` batches after a warm-up or `secs` seconds, whichever ends
    /// first; returns (batches, seconds, the busiest stage).
    fn drive_tokens(
        gpu: &Gpu,
        name: &str,
        p: &mut Pipeline<Cuda>,
        n: usize,
        secs: f64,
    ) -> Res<(usize, f64, String)> {
        const WARM: usize = 20;
        gpu.bind()?;
        let stream = gpu.ctx.new_stream().map_err(s)?;
        let cs = CuStream::from(&stream);
        let mut start = None;
        let mut count = 0usize;
        // Diagnostic (PINRING_BENCH_CONSUMER_SPLIT): the consumer's time in pop, wait_on
        // and release, ns summed after the warm-up.
        let split = std::env::var_os("PINRING_BENCH_CONSUMER_SPLIT").is_some();
        let mut spent = [0u128; 3];
        loop {
            let t0 = Instant::now();
            let Some(mut batch) = p.pop().map_err(s)? else {
                break;
            };
            let t1 = Instant::now();
            batch.wait_on(&cs).map_err(s)?;
            let t2 = Instant::now();
            batch.release(Fence::Stream(&cs)).map_err(|e| s(e.error))?;
            if split && start.is_some() {
                let t3 = Instant::now();
                spent[0] += (t1 - t0).as_nanos();
                spent[1] += (t2 - t1).as_nanos();
                spent[2] += (t3 - t2).as_nanos();
            }
            if count + 1 == WARM {
                stream.synchronize().map_err(s)?;
                start = Some((Instant::now(), p.stats()));
            }
            count += 1;
            if let Some((t0, _)) = &start {
                if count >= WARM.saturating_add(n) || t0.elapsed().as_secs_f64() >= secs {
                    break;
                }
            }
        }
        stream.synchronize().map_err(s)?;
        let (t0, before) = start.ok_or("source ended during the warm-up")?;
        let wall = t0.elapsed();
        if split {
            let n = (count - WARM).max(1) as f64;
            println!(
                "SPLIT\t{name}\tper batch: pop {:.2} us, wait_on {:.2} us, release {:.2} us",
                spent[0] as f64 / n / 1e3,
                spent[1] as f64 / n / 1e3,
                spent[2] as f64 / n / 1e3
            );
        }
        let busiest = stats_line(name, &before, &p.stats(), wall);
        context_switches(name);
        write_trace(p, name)?;
        Ok((count - WARM, wall.as_secs_f64(), busiest))
    }

    fn torch_ref(torch: &HashMap<String, f64>, key: &str, fmt: impl Fn(f64) -> String) -> String {
        torch.get(key).map_or("not run".into(), |&v| fmt(v))
    }

    /// The copy engine's ceilings for small batches' bytes, from registered memory, in
    /// batches/s: one `cuMemcpyHtoDAsync` per batch, and one per run of `RUN` contiguous
    /// batches (how the pipeline coalesces them). Same bytes and strides as the pipeline's.
    fn copy_ceilings(gpu: &Gpu, batch: usize) -> Res<(f64, f64)> {
        const RUN: usize = 8;
        const SLOTS: usize = 16;
        const N: usize = 20_000;
        gpu.bind()?;
        let stride = batch.next_multiple_of(4096);
        let p = idle_pipeline(nothing_config(batch, SLOTS)?)?;
        let (base, len) = p.backend().host_ring();
        let stream = gpu.ctx.new_stream().map_err(s)?;
        let dst = stream.alloc_zeros::<u8>(SLOTS * stride).map_err(s)?;
        let dst_ptr = dst.device_ptr(&stream).0;
        let raw = stream.cu_stream();
        let copy = |first: usize, batches: usize| -> Res {
            let bytes = (batches - 1) * stride + batch;
            assert!(first * stride + bytes <= len);
            // SAFETY: slot `first` starts inside the ring (asserted above).
            let start = unsafe { base.add(first * stride) };
            // SAFETY: `bytes` from `start` lie in the idle registered ring (asserted).
            let src = unsafe { std::slice::from_raw_parts(start, bytes) };
            // SAFETY: the destination lies in `dst`, alive until the synchronize below.
            unsafe { result::memcpy_htod_async(dst_ptr + (first * stride) as u64, src, raw) }
                .map_err(s)
        };
        let rate = |batches: usize| -> Res<f64> {
            for i in 0..16 {
                copy((i * batches) % SLOTS, batches)?;
            }
            stream.synchronize().map_err(s)?;
            let t = Instant::now();
            for i in 0..N / batches {
                copy((i * batches) % SLOTS, batches)?;
            }
            stream.synchronize().map_err(s)?;
            Ok((N / batches * batches) as f64 / t.elapsed().as_secs_f64())
        };
        let one = rate(1)?;
        let run = rate(RUN)?;
        drop(dst);
        Ok((one, run))
    }

    fn small(gpu: &Gpu, shard: &str, torch: &HashMap<String, f64>) -> Res {
        const B: usize = 16;
        const T1: u64 = 4097;
        let batch = B * T1 as usize * 4;
        let (one, batched) = copy_ceilings(gpu, batch)?;
        row(
            "copy ceiling, 256 KiB batches",
            &format!("{one:.0} batches/s"),
            &format!(
                "one cuMemcpyHtoDAsync per batch ({:.1} GB/s)",
                one * batch as f64 / GB
            ),
            "-",
            None,
        );
        row(
            "  batched (8 contiguous batches a copy)",
            &format!("{batched:.0} batches/s"),
            &format!("{:.1} GB/s", batched * batch as f64 / GB),
            "-",
            None,
        );
        // The default config, then configs with enough host slots to keep every stage
        // busy (a slot's round trip through the stages takes far longer than a batch's
        // share of the rate: Little's law), leaving cores to the copy, completion, feeder
        // and consumer threads.
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let tuned = |h, d| Knobs {
            threads: Some(cores.saturating_sub(4).max(1)),
            host_slots: Some(h),
            device_slots: Some(d),
            ..Knobs::default()
        };
        let mut best = (0.0, String::new(), String::new());
        for (label, knobs) in [
            ("default (H4 D2)", Knobs::default()),
            ("H128 D32, cores-4 decode threads", tuned(128, 32)),
            (
                "H128 D32, 8 decode threads",
                Knobs {
                    threads: Some(8),
                    ..tuned(128, 32)
                },
            ),
            (
                "H128 D32, cores-1 decode threads pinned (copy thread on core 0)",
                Knobs {
                    threads: Some(cores.saturating_sub(1).max(1)),
                    pin: true,
                    ..tuned(128, 32)
                },
            ),
        ] {
            let mut p = token_pipeline_with(shard, B, T1, knobs)?;
            let (n, secs, busiest) =
                drive_tokens(gpu, &format!("small {label}"), &mut p, 200_000, 3.0)?;
            let rate = n as f64 / secs;
            if rate > best.0 {
                best = (rate, label.to_string(), busiest);
            }
        }
        let (rate, config, busiest) = best;
        let dl = torch.get("dataloader_small_bps").copied();
        let seed = torch.get("prefetch_small_bps").copied();
        row(
            "small 16x4097 i32, batches/s",
            &format!("{rate:.0}"),
            &format!(
                "{config}; {:.0}% of one-per-batch, {:.0}% of batched ceiling",
                100.0 * rate / one,
                100.0 * rate / batched
            ),
            ">= 150,000 and >= 75% of batched",
            Some(rate >= 150_000.0 && rate >= 0.75 * batched),
        );
        row(
            "  same, vs DataLoader and prefetch thread",
            &format!("limit: {busiest}"),
            &format!(
                "DataLoader(4, pin) {}{}; prefetch thread {}{}",
                torch_ref(torch, "dataloader_small_bps", |v| format!("{v:.0}")),
                dl.map_or(String::new(), |v| format!(" (x{:.1})", rate / v)),
                torch_ref(torch, "prefetch_small_bps", |v| format!("{v:.0}")),
                seed.map_or(String::new(), |v| format!(" (x{:.1})", rate / v))
            ),
            "-",
            None,
        );
        Ok(())
    }

    /// Process CPU beside a consumer that takes 10 ms a step (decode busy time taken out),
    /// and with the consumer stalled (a batch held, every slot filled): what waiting costs.
    fn cpu(gpu: &Gpu, shard: &str) -> Res {
        gpu.bind()?;
        let stream = gpu.ctx.new_stream().map_err(s)?;
        let cs = CuStream::from(&stream);
        let mut p = token_pipeline(shard, 16, 4097, None)?;
        for _ in 0..10 {
            let mut b = p.pop().map_err(s)?.ok_or("ended")?;
            b.wait_on(&cs).map_err(s)?;
            b.release(Fence::Stream(&cs)).map_err(|e| s(e.error))?;
        }
        let steps = 100;
        let cpu0 = process_cpu_time().ok_or("no /proc/self/stat")?;
        let (stats0, t0) = (p.stats(), Instant::now());
        for _ in 0..steps {
            let mut b = p.pop().map_err(s)?.ok_or("ended")?;
            b.wait_on(&cs).map_err(s)?;
            std::thread::sleep(Duration::from_millis(10)); // the trainer's step
            b.release(Fence::Stream(&cs)).map_err(|e| s(e.error))?;
        }
        let cpu = process_cpu_time()
            .ok_or("no /proc/self/stat")?
            .saturating_sub(cpu0);
        let (stats1, wall) = (p.stats(), t0.elapsed());
        let decode = stats1.decode.busy.saturating_sub(stats0.decode.busy);
        let waiting = cpu.saturating_sub(decode).as_secs_f64() / wall.as_secs_f64();
        row(
            "cpu beside a 10 ms/step consumer (cuda)",
            &format!("{:.1}% of a core", waiting * 100.0),
            &format!(
                "process {:.1}%, decode busy {:.1}% (of a core), {:.2} s",
                cpu.as_secs_f64() / wall.as_secs_f64() * 100.0,
                decode.as_secs_f64() / wall.as_secs_f64() * 100.0,
                wall.as_secs_f64()
            ),
            "<= 5% of a core",
            Some(waiting <= 0.05),
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

    fn large(gpu: &Gpu, shard: &str, torch: &HashMap<String, f64>) -> Res {
        const B: usize = 64;
        const T1: u64 = 131_073;
        let bytes = B as f64 * T1 as f64 * 4.0;
        const N: usize = 600;
        // A finite source (the warm-up, the timed batches and slack), drained after the
        // timed part so that nothing writes the ring while the raw copies read it.
        let knobs = Knobs {
            batches: Some(N + 40),
            ..Knobs::default()
        };
        let mut p = token_pipeline_with(shard, B, T1, knobs)?;
        let (n, secs, busiest) = drive_tokens(gpu, "large", &mut p, N, 30.0)?;
        let gibps = n as f64 * bytes / secs / GIB;
        drain(&mut p)?;
        // Raw H2D of the same size from the same registered ring, in the same run.
        let size = B * T1 as usize * 4;
        let raw = size as f64 / raw_copies(gpu, &p, size, 60)? / GIB;
        let dl = torch.get("dataloader_large_gibps").copied();
        row(
            "large 64x131073 i32, GiB/s",
            &format!("{gibps:.2}"),
            &format!(
                "raw H2D {raw:.2}: {:.1}%; DataLoader(4, pin) {}{}",
                100.0 * gibps / raw,
                torch_ref(torch, "dataloader_large_gibps", |v| format!("{v:.2}")),
                dl.map_or(String::new(), |v| format!(" (x{:.1})", gibps / v))
            ),
            ">= 95% of raw H2D",
            Some(gibps >= 0.95 * raw),
        );
        // The same raw copies while decode threads (no pipeline) stream windows through
        // host memory as the pipeline's do: what the copy engine gets when decoding
        // competes with it for host memory bandwidth.
        let beside = {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let stop = std::sync::atomic::AtomicBool::new(false);
            let sampler = TokenShards::open([shard])
                .map_err(s)?
                .windows(T1)
                .order(Order::Random { seed: 5 })
                .build()
                .map_err(s)?;
            let decoder = Tokens::new(TokenType::I32);
            std::thread::scope(|scope| {
                for i in 0..cores {
                    let (stop, sampler) = (&stop, &sampler);
                    scope.spawn(move || {
                        let mut out = vec![0u8; decoder.sample_bytes(T1)];
                        for w in sampler.iter().skip(i * 7) {
                            if stop.load(std::sync::atomic::Ordering::Relaxed) {
                                break;
                            }
                            let _ = pinring::Decode::decode(&decoder, w, &mut out);
                            std::hint::black_box(&out);
                        }
                    });
                }
                std::thread::sleep(Duration::from_millis(100));
                let secs = raw_copies(gpu, &p, size, 60);
                stop.store(true, std::sync::atomic::Ordering::Relaxed);
                secs.map(|secs| (size as f64 / secs / GIB, cores))
            })?
        };
        row(
            "  raw H2D beside decode threads, no pipeline",
            &format!("{:.2}", beside.0),
            &format!(
                "{:.1}% of raw: {} threads decoding windows into ordinary memory meanwhile",
                100.0 * beside.0 / raw,
                beside.1
            ),
            "-",
            None,
        );
        row(
            "  vs seed-001 prefetch thread",
            &format!("limit: {busiest}"),
            &format!(
                "prefetch thread {} GiB/s",
                torch_ref(torch, "prefetch_large_gibps", |v| format!("{v:.2}"))
            ),
            "-",
            None,
        );
        Ok(())
    }

    fn scaling(gpu: &Gpu, shard: &str) -> Res {
        const B: usize = 64;
        const T1: u64 = 131_073;
        let bytes = B as f64 * T1 as f64 * 4.0;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let mut threads: Vec<usize> = std::iter::successors(Some(1), |n| Some(n * 2))
            .take_while(|&n| n < cores)
            .collect();
        threads.push(cores);
        let mut cells = Vec::new();
        for &t in &threads {
            let mut p = token_pipeline(shard, B, T1, Some(t))?;
            let (n, secs, _) = drive_tokens(gpu, &format!("scaling_{t}"), &mut p, usize::MAX, 0.6)?;
            cells.push(format!("{:.1}", n as f64 * bytes / secs / GIB));
        }
        let list = threads
            .iter()
            .map(usize::to_string)
            .collect::<Vec<_>>()
            .join("/");
        row(
            "decode scaling (large), GiB/s",
            &cells.join("/"),
            &format!("{list} decode threads; {cores} cores"),
            "-",
            None,
        );
        Ok(())
    }

    /// What the driver calls on the copy thread's path cost (ns a call, `EXPLORE` lines),
    /// alone and while another thread polls an event in a tight loop (as a spinning
    /// completion thread would).
    fn driver_calls(gpu: &Gpu) -> Res {
        use pinring::cudarc::driver::sys;
        const N: u32 = 20_000;
        gpu.bind()?;
        let a = gpu.ctx.new_stream().map_err(s)?;
        let b = gpu.ctx.new_stream().map_err(s)?;
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

    /// How long one `cuMemcpyHtoDAsync` call takes to return (not the copy), by size and by
    /// the kind of pinned memory it reads: the pipeline's registered ring with normal
    /// pages, the same with huge pages (where the machine has them), and memory from
    /// `cuMemHostAlloc` (`EXPLORE` lines).
    fn enqueue_cost(gpu: &Gpu) -> Res {
        const N: usize = 200;
        const SIZES: [usize; 4] = [256 << 10, 1 << 20, 2 << 20, 4 << 20];
        gpu.bind()?;
        let stream = gpu.ctx.new_stream().map_err(s)?;
        let dst = stream.alloc_zeros::<u8>(4 << 20).map_err(s)?;
        let to = dst.device_ptr(&stream).0;
        let measure = |what: &str, base: *const u8| -> Res {
            for size in SIZES {
                // SAFETY: `base` points at 4 MiB or more of pinned memory, idle.
                let src = unsafe { std::slice::from_raw_parts(base, size) };
                stream.synchronize().map_err(s)?;
                let mut calls = Vec::with_capacity(N);
                for _ in 0..N {
                    let t = Instant::now();
                    // SAFETY: `dst` lives until the stream is synchronized below.
                    unsafe { result::memcpy_htod_async(to, src, stream.cu_stream()) }.map_err(s)?;
                    calls.push(t.elapsed().as_secs_f64() * 1e6);
                    stream.synchronize().map_err(s)?;
                }
                calls.sort_by(f64::total_cmp);
                println!(
                    "EXPLORE\tenqueue\tcuMemcpyHtoDAsync {:>4} KiB from {what}\t{:.1} us p50\t{:.1} us p90",
                    size >> 10,
                    calls[N / 2],
                    calls[N * 9 / 10]
                );
            }
            Ok(())
        };
        // Two 4 MiB host slots, normal pages and then huge ones.
        let ring = |huge| {
            let config = nothing_builder(4 << 20, 2, 2)
                .huge_pages(huge)
                .cuda(CudaOptions::ordinal(0))
                .build()
                .map_err(s)?;
            idle_pipeline(config)
        };
        let idle = ring(false)?;
        for p in [&idle, &ring(true)?] {
            let what = format!("the registered ring ({:?})", p.huge_pages());
            measure(&what, p.backend().host_ring().0)?;
        }
        // The copy stream's own cost of a stream-side wait on an event that has already
        // completed (as a release fence often has by the time its slot is reused): runs of
        // 10 copies of 256 KiB (one 2.5 MiB copy), with and without 10 such waits before
        // each, back to back; batches/s.
        let done = result::event::create(sys::CUevent_flags::CU_EVENT_DISABLE_TIMING).map_err(s)?;
        let other = gpu.ctx.new_stream().map_err(s)?;
        // SAFETY: a live event and stream of the bound context.
        unsafe { result::event::record(done, other.cu_stream()) }.map_err(s)?;
        other.synchronize().map_err(s)?;
        // SAFETY: 10 × 256 KiB inside the idle registered ring (8 MiB).
        let src = unsafe { std::slice::from_raw_parts(idle.backend().host_ring().0, 10 << 18) };
        for waits in [0usize, 10] {
            let run = |n: usize| -> Res {
                for _ in 0..n {
                    for _ in 0..waits {
                        let flags = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
                        // SAFETY: live event and stream.
                        unsafe { result::stream::wait_event(stream.cu_stream(), done, flags) }
                            .map_err(s)?;
                    }
                    // SAFETY: `dst` (4 MiB) lives until the stream is synchronized.
                    unsafe { result::memcpy_htod_async(to, src, stream.cu_stream()) }.map_err(s)?;
                }
                stream.synchronize().map_err(s)
            };
            run(20)?;
            let t = Instant::now();
            run(2000)?;
            println!(
                "EXPLORE\tenqueue\truns of 10 x 256 KiB, {waits} completed-event waits before each\t{:.0} batches/s",
                20_000.0 / t.elapsed().as_secs_f64()
            );
        }
        drop(idle);
        // SAFETY: idle (its stream synchronized) and not used again.
        unsafe { result::event::destroy(done) }.map_err(s)?;
        // What one cuEventRecord costs the calling thread, by event kind, on an idle stream
        // and on one with a long kernel queued (as the copy stream has copies queued).
        for (kind, flags) in [
            (
                "timing-disabled",
                sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32,
            ),
            (
                "timing-disabled blocking-sync",
                sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
                    | sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32,
            ),
        ] {
            let mut e: sys::CUevent = std::ptr::null_mut();
            // SAFETY: writes one handle; the context is bound.
            unsafe { sys::cuEventCreate(&mut e, flags) }
                .result()
                .map_err(s)?;
            for busy in [false, true] {
                if busy {
                    gpu.hold(&stream, 50_000_000)?;
                }
                let t = Instant::now();
                for _ in 0..2000 {
                    // SAFETY: a live event and stream.
                    unsafe { result::event::record(e, stream.cu_stream()) }.map_err(s)?;
                }
                let ns = t.elapsed().as_secs_f64() * 1e9 / 2000.0;
                stream.synchronize().map_err(s)?;
                println!(
                    "EXPLORE\tenqueue\tcuEventRecord, {kind} event, {} stream\t{ns:.0} ns",
                    if busy { "busy" } else { "idle" }
                );
            }
            // SAFETY: idle and not used again.
            unsafe { result::event::destroy(e) }.map_err(s)?;
        }
        // SAFETY: plain pinned allocation of 4 MiB; freed below.
        let host = unsafe { result::malloc_host(4 << 20, 0) }.map_err(s)?;
        let measured = measure("cuMemHostAlloc memory", host.cast::<u8>().cast_const());
        // SAFETY: allocated above; the stream is synchronized (no copy reads it).
        unsafe { result::free_host(host) }.map_err(s)?;
        measured?;
        drop(dst);
        Ok(())
    }

    /// Not in the table: what the pipeline's knobs do to the small and large workloads,
    /// and the decoder alone on one thread (`EXPLORE` lines, for tuning).
    fn explore(gpu: &Gpu, shard: &str) -> Res {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let k = Knobs::default();
        let h = |h, d| Knobs {
            threads: Some(cores.saturating_sub(4).max(1)),
            host_slots: Some(h),
            device_slots: Some(d),
            ..k
        };
        let small: Vec<(&str, Knobs)> = vec![
            ("H32 D32 cores-4", h(32, 32)),
            ("H64 D32 cores-4", h(64, 32)),
            ("H128 D32 cores-4", h(128, 32)),
            (
                "H128 D32 threads4",
                Knobs {
                    threads: Some(4),
                    ..h(128, 32)
                },
            ),
            (
                "H128 D32 threads8",
                Knobs {
                    threads: Some(8),
                    ..h(128, 32)
                },
            ),
            (
                "H128 D32 cores-2",
                Knobs {
                    threads: Some(cores.saturating_sub(2).max(1)),
                    ..h(128, 32)
                },
            ),
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
                    threads: Some(cores - 1),
                    ..k
                },
            ),
            (
                "threads8",
                Knobs {
                    threads: Some(8),
                    ..k
                },
            ),
        ];
        for (b, t1, unit, variants) in [
            (16usize, 4097u64, "batches/s", &small),
            (64, 131_073, "GiB/s", &large),
        ] {
            for (name, knobs) in variants {
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
        let sampler = TokenShards::open([shard])
            .map_err(s)?
            .windows(4097)
            .order(Order::Random { seed: 3 })
            .build()
            .map_err(s)?;
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

    // ----------------------------------------------------------------------------------
    // 4. Overlap: a consumer kernel as long as one batch's copy.

    /// A diagnostic of the overlap schedule, on when `PINRING_BENCH_TIMELINE` is set: a
    /// timing event recorded on the consumer's stream before and after each kernel, read
    /// back as GPU-side times. A kernel that starts later than its predecessor ended waited
    /// for its batch's copy; how long the copies took shows in those starts.
    struct Timeline {
        stream: sys::CUstream,
        events: Vec<(sys::CUevent, sys::CUevent)>,
    }

    impl Timeline {
        fn new(stream: &Arc<CudaStream>) -> Option<Self> {
            std::env::var_os("PINRING_BENCH_TIMELINE").map(|_| Timeline {
                stream: stream.cu_stream(),
                events: Vec::new(),
            })
        }

        fn mark(&self) -> Res<sys::CUevent> {
            let e = result::event::create(sys::CUevent_flags::CU_EVENT_DEFAULT).map_err(s)?;
            // SAFETY: a live event and the caller's live stream.
            unsafe { result::event::record(e, self.stream) }.map_err(s)?;
            Ok(e)
        }

        /// `gpu.hold(stream, ns)`, between two timing events when there is a timeline.
        fn hold(timeline: &mut Option<Self>, gpu: &Gpu, stream: &Arc<CudaStream>, ns: u64) -> Res {
            let Some(t) = timeline else {
                return gpu.hold(stream, ns);
            };
            let before = t.mark()?;
            gpu.hold(stream, ns)?;
            let after = t.mark()?;
            t.events.push((before, after));
            Ok(())
        }

        /// Prints the kernels' waits (start after the previous one's end), skipping `warm`
        /// steps; the stream must have drained.
        fn report(self, what: &str, warm: usize) -> Res {
            let ms = |a: sys::CUevent, b: sys::CUevent| -> Res<f64> {
                // SAFETY: both events completed (the stream drained).
                Ok(unsafe { result::event::elapsed(a, b) }.map_err(s)? as f64)
            };
            let ev = &self.events;
            let (mut waits, mut kernels) = (Vec::new(), Vec::new());
            for k in warm.max(1)..ev.len() {
                waits.push(ms(ev[k - 1].1, ev[k].0)? * 1e3);
                kernels.push(ms(ev[k].0, ev[k].1)? * 1e3);
            }
            let total = ms(ev[warm.max(1) - 1].1, ev[ev.len() - 1].1)? * 1e3;
            let waited: f64 = waits.iter().sum();
            waits.sort_by(f64::total_cmp);
            kernels.sort_by(f64::total_cmp);
            let q = |v: &[f64], p: f64| percentile(v, p / 100.0);
            println!(
                "TIMELINE\t{what}\t{} steps, {:.0} us/step on the GPU\tkernel p50 {:.0} us\t\
                 waits before kernels: p50 {:.1} us, p90 {:.1} us, p99 {:.1} us, max {:.1} us, \
                 {} over 20 us, {:.1}% of the time",
                waits.len(),
                total / waits.len() as f64,
                q(&kernels, 50.0),
                q(&waits, 50.0),
                q(&waits, 90.0),
                q(&waits, 99.0),
                waits[waits.len() - 1],
                waits.iter().filter(|w| **w > 20.0).count(),
                100.0 * waited / total
            );
            for (a, b) in self.events {
                // SAFETY: completed and not used again.
                unsafe { result::event::destroy(a) }.map_err(s)?;
                // SAFETY: as above.
                unsafe { result::event::destroy(b) }.map_err(s)?;
            }
            Ok(())
        }
    }

    /// Seconds one `hold` kernel of `ns` takes on `stream`, back to back.
    fn time_hold(gpu: &Gpu, stream: &Arc<CudaStream>, ns: u64, n: usize) -> Res<f64> {
        gpu.hold(stream, ns)?;
        stream.synchronize().map_err(s)?;
        let t = Instant::now();
        for _ in 0..n {
            gpu.hold(stream, ns)?;
        }
        stream.synchronize().map_err(s)?;
        Ok(t.elapsed().as_secs_f64() / n as f64)
    }

    /// One pass of the overlap schedule through pinring: `n` measured batches (after
    /// `warm`), each read by a `hold` kernel of `ns` on `stream`. Seconds per step, and
    /// the pipeline (its registered ring serves the raw schedule next).
    fn overlap_pass(
        gpu: &Gpu,
        stream: &Arc<CudaStream>,
        size: usize,
        ns: u64,
        (n, warm): (usize, usize),
        report: bool,
    ) -> Res<(f64, Pipeline<Cuda>)> {
        let cs = CuStream::from(stream);
        let mut p = Pipeline::new(
            nothing_config(size, 4)?,
            nothing(),
            std::iter::repeat_n((), n + warm),
        )
        .map_err(s)?;
        let mut t0 = None;
        let mut timeline = Timeline::new(stream);
        while let Some(mut batch) = p.pop().map_err(s)? {
            batch.wait_on(&cs).map_err(s)?;
            Timeline::hold(&mut timeline, gpu, stream, ns)?;
            let k = batch.seq() as usize;
            batch.release(Fence::Stream(&cs)).map_err(|e| s(e.error))?;
            if k + 1 == warm {
                stream.synchronize().map_err(s)?;
                t0 = Some((Instant::now(), p.stats()));
            }
        }
        stream.synchronize().map_err(s)?;
        let (t0, before) = t0.ok_or("no warm-up")?;
        let wall = t0.elapsed();
        if let Some(t) = timeline {
            t.report("pinring", warm)?;
        }
        if report {
            stats_line("overlap", &before, &p.stats(), wall);
            write_trace(&p, "overlap")?;
        }
        Ok((wall.as_secs_f64() / n as f64, p))
    }

    fn overlap(gpu: &Gpu) -> Res {
        const SIZE: usize = 32 << 20;
        const N: usize = 300;
        const WARM: usize = 20;
        const PASSES: usize = 3;
        gpu.bind()?;
        // The copy time of one batch, from the same kind of registered ring.
        let copy = raw_copies(gpu, &idle_pipeline(nothing_config(SIZE, 4)?)?, SIZE, 50)?;
        // The kernel holds its stream as long as one copy takes, by the GPU's global timer
        // (a kernel counting SM cycles would follow the clock, which moves with load).
        let ns = (copy * 1e9) as u64;
        let stream = gpu.ctx.new_stream().map_err(s)?;
        let kernel = time_hold(gpu, &stream, ns, 100)?;
        // Passes through pinring and through the same schedule without it, alternating,
        // so both see the same machine; the medians are compared.
        let (mut ours, mut raws) = (Vec::new(), Vec::new());
        let mut copy_after = f64::INFINITY;
        for pass in 0..PASSES {
            let (step, p) = overlap_pass(gpu, &stream, SIZE, ns, (N, WARM), pass == 0)?;
            ours.push(step);
            raws.push(raw_overlap(gpu, &p, SIZE, ns, 100)?);
            copy_after = copy_after.min(raw_copies(gpu, &p, SIZE, 50)?);
        }
        let kernel_after = time_hold(gpu, &stream, ns, 50)?;
        // The faster of the copy and kernel measurements: the stricter bound.
        let bound = copy.min(copy_after).max(kernel.min(kernel_after));
        let median = |v: &mut Vec<f64>| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        let pcts = |v: &[f64]| {
            v.iter()
                .map(|step| format!("{:.1}%", 100.0 * bound / step))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (ours_each, raws_each) = (pcts(&ours), pcts(&raws));
        let (step, raw_step) = (median(&mut ours), median(&mut raws));
        let eff = bound / step;
        let us = |x: f64| x * 1e6;
        row(
            "overlap 32 MiB, kernel = copy",
            &format!(
                "{:.1}% ({:.0} us/step; median of {PASSES} passes: {ours_each})",
                eff * 100.0,
                us(step)
            ),
            &format!(
                "copy {:.0} us (after {:.0}), kernel {:.0} us (after {:.0}), serial {:.0} us; \
                 the same schedule without pinring {:.0} us/step ({:.1}%; passes {raws_each})",
                us(copy),
                us(copy_after),
                us(kernel),
                us(kernel_after),
                us(copy + kernel),
                us(raw_step),
                100.0 * bound / raw_step
            ),
            ">= 95%",
            Some(eff >= 0.95),
        );
        Ok(())
    }

    // ----------------------------------------------------------------------------------
    // 6. The consumer's host cost of pop + release, with the batch already there.

    fn consumer(gpu: &Gpu) -> Res {
        const SLOTS: usize = 64;
        const ROUNDS: usize = 60;
        gpu.bind()?;
        let config = Config::builder()
            .batch_size(1)
            .bytes_per_sample(4096)
            .host_slots(8)
            .device_slots(SLOTS)
            .decode_threads(2)
            .pop_timeout(Duration::from_secs(20))
            .cuda(CudaOptions::ordinal(0))
            .build()
            .map_err(s)?;
        let mut p = Pipeline::new(config, nothing(), std::iter::repeat(())).map_err(s)?;
        let stream = gpu.ctx.new_stream().map_err(s)?;
        let cs = CuStream::from(&stream);
        let (mut fenced, mut synced, mut waited) = (Vec::new(), Vec::new(), 0usize);
        for round in 0..ROUNDS {
            let deadline = Instant::now() + Duration::from_secs(10);
            while !p
                .stats()
                .device_slots
                .iter()
                .all(|&(_, state)| state == DeviceState::Leased)
            {
                if Instant::now() > deadline {
                    return Err("device slots never all filled".into());
                }
                std::thread::sleep(Duration::from_micros(100));
            }
            for _ in 0..SLOTS {
                let t = Instant::now();
                let batch = match p.try_pop().map_err(s)? {
                    TryPop::Batch(batch) => batch,
                    _ => {
                        waited += 1;
                        p.pop().map_err(s)?.ok_or("endless source ended")?
                    }
                };
                let result = if round % 2 == 0 {
                    batch.release(Fence::Stream(&cs))
                } else {
                    batch.release(Fence::Sync)
                };
                let ns = t.elapsed().as_nanos() as f64;
                result.map_err(|e| s(e.error))?;
                if round % 2 == 0 {
                    fenced.push(ns);
                } else {
                    synced.push(ns);
                }
            }
        }
        stream.synchronize().map_err(s)?;
        fenced.sort_by(f64::total_cmp);
        synced.sort_by(f64::total_cmp);
        let (p50, p99) = (percentile(&fenced, 0.5), percentile(&fenced, 0.99));
        row(
            "pop+release(Stream) p50/p99",
            &format!("{p50:.0} / {p99:.0} ns"),
            &format!(
                "Fence::Sync {:.0} / {:.0} ns; {} samples{}",
                percentile(&synced, 0.5),
                percentile(&synced, 0.99),
                fenced.len() + synced.len(),
                if waited > 0 {
                    format!(", {waited} waited")
                } else {
                    String::new()
                }
            ),
            "p50 <= 1 us",
            Some(p50 <= 1000.0),
        );
        Ok(())
    }

    // ----------------------------------------------------------------------------------

    fn read_torch(path: Option<&str>) -> HashMap<String, f64> {
        let mut out = HashMap::new();
        let Some(text) = path.and_then(|p| std::fs::read_to_string(p).ok()) else {
            return out;
        };
        for line in text.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            if let ["TORCH", key, value, ..] = f.as_slice() {
                if let Ok(v) = value.parse::<f64>() {
                    out.insert((*key).to_string(), v);
                }
            }
        }
        out
    }

    fn section(name: &str, f: impl FnOnce() -> Res) -> bool {
        let t = Instant::now();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        eprintln!("bench {name}: {:.2?}", t.elapsed());
        let why = match result {
            Ok(Ok(())) => return true,
            Ok(Err(e)) => e,
            Err(panic) => panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "panicked".into()),
        };
        println!(
            "RESULT\tbench_{name}\tFAIL\t{}",
            why.replace(['\t', '\n'], " ")
        );
        false
    }

    pub fn main(args: &Args) -> ExitCode {
        let gpu = match Gpu::new() {
            Ok(gpu) => gpu,
            Err(e) => {
                println!(
                    "RESULT\tbench_setup\tFAIL\t{}",
                    e.replace(['\t', '\n'], " ")
                );
                return ExitCode::FAILURE;
            }
        };
        if let Err(e) = TokenShards::open([&args.shard]) {
            println!(
                "RESULT\tbench_setup\tFAIL\t{}",
                s(e).replace(['\t', '\n'], " ")
            );
            return ExitCode::FAILURE;
        }
        let torch = read_torch(args.torch.as_deref());
        let on = |name: &str| args.only.is_empty() || args.only.iter().any(|o| o == name);
        let g = &gpu;
        let shard = args.shard.as_str();
        let mut all = true;
        if on("transport") {
            all &= section("transport", || transport(g));
        }
        if on("small") {
            all &= section("small", || small(g, shard, &torch));
        }
        if on("large") {
            all &= section("large", || large(g, shard, &torch));
        }
        if on("overlap") {
            all &= section("overlap", || overlap(g));
        }
        if on("scaling") {
            all &= section("scaling", || scaling(g, shard));
        }
        if on("consumer") {
            all &= section("consumer", || consumer(g));
        }
        if on("cpu") {
            all &= section("cpu", || cpu(g, shard));
        }
        // Only when asked for by name.
        if args.only.iter().any(|o| o == "enqueue") {
            all &= section("enqueue", || enqueue_cost(g));
        }
        if args.only.iter().any(|o| o == "explore") {
            all &= section("explore", || explore(g, shard));
        }
        if all {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        }
    }
}
