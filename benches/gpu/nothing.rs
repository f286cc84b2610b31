//! Pipelines of a decoder that writes nothing: the transport alone, and idle registered
//! rings for raw copies.

use std::time::Duration;

use pinring::{decode_fn, Config, ConfigBuilder, Cuda, CudaOptions, Fence, Pipeline};

use crate::harness::{s, Res};
use crate::trace::TRACE_DIR;

pub fn nothing_config(size: usize, host_slots: usize) -> Res<Config<Cuda>> {
    nothing_config_slots(size, host_slots, 2)
}

pub fn nothing_config_slots(
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
pub fn nothing_builder(size: usize, host_slots: usize, device_slots: usize) -> ConfigBuilder {
    let builder = Config::builder()
        .batch_size(1)
        .bytes_per_sample(size)
        .host_slots(host_slots)
        .device_slots(device_slots)
        .decode_threads(2)
        .pop_timeout(Duration::from_secs(20))
        .batch_scheduling(crate::sched::batch_scheduling());
    if std::env::var_os(TRACE_DIR).is_some() {
        builder.trace(1 << 16)
    } else {
        builder
    }
}

/// Pops and releases (nothing on the device reads them) every batch left in `p`; its
/// source ended, its registered ring is then idle, for raw copies out of it.
pub fn drain(p: &mut Pipeline<Cuda>) -> Res {
    while let Some(b) = p.pop().map_err(s)? {
        b.release(Fence::Sync).map_err(|e| s(e.error))?;
    }
    Ok(())
}

/// A pipeline of `config` run through a source of one batch per host slot, then
/// drained: pinned memory of the pipeline's own kind, idle, for raw copies.
pub fn idle_pipeline(config: Config<Cuda>) -> Res<Pipeline<Cuda>> {
    let batches = config.host_slots();
    let mut p = Pipeline::new(config, nothing(), std::iter::repeat_n((), batches)).map_err(s)?;
    drain(&mut p)?;
    Ok(p)
}

pub fn nothing() -> impl pinring::Decode<Sample = ()> {
    decode_fn(|_: (), _: &mut [u8]| Ok(()))
}
