//! Section `consumer`: the consumer's host cost of pop + release, with the batch already
//! there: released on a stream (`Fence::Stream`), with `Fence::Sync`, and with the
//! consumer stream declared once (each `pop` binds the batch to it, `Fence::Bound`). Then
//! what each driver call on that path costs alone (`EXPLORE\tconsumer` lines), to say what
//! a p50 is made of.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pinring::cudarc::driver::{result, sys, CudaStream};
use pinring::{Config, CuStream, Cuda, CudaOptions, DeviceState, Fence, Pipeline, TryPop};
use pinring_benches::percentile;

use crate::harness::{s, Gpu, Res};
use crate::nothing::nothing;
use crate::report::row;
use crate::small::PASSES;

const SLOTS: usize = 64;
const ROUNDS: usize = 60;

/// How the consumer releases.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Release {
    Stream,
    Sync,
    /// The declared stream: `pop` binds (`cuStreamWaitEvent`), `Fence::Bound` records.
    Bound,
}

/// Waits (up to 10 s) until every device slot of `p` holds a batch.
fn all_leased(p: &Pipeline<Cuda>) -> Res {
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
    Ok(())
}

/// A pipeline whose `SLOTS` device slots fill up between rounds (a 4 KiB batch each).
fn pipeline(declared: Option<&Arc<CudaStream>>) -> Res<Pipeline<Cuda>> {
    gated_pipeline(declared, std::iter::repeat(()))
}

/// As [`pipeline`], of `source`.
fn gated_pipeline(
    declared: Option<&Arc<CudaStream>>,
    source: impl Iterator<Item = ()> + Send + 'static,
) -> Res<Pipeline<Cuda>> {
    let mut builder = Config::builder()
        .batch_size(1)
        .bytes_per_sample(4096)
        .host_slots(8)
        .device_slots(SLOTS)
        .decode_threads(2)
        .pop_timeout(Duration::from_secs(20))
        .batch_scheduling(crate::sched::batch_scheduling())
        .cuda(CudaOptions::ordinal(0));
    if let Some(stream) = declared {
        builder = builder.consumer_stream(CuStream::from(stream));
    }
    Pipeline::new(builder.build().map_err(s)?, nothing(), source).map_err(s)
}

/// Rounds of: wait until every device slot holds a batch, then time pop + release of each
/// (ns), releasing as `how` (per round, from `hows`). Returns the samples by form and how
/// many pops had to wait.
fn measure(p: &mut Pipeline<Cuda>, cs: &CuStream, hows: &[Release]) -> Res<(Vec<Vec<f64>>, usize)> {
    let mut samples = vec![Vec::new(); hows.len()];
    // The same pops and releases timed apart, by form: [pop, release] of the round's first
    // half (before the release that wakes the copy thread: D / 2) and of its second half
    // (the copy thread refilling beside them).
    let mut parts: Vec<[[Vec<f64>; 2]; 2]> = vec![Default::default(); hows.len()];
    let mut waited = 0usize;
    for round in 0..ROUNDS {
        all_leased(p)?;
        let form = round % hows.len();
        for i in 0..SLOTS {
            let t = Instant::now();
            let batch = match p.try_pop().map_err(s)? {
                TryPop::Batch(batch) => batch,
                _ => {
                    waited += 1;
                    p.pop().map_err(s)?.ok_or("endless source ended")?
                }
            };
            let popped = t.elapsed().as_nanos() as f64;
            let result = match hows[form] {
                Release::Stream => batch.release(Fence::Stream(cs)),
                Release::Sync => batch.release(Fence::Sync),
                Release::Bound => batch.release(Fence::Bound),
            };
            let ns = t.elapsed().as_nanos() as f64;
            result.map_err(|e| s(e.error))?;
            samples[form].push(ns);
            let half = usize::from(i >= SLOTS / 2);
            parts[form][half][0].push(popped);
            parts[form][half][1].push(ns - popped);
        }
    }
    for v in &mut samples {
        v.sort_by(f64::total_cmp);
    }
    for (form, halves) in parts.iter_mut().enumerate() {
        let name = match hows[form] {
            Release::Stream => "Stream",
            Release::Sync => "Sync",
            Release::Bound => "Bound",
        };
        let mut cells = Vec::new();
        for (half, [pops, releases]) in halves.iter_mut().enumerate() {
            pops.sort_by(f64::total_cmp);
            releases.sort_by(f64::total_cmp);
            cells.push(format!(
                "{}: pop p50 {:.0} ns, release p50 {:.0} ns",
                [
                    "first half (copy thread parked)",
                    "second half (copy thread refilling)"
                ][half],
                percentile(pops, 0.5),
                percentile(releases, 0.5)
            ));
        }
        println!(
            "EXPLORE\tconsumer\tsplit, release({name})\t{}",
            cells.join("; ")
        );
    }
    Ok((samples, waited))
}

