//! Issue 23, CUDA graphs over the fixed device slots (the Rust side of the Python
//! example `python/examples/cuda_graphs.py`): a graph per device slot, captured once over
//! the slot's address (`Batch::device_ptr`, the address `Batch::view_on` views: fixed for
//! the pipeline's life), replayed for every batch the slot holds, with no copy into a static
//! buffer. The consumer stream is declared once (`ConfigBuilder::consumer_stream`): each
//! `pop` makes it wait for its batch, the replay runs on it, `Fence::Bound` releases.
//!
//! A graph's kernel arguments are baked in, so each slot always holds the same samples
//! (the source repeats them with the slot's period) and the check kernel compares against
//! them. In poison mode a released slot is filled with 0xFF before its next copy: a replay
//! that read the slot before its batch's copy landed, or after its release fence let the
//! poison fill (and the next copy) in, reads the pattern and counts wrong words.

use std::sync::Arc;

use pinring::cudarc::driver::sys::{CUgraphInstantiate_flags, CUstreamCaptureMode};
use pinring::cudarc::driver::{result, CudaGraph, CudaStream};
use pinring::{Config, CuStream, CudaOptions, Fence, Pipeline};

use crate::harness::{
    decoder, s, Gpu, Res, Tally, HOLD_US, SAMPLES, SAMPLE_BYTES, WORDS_PER_SAMPLE,
};

/// Device slots: one graph each.
const SLOTS: usize = 3;

/// Batch k's samples: slot `k % SLOTS`'s, the same for every batch of the slot.
fn samples(batches: usize) -> impl Iterator<Item = u64> + Send + 'static {
    (0..batches * SAMPLES).map(|i| (((i / SAMPLES) % SLOTS) * SAMPLES + i % SAMPLES) as u64)
}

/// A graph captured on `capture` (not the consumer stream: its pending waits for batches
/// stay out of the graph) of one step over the slot at `ptr`, the `slot`-th: a kernel
/// holding the stream `hold_ns`, then the check of every word against the slot's samples,
/// counted into the slot's counters.
fn capture(
    gpu: &Gpu,
    on: &Arc<CudaStream>,
    tally: &Tally,
    slot: usize,
    ptr: u64,
    hold_ns: u64,
) -> Res<CudaGraph> {
    // Thread-local: the pipeline's copy and completion threads go on calling the driver.
    on.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .map_err(s)?;
    let words = (SAMPLES * SAMPLE_BYTES / 4) as u64;
    let first = (slot * SAMPLES) as u64;
    let steps = gpu
        .hold(on, hold_ns)
        .and_then(|()| gpu.check(on, ptr, first, words, tally.at(slot as u64)));
    // The capture ends whatever happened (a stream left capturing is unusable).
    let graph = on.end_capture(CUgraphInstantiate_flags(0)).map_err(s)?;
    steps?;
    graph.ok_or_else(|| "the capture made no graph".to_owned())
}

/// `n` batches (a multiple of `SLOTS`): each popped onto the declared stream, the graph of
/// its slot replayed there (captured over the slot's address at the slot's first batch),
/// released with `Fence::Bound` (or, with `sync_fence`, with `Fence::Sync`: a release that
/// does not cover the replay). Returns (words wrong, slots whose counters saw every
/// replay).
fn replay_per_slot(n: usize, hold_ns: u64, sync_fence: bool) -> Res<(u64, usize)> {
    let gpu = Gpu::bound()?;
    let stream = gpu.stream()?;
    let side = gpu.stream()?;
    let tally = Tally::new(&stream, SLOTS)?;
    let config = Config::builder()
        .batch_size(SAMPLES)
        .bytes_per_sample(SAMPLE_BYTES)
        .host_slots(8)
        .device_slots(SLOTS)
        .decode_threads(4)
        .poison_released(true)
        .pop_timeout(std::time::Duration::from_secs(20))
        .cuda(CudaOptions::ordinal(0))
        .consumer_stream(CuStream::from(&stream))
        .build()
        .map_err(s)?;
    let mut p = Pipeline::new(config, decoder(), samples(n)).map_err(s)?;
    let mut graphs: Vec<Option<(CudaGraph, u64)>> = (0..SLOTS).map(|_| None).collect();
    for k in 0..n {
        let batch = p.pop().map_err(s)?.ok_or(format!("no batch {k}"))?;
        let (slot, ptr) = (batch.slot(), batch.device_ptr());
        if slot != k % SLOTS {
            return Err(format!("batch {k} in slot {slot}, not {}", k % SLOTS));
        }
        let entry = &mut graphs[slot];
        if entry.is_none() {
            let graph = capture(&gpu, &side, &tally, slot, ptr, hold_ns)?;
            *entry = Some((graph, ptr));
        }
        let (graph, at) = entry.as_ref().expect("captured above");
        if *at != ptr {
            return Err(format!(
                "slot {slot} moved: {ptr:#x}, captured at {at:#x} (batch {k})"
            ));
        }
        // SAFETY: the graph's exec is alive (owned by `graph`, not destroyed) and `stream`
        // is a live stream of the same context; the graph reads the slot leased by `batch`
        // (released below, after the launch is enqueued, fenced on `stream`) and writes
        // the tally's live counters.
        unsafe { result::graph::launch(graph.cu_graph_exec(), stream.cu_stream()) }.map_err(s)?;
        let fence = if sync_fence {
            Fence::Sync
        } else {
            Fence::Bound
        };
        batch.release(fence).map_err(|e| s(e.error))?;
    }
    drop(p);
    tally.read((n / SLOTS) as u32)
}

/// 9,999 batches over three slots, a 30 µs hold in each replay: 0 words wrong. And the
/// check can fail: one batch per slot (nothing refills a slot after it), each released with
/// `Fence::Sync` while its 1 ms replay still runs: the poison fill lands under the replay.
fn graphs_per_slot() -> Res<String> {
    const N: usize = 9_999;
    let (wrong, checked) = replay_per_slot(N, HOLD_US * 1000, false)?;
    if wrong != 0 || checked != SLOTS {
        return Err(format!(
            "{wrong} words wrong in {N} replays; {checked} of {SLOTS} slots' counters saw \
             every replay of their graph"
        ));
    }
    let (unfenced, _) = replay_per_slot(SLOTS, 1_000_000, true)?;
    if unfenced == 0 {
        return Err(format!(
            "{N} replays clean, but a release that did not cover the replay corrupted \
             nothing: the check cannot fail"
        ));
    }
    Ok(format!(
        "{N} batches replayed in place by {SLOTS} graphs (one per slot, captured once over \
         its fixed address, no static buffer), {} words each, 0 wrong; released with \
         Fence::Sync under the replay, {unfenced} poisoned words read",
        SAMPLES as u32 * WORDS_PER_SAMPLE
    ))
}

gpu_test!(cuda_graph_per_slot_replays_every_batch_in_place => graphs_per_slot());
