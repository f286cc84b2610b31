//! Raw host-to-device copies, without pinring, from a pipeline's own registered ring: the
//! reference the transport, large and overlap sections compare with.

use std::time::Instant;

use pinring::cudarc::driver::{result, DevicePtr};
use pinring::{Cuda, Pipeline};

use crate::harness::{s, Gpu, Res};

/// Back-to-back `cuMemcpyHtoDAsync` of `size` bytes from the pipeline's own registered
/// ring (idle: its source has ended) into two device buffers; seconds per copy.
pub fn raw_copies(gpu: &Gpu, p: &Pipeline<Cuda>, size: usize, n: usize) -> Res<f64> {
    let (base, len) = p.backend().host_ring();
    let slots = len / size;
    if slots == 0 {
        return Err("ring smaller than a batch".into());
    }
    let stride = len / slots;
    let stream = gpu.stream()?;
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
        unsafe { result::memcpy_htod_async(dst_ptr + ((i % 2) * size) as u64, src, raw) }.map_err(s)
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