/// The median of `passes`' p50s and that of their p99s (each the middle of an odd number of
/// passes; the two may come from different passes), and each pass's p50 / p99 in words.
fn median_of_passes(passes: &[Vec<f64>]) -> (f64, f64, String) {
    let mut p50s: Vec<f64> = passes.iter().map(|v| percentile(v, 0.5)).collect();
    let each = passes
        .iter()
        .map(|v| format!("{:.0} / {:.0}", percentile(v, 0.5), percentile(v, 0.99)))
        .collect::<Vec<_>>()
        .join(", ");
    let mut p99s: Vec<f64> = passes.iter().map(|v| percentile(v, 0.99)).collect();
    p50s.sort_by(f64::total_cmp);
    p99s.sort_by(f64::total_cmp);
    (p50s[p50s.len() / 2], p99s[p99s.len() / 2], each)
}

/// The rows: pop + release(Stream) (beside Sync, alternated within each pass), then the
/// declared stream; each the median of [`PASSES`] passes, a fresh pipeline each (the hosts'
/// rounds wander by a third from one pipeline to the next: benches/RESULTS.md).
pub fn consumer(gpu: &Gpu) -> Res {
    gpu.bind()?;
    let stream = gpu.stream()?;
    let cs = CuStream::from(&stream);
    let waits = |n: usize| {
        if n > 0 {
            format!(", {n} waited over the {PASSES} passes")
        } else {
            String::new()
        }
    };
    let (mut fenced, mut synced, mut bound, mut waited) = (vec![], vec![], vec![], [0, 0]);
    for _ in 0..PASSES {
        let mut p = pipeline(None)?;
        let (mut forms, w) = measure(&mut p, &cs, &[Release::Stream, Release::Sync])?;
        drop(p);
        synced.push(forms.pop().expect("two forms"));
        fenced.push(forms.pop().expect("two forms"));
        waited[0] += w;
        stream.synchronize().map_err(s)?;
        let mut p = pipeline(Some(&stream))?;
        let (mut forms, w) = measure(&mut p, &cs, &[Release::Bound])?;
        drop(p);
        bound.push(forms.pop().expect("one form"));
        waited[1] += w;
        stream.synchronize().map_err(s)?;
    }
    let (p50, p99, each) = median_of_passes(&fenced);
    let (sync50, sync99, _) = median_of_passes(&synced);
    row(
        "pop+release(Stream) p50/p99",
        &format!("{p50:.0} / {p99:.0} ns"),
        &format!(
            "median of {PASSES} passes ({each} ns); Fence::Sync {sync50:.0} / {sync99:.0} ns; \
             {} samples a pass{}",
            fenced[0].len(),
            waits(waited[0])
        ),
        "p50 <= 600 ns",
        Some(p50 <= 600.0),
    );
    let (p50, p99, each) = median_of_passes(&bound);
    row(
        "pop+release, declared stream, p50/p99",
        &format!("{p50:.0} / {p99:.0} ns"),
        &format!(
            "pop makes the stream wait (cuStreamWaitEvent), release(Fence::Bound); median of \
             {PASSES} passes ({each} ns); {} samples a pass{}",
            bound[0].len(),
            waits(waited[1])
        ),
        "-",
        None,
    );
    stream.synchronize().map_err(s)?;
    idle_copy_thread(&cs)?;
    stream.synchronize().map_err(s)?;
    gapped(&stream)?;
    stream.synchronize().map_err(s)?;
    call_costs(&stream)
}

