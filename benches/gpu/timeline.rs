//! The overlap section's GPU-side timeline (`PINRING_BENCH_TIMELINE=1`, `TIMELINE` lines).

use std::sync::Arc;

use pinring::cudarc::driver::{result, sys, CudaStream};
use pinring_benches::percentile;

use crate::harness::{s, Gpu, Res};

/// A diagnostic of the overlap schedule, on when `PINRING_BENCH_TIMELINE` is set: a
/// timing event recorded on the consumer's stream before and after each kernel, read
/// back as GPU-side times. A kernel that starts later than its predecessor ended waited
/// for its batch's copy; how long the copies took shows in those starts.
pub struct Timeline {
    stream: sys::CUstream,
    events: Vec<(sys::CUevent, sys::CUevent)>,
}

impl Timeline {
    pub fn new(stream: &Arc<CudaStream>) -> Option<Self> {
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
    pub fn hold(timeline: &mut Option<Self>, gpu: &Gpu, stream: &Arc<CudaStream>, ns: u64) -> Res {
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
    pub fn report(self, what: &str, warm: usize) -> Res {
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
