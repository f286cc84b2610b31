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

/// A pipeline whose `SLOTS` device slots fill up between rounds (a 4 KiB batch each).
fn pipeline(declared: Option<&Arc<CudaStream>>) -> Res<Pipeline<Cuda>> {
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
    Pipeline::new(
        builder.build().map_err(s)?,
        nothing(),
        std::iter::repeat(()),
    )
    .map_err(s)
}

/// Rounds of: wait until every device slot holds a batch, then time pop + release of each
/// (ns), releasing as `how` (per round, from `hows`). Returns the samples by form and how
/// many pops had to wait.
fn measure(p: &mut Pipeline<Cuda>, cs: &CuStream, hows: &[Release]) -> Res<(Vec<Vec<f64>>, usize)> {
    let mut samples = vec![Vec::new(); hows.len()];
    let mut waited = 0usize;
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
        let form = round % hows.len();
        for _ in 0..SLOTS {
            let t = Instant::now();
            let batch = match p.try_pop().map_err(s)? {
                TryPop::Batch(batch) => batch,
                _ => {
                    waited += 1;
                    p.pop().map_err(s)?.ok_or("endless source ended")?
                }
            };
            let result = match hows[form] {
                Release::Stream => batch.release(Fence::Stream(cs)),
                Release::Sync => batch.release(Fence::Sync),
                Release::Bound => batch.release(Fence::Bound),
            };
            let ns = t.elapsed().as_nanos() as f64;
            result.map_err(|e| s(e.error))?;
            samples[form].push(ns);
        }
    }
    for v in &mut samples {
        v.sort_by(f64::total_cmp);
    }
    Ok((samples, waited))
}

pub fn consumer(gpu: &Gpu) -> Res {
    gpu.bind()?;
    let stream = gpu.stream()?;
    let cs = CuStream::from(&stream);
    let mut p = pipeline(None)?;
    let (forms, waited) = measure(&mut p, &cs, &[Release::Stream, Release::Sync])?;
    drop(p);
    let (fenced, synced) = (&forms[0], &forms[1]);
    let (p50, p99) = (percentile(fenced, 0.5), percentile(fenced, 0.99));
    let waits = |n: usize| {
        if n > 0 {
            format!(", {n} waited")
        } else {
            String::new()
        }
    };
    row(
        "pop+release(Stream) p50/p99",
        &format!("{p50:.0} / {p99:.0} ns"),
        &format!(
            "Fence::Sync {:.0} / {:.0} ns; {} samples{}",
            percentile(synced, 0.5),
            percentile(synced, 0.99),
            fenced.len() + synced.len(),
            waits(waited)
        ),
        "p50 <= 600 ns",
        Some(p50 <= 600.0),
    );
    stream.synchronize().map_err(s)?;
    let mut p = pipeline(Some(&stream))?;
    let (forms, waited) = measure(&mut p, &cs, &[Release::Bound])?;
    drop(p);
    let bound = &forms[0];
    row(
        "pop+release, declared stream, p50/p99",
        &format!(
            "{:.0} / {:.0} ns",
            percentile(bound, 0.5),
            percentile(bound, 0.99)
        ),
        &format!(
            "pop makes the stream wait (cuStreamWaitEvent), release(Fence::Bound); {} \
             samples{}",
            bound.len(),
            waits(waited)
        ),
        "-",
        None,
    );
    stream.synchronize().map_err(s)?;
    call_costs(&stream)
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
    // SAFETY: the event is idle (its stream synchronized) and not used again.
    unsafe { result::event::destroy(event) }.map_err(s)
}