/// pop and release timed apart, with 100 µs of host work between two batches (the Python
/// latency row's loop: the copy thread has refilled the slot and parked by the next
/// release), on the declared stream (`Fence::Bound`) and with `Fence::Sync` (no driver
/// call: what is left is the bookkeeping and the copy thread's wake-up).
fn gapped(stream: &Arc<CudaStream>) -> Res {
    const ITERS: usize = 3000;
    let mut p = pipeline(Some(stream))?;
    let mut t = [Vec::new(), Vec::new(), Vec::new(), Vec::new()];
    for i in 0..2 * ITERS {
        let until = Instant::now() + Duration::from_micros(100);
        while Instant::now() < until {
            std::hint::spin_loop();
        }
        let t0 = Instant::now();
        let batch = match p.try_pop().map_err(s)? {
            TryPop::Batch(batch) => batch,
            _ => continue,
        };
        let t1 = Instant::now();
        let sync = i % 2 == 1;
        let r = batch.release(if sync { Fence::Sync } else { Fence::Bound });
        let t2 = Instant::now();
        r.map_err(|e| s(e.error))?;
        let k = if sync { 2 } else { 0 };
        t[k].push((t1 - t0).as_nanos() as f64);
        t[k + 1].push((t2 - t1).as_nanos() as f64);
    }
    stream.synchronize().map_err(s)?;
    drop(p);
    for v in &mut t {
        v.sort_by(f64::total_cmp);
    }
    println!(
        "EXPLORE\tconsumer\t100 us between batches, declared stream: pop p50 {:.0} ns, \
         release(Bound) p50 {:.0} ns; pop p50 {:.0} ns, release(Sync) p50 {:.0} ns ({} and {} \
         samples)",
        percentile(&t[0], 0.5),
        percentile(&t[1], 0.5),
        percentile(&t[2], 0.5),
        percentile(&t[3], 0.5),
        t[0].len(),
        t[2].len()
    );
    Ok(())
}

/// A source that yields only what `open` allows: a round's batches fill the device slots,
/// then the feeder waits, so the copy thread has nothing to copy while the round's batches
/// are popped and released.
struct Gate {
    allowed: std::sync::Mutex<(usize, bool)>,
    more: std::sync::Condvar,
}

impl Gate {
    fn open(&self, more: usize, end: bool) {
        let mut g = self.allowed.lock().unwrap();
        g.0 += more;
        g.1 |= end;
        self.more.notify_all();
    }

    fn next(&self) -> Option<()> {
        let mut g = self.allowed.lock().unwrap();
        loop {
            if g.1 {
                return None;
            }
            if g.0 > 0 {
                g.0 -= 1;
                return Some(());
            }
            g = self.more.wait(g).unwrap();
        }
    }
}

/// pop + release(Stream) with the copy thread idle (no batch left to copy while the round
/// runs): the driver calls of the release without the copy thread's calls beside them.
/// Also the release alone, with `Fence::Stream` and with `Fence::Sync`, copy thread idle.
fn idle_copy_thread(cs: &CuStream) -> Res {
    let gate = Arc::new(Gate {
        allowed: std::sync::Mutex::new((SLOTS, false)),
        more: std::sync::Condvar::new(),
    });
    let source = {
        let gate = gate.clone();
        std::iter::from_fn(move || gate.next())
    };
    let mut p = gated_pipeline(None, source)?;
    let (mut both, mut alone, mut alone_sync) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        let mut batches = Vec::with_capacity(SLOTS);
        for _ in 0..SLOTS {
            batches.push(p.pop().map_err(s)?.ok_or("gated source ended")?);
        }
        // Every device slot was leased and nothing more is allowed: the copy thread idles.
        for b in batches {
            let t = Instant::now();
            if round % 2 == 0 {
                b.release(Fence::Stream(cs)).map_err(|e| s(e.error))?;
                alone.push(t.elapsed().as_nanos() as f64);
            } else {
                b.release(Fence::Sync).map_err(|e| s(e.error))?;
                alone_sync.push(t.elapsed().as_nanos() as f64);
            }
        }
        gate.open(SLOTS, false);
        // The next round: all SLOTS copied again, then pop+release each with nothing queued.
        all_leased(&p)?;
        for _ in 0..SLOTS {
            let t = Instant::now();
            let b = p.pop().map_err(s)?.ok_or("gated source ended")?;
            let r = b.release(Fence::Stream(cs));
            both.push(t.elapsed().as_nanos() as f64);
            r.map_err(|e| s(e.error))?;
        }
        gate.open(SLOTS, false);
        all_leased(&p)?;
    }
    gate.open(0, true);
    drop(p);
    both.sort_by(f64::total_cmp);
    alone.sort_by(f64::total_cmp);
    alone_sync.sort_by(f64::total_cmp);
    println!(
        "EXPLORE\tconsumer\tcopy thread idle: pop+release(Stream) p50 {:.0} p99 {:.0} ns; \
         release(Stream) alone p50 {:.0} p99 {:.0} ns; release(Sync) alone p50 {:.0} p99 {:.0} \
         ns ({} samples)",
        percentile(&both, 0.5),
        percentile(&both, 0.99),
        percentile(&alone, 0.5),
        percentile(&alone, 0.99),
        percentile(&alone_sync, 0.5),
        percentile(&alone_sync, 0.99),
        both.len()
    );
    Ok(())
}

