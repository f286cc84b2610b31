//! `Loader.stats()`: the core's [`Stats`] as a dict of plain values, seconds for times,
//! with each source's part (a mixture's) and the bottleneck verdict.

use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use pinring::{Bottleneck, Stats};

/// The bottleneck's short name.
fn bottleneck_name(b: Bottleneck) -> &'static str {
    match b {
        Bottleneck::NotYet => "not_yet",
        Bottleneck::Consumer => "consumer",
        Bottleneck::Source => "source",
        Bottleneck::Decode => "decode",
        Bottleneck::Copy => "copy",
        Bottleneck::DeviceSlots => "device_slots",
        Bottleneck::Cpu => "cpu",
        Bottleneck::HandOff => "hand_off",
        _ => "unknown",
    }
}

/// Each slot's `(seq, state)`, the state's name in lower case.
fn slots<'py, S: std::fmt::Debug>(
    py: Python<'py>,
    states: &[(u64, S)],
) -> PyResult<Bound<'py, PyList>> {
    let items = states
        .iter()
        .map(|(seq, state)| {
            let name = format!("{state:?}").to_ascii_lowercase();
            PyTuple::new(
                py,
                [
                    seq.into_pyobject(py)?.into_any(),
                    name.into_pyobject(py)?.into_any(),
                ],
            )
        })
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, items)
}

/// The dict `Loader.stats()` returns.
pub(crate) fn stats_dict<'py>(py: Python<'py>, s: &Stats) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("elapsed", s.elapsed.as_secs_f64())?;
    d.set_item("batches", s.batches)?;
    d.set_item("bytes", s.bytes)?;
    for (name, t) in [("source", s.source), ("decode", s.decode), ("copy", s.copy)] {
        let stage = PyDict::new(py);
        stage.set_item("busy", t.busy.as_secs_f64())?;
        stage.set_item("waited", t.waited.as_secs_f64())?;
        d.set_item(name, stage)?;
    }
    d.set_item("decode_threads", s.decode_threads)?;
    let share = PyDict::new(py);
    share.set_item("local_ranks", s.node_share.local_ranks)?;
    share.set_item("decode_threads", s.node_share.decode_threads)?;
    share.set_item("host_budget", s.node_share.host_budget)?;
    d.set_item("node_share", share)?;
    d.set_item(
        "copy_waited_for_device_slot",
        s.copy_waited_for_device_slot.as_secs_f64(),
    )?;
    d.set_item("transfer", s.transfer.map(|t| t.as_secs_f64()))?;
    d.set_item("copies", s.copies)?;
    d.set_item("consumer_stalls", s.consumer_stalls)?;
    d.set_item("consumer_stall_time", s.consumer_stall_time.as_secs_f64())?;
    let shares = s.source_shares();
    let sources = s
        .sources
        .iter()
        .zip(shares)
        .map(|(source, share)| {
            let one = PyDict::new(py);
            one.set_item("samples", source.samples)?;
            one.set_item("share", share)?;
            one.set_item("decode", source.decode.as_secs_f64())?;
            one.set_item("per_sample", source.per_sample().as_secs_f64())?;
            Ok(one)
        })
        .collect::<PyResult<Vec<_>>>()?;
    d.set_item("sources", PyList::new(py, sources)?)?;
    d.set_item("slowest_source", s.slowest_source().map(|(i, _, _)| i))?;
    let (bottleneck, verdict) = s.bottleneck();
    d.set_item("bottleneck", bottleneck_name(bottleneck))?;
    d.set_item("verdict", verdict)?;
    d.set_item("host_slots", slots(py, &s.host_slots)?)?;
    d.set_item("device_slots", slots(py, &s.device_slots)?)?;
    Ok(d)
}