/// What each driver call of the pop + release path costs alone, from this thread
/// (`EXPLORE\tconsumer` lines): the context check a release makes on a stream it was not
/// bound to (`cuStreamGetCtx`), the binding of the context for the call
/// (`cuCtxGetCurrent`), the fence record (`cuEventRecord`, plain) and the stream wait a
/// bound pop makes (`cuStreamWaitEvent`).
fn call_costs(stream: &Arc<CudaStream>) -> Res {
    const N: u32 = 20_000;
    let raw = stream.cu_stream();
    let flags = sys::CUevent_flags::CU_EVENT_DISABLE_TIMING;
    let event = result::event::create(flags).map_err(s)?;
    let time = |f: &dyn Fn() -> Res| -> Res<f64> {
        for _ in 0..100 {
            f()?;
        }
        let t = Instant::now();
        for _ in 0..N {
            f()?;
        }
        Ok(t.elapsed().as_secs_f64() * 1e9 / f64::from(N))
    };
    let calls: [(&str, &dyn Fn() -> Res); 4] = [
        ("cuStreamGetCtx", &|| {
            let mut ctx: sys::CUcontext = std::ptr::null_mut();
            // SAFETY: writes one handle; a live stream of the bound context.
            unsafe { sys::cuStreamGetCtx(raw, &mut ctx) }
                .result()
                .map_err(s)
        }),
        ("cuCtxGetCurrent", &|| {
            result::ctx::get_current().map(drop).map_err(s)
        }),
        ("cuEventRecord (plain)", &|| {
            // SAFETY: a live event and stream of the bound context.
            unsafe { result::event::record(event, raw) }.map_err(s)
        }),
        ("cuStreamWaitEvent", &|| {
            let wait = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
            // SAFETY: as above.
            unsafe { result::stream::wait_event(raw, event, wait) }.map_err(s)
        }),
    ];
    for (name, call) in calls {
        let ns = time(call)?;
        stream.synchronize().map_err(s)?;
        println!("EXPLORE\tconsumer\t{name}\t{ns:.0} ns a call");
    }
    // The record as a release makes it: each slot has its own FENCE event, so a loop of
    // releases records SLOTS events in turn, not one.
    let events = (0..SLOTS)
        .map(|_| result::event::create(flags).map(|e| e as usize))
        .collect::<Result<Vec<_>, _>>()
        .map_err(s)?;
    let turn = std::cell::Cell::new(0usize);
    let in_turn = time(&|| {
        let i = turn.get();
        turn.set((i + 1) % SLOTS);
        // SAFETY: a live event and stream of the bound context.
        unsafe { result::event::record(events[i] as sys::CUevent, raw) }.map_err(s)
    })?;
    stream.synchronize().map_err(s)?;
    println!("EXPLORE\tconsumer\tcuEventRecord of {SLOTS} events in turn\t{in_turn:.0} ns a call");
    // The same records, each event waited on by another stream since its last record (as
    // the copy stream waits on a slot's FENCE before the slot's next copy): the waits made
    // by this thread, then by another thread, between rounds of 64 timed records.
    let waiter = stream.context().new_stream().map_err(s)?;
    let waiter_raw = waiter.cu_stream() as usize;
    let wait_all = || -> Res {
        for &e in &events {
            let wait = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
            // SAFETY: live events and stream of the pipeline's context.
            unsafe {
                result::stream::wait_event(waiter_raw as sys::CUstream, e as sys::CUevent, wait)
            }
            .map_err(s)?;
        }
        Ok(())
    };
    // What the copy thread does instead once a fence has completed: a query, no wait.
    let query_all = || -> Res {
        for &e in &events {
            // SAFETY: live events of the pipeline's context.
            match unsafe { result::event::query(e as sys::CUevent) } {
                Ok(()) => {}
                Err(e) if e.0 == sys::CUresult::CUDA_ERROR_NOT_READY => {}
                Err(e) => return Err(s(e)),
            }
        }
        Ok(())
    };
    let mut after_wait = [0f64; 3];
    let touches: [(bool, &(dyn Fn() -> Res + Sync)); 3] =
        [(false, &wait_all), (true, &wait_all), (true, &query_all)];
    for (k, (other_thread, touch)) in touches.into_iter().enumerate() {
        let mut total = std::time::Duration::ZERO;
        for _ in 0..ROUNDS * 5 {
            if other_thread {
                let ctx = stream.context().clone();
                std::thread::scope(|scope| {
                    scope
                        .spawn(|| {
                            ctx.bind_to_thread().map_err(s)?;
                            touch()
                        })
                        .join()
                        .map_err(|_| "the touching thread panicked".to_string())?
                })?;
            } else {
                touch()?;
            }
            let t = Instant::now();
            for &e in &events {
                // SAFETY: a live event and stream of the bound context.
                unsafe { result::event::record(e as sys::CUevent, raw) }.map_err(s)?;
            }
            total += t.elapsed();
        }
        stream.synchronize().map_err(s)?;
        waiter.synchronize().map_err(s)?;
        after_wait[k] = total.as_secs_f64() * 1e9 / (ROUNDS * 5 * SLOTS) as f64;
    }
    println!(
        "EXPLORE\tconsumer\tcuEventRecord of {SLOTS} events in turn, each waited on by another \
         stream since its last record\t{:.0} ns a call (waits from this thread), {:.0} ns \
         (from another thread)",
        after_wait[0], after_wait[1]
    );
    println!(
        "EXPLORE\tconsumer\tcuEventRecord of {SLOTS} events in turn, each queried by another \
         thread since its last record (no stream waited)\t{:.0} ns a call",
        after_wait[2]
    );
    for e in events {
        // SAFETY: idle (its stream synchronized) and not used again.
        unsafe { result::event::destroy(e as sys::CUevent) }.map_err(s)?;
    }
    // A stream memory op in place of the record: cuStreamWriteValue32 into a device word.
    // SAFETY: a 4-byte device allocation in the bound context, freed below.
    let word = unsafe { result::malloc_sync(4) }.map_err(s)?;
    let write = time(&|| {
        // SAFETY: a live 4-byte device allocation and a live stream of the bound context.
        unsafe { sys::cuStreamWriteValue32_v2(raw, word, 1, 0) }
            .result()
            .map_err(s)
    })?;
    stream.synchronize().map_err(s)?;
    println!("EXPLORE\tconsumer\tcuStreamWriteValue32\t{write:.0} ns a call");
    // The record beside another thread making driver calls (the copy thread's kind: a
    // stream wait and a record on a stream of its own, in a loop).
    let other = stream.context().new_stream().map_err(s)?;
    let other_raw = other.cu_stream() as usize;
    let other_event = result::event::create(flags).map_err(s)? as usize;
    let stop = std::sync::atomic::AtomicBool::new(false);
    let beside = std::thread::scope(|scope| -> Res<f64> {
        let ctx = stream.context().clone();
        let stop = &stop;
        let worker = scope.spawn(move || {
            let _ = ctx.bind_to_thread();
            let (o, e) = (other_raw as sys::CUstream, other_event as sys::CUevent);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // SAFETY: a live stream and event of the bound context.
                let _ = unsafe { result::event::record(e, o) };
                let wait = sys::CUevent_wait_flags::CU_EVENT_WAIT_DEFAULT;
                // SAFETY: as above.
                let _ = unsafe { result::stream::wait_event(o, e, wait) };
            }
        });
        let ns = time(&|| {
            // SAFETY: a live event and stream of the bound context.
            unsafe { result::event::record(event, raw) }.map_err(s)
        });
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let _ = worker.join();
        ns
    })?;
    stream.synchronize().map_err(s)?;
    other.synchronize().map_err(s)?;
    println!("EXPLORE\tconsumer\tcuEventRecord beside a thread recording and waiting\t{beside:.0} ns a call");
    // SAFETY: idle (its stream synchronized) and not used again.
    let _ = unsafe { result::event::destroy(other_event as sys::CUevent) };
    // SAFETY: as above (the write to it is done).
    let _ = unsafe { result::free_sync(word) };
    // SAFETY: the event is idle (its stream synchronized) and not used again.
    unsafe { result::event::destroy(event) }.map_err(s)
}
