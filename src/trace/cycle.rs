//! [`SlotTimeline`]: each batch's cycle through its host and device slots, read from the
//! trace ring, and the hand-offs of the cycle summarized — which one waits, and for how
//! long (`Pipeline::slot_timeline`).
//!
//! A device slot's cycle is: the copy thread takes it (`take`), copies into it and leases
//! it (`lease`, the token pushed), the consumer's `pop` returns it, the consumer releases
//! it (`released`), and the copy thread takes it again for batch `k + D` — as soon as it
//! sees the release, or later, when batch `k + D` is filled. A host slot's: the feeder
//! gathers into it, the decoders fill it, the copy thread takes it, the copy completes and
//! the copy thread frees it (`H2D`'s end), and the feeder gathers batch `k + H` into it.
//! Each hand-off is the time from one owner's last record to the next owner's first. The
//! copy thread takes batch `k`'s device slot once three things hold — `k` is filled, its
//! slot's last batch `k - D` is released, and batch `k - 1` is taken (batches are copied in
//! order) — so a take is counted under whichever came last, and only there.

use std::collections::HashMap;
use std::fmt;

use super::{Kind, Span, Trace};

/// One batch's trip through its slots: the time of each hand-off, in nanoseconds on the
/// trace's clock (from the pipeline's start); `None` where the ring no longer holds it (a
/// ring smaller than the run keeps its latest spans) or the batch never got there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SlotCycle {
    /// The batch's sequence number.
    pub seq: u64,
    /// The feeder began gathering it (its host slot seen FREE).
    pub gather: Option<u64>,
    /// Its last decode item ended (FILLED).
    pub filled: Option<u64>,
    /// The copy thread took its device slot (COPYING).
    pub take: Option<u64>,
    /// Its token was about to be pushed to the consumer (LEASED).
    pub lease: Option<u64>,
    /// The `pop` that returned it was called.
    pub pop_called: Option<u64>,
    /// That `pop` returned it.
    pub popped: Option<u64>,
    /// Its holder was about to store RELEASED (the fence captured).
    pub released: Option<u64>,
    /// The copy thread saw its copy complete and freed its host slot.
    pub host_freed: Option<u64>,
}

/// One hand-off of the cycle over a run: how many batches show it and its spread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handoff {
    /// What hands to what, and who waits.
    pub name: &'static str,
    /// Batches in which it was seen.
    pub count: usize,
    /// Median, in nanoseconds.
    pub p50_ns: u64,
    /// 90th percentile, in nanoseconds.
    pub p90_ns: u64,
    /// Largest, in nanoseconds.
    pub max_ns: u64,
}

/// Every batch's [`SlotCycle`] the trace holds, with the ring sizes they cycle through.
#[derive(Debug, Clone)]
pub struct SlotTimeline {
    host_slots: u64,
    device_slots: u64,
    cycles: Vec<SlotCycle>,
}

impl SlotTimeline {
    /// Reads the cycles from `trace`'s spans.
    pub(crate) fn from_trace(trace: &Trace, host_slots: usize, device_slots: usize) -> Self {
        SlotTimeline::from_spans(&trace.spans(), host_slots, device_slots)
    }

    fn from_spans(spans: &[Span], host_slots: usize, device_slots: usize) -> Self {
        let mut by_seq: HashMap<u64, SlotCycle> = HashMap::new();
        let end = |s: &Span| s.start_ns + s.dur_ns;
        let first = |at: &mut Option<u64>, t: u64| *at = Some(at.map_or(t, |a| a.min(t)));
        let last = |at: &mut Option<u64>, t: u64| *at = Some(at.map_or(t, |a| a.max(t)));
        for s in spans {
            let c = by_seq.entry(s.seq).or_insert(SlotCycle {
                seq: s.seq,
                ..SlotCycle::default()
            });
            match s.kind {
                Kind::Source => first(&mut c.gather, s.start_ns),
                Kind::Decode => last(&mut c.filled, end(s)),
                Kind::Take => first(&mut c.take, s.start_ns),
                Kind::Lease => first(&mut c.lease, s.start_ns),
                Kind::Pop => {
                    c.pop_called = Some(s.start_ns);
                    c.popped = Some(end(s));
                }
                Kind::Released => first(&mut c.released, s.start_ns),
                Kind::H2d => last(&mut c.host_freed, end(s)),
                Kind::CopyEnqueue | Kind::CopyCall | Kind::FenceWait | Kind::Release => {}
            }
        }
        let mut cycles: Vec<SlotCycle> = by_seq.into_values().collect();
        cycles.sort_by_key(|c| c.seq);
        SlotTimeline {
            host_slots: host_slots as u64,
            device_slots: device_slots as u64,
            cycles,
        }
    }

    /// Each batch's cycle, in sequence order.
    pub fn cycles(&self) -> &[SlotCycle] {
        &self.cycles
    }

    /// Batch `seq`'s cycle, if the trace holds any of it.
    pub fn cycle(&self, seq: u64) -> Option<&SlotCycle> {
        let i = self.cycles.binary_search_by_key(&seq, |c| c.seq).ok()?;
        Some(&self.cycles[i])
    }

    /// Device slots the batches cycle through (`D`: batch `k + D` reuses `k`'s).
    pub fn device_slots(&self) -> u64 {
        self.device_slots
    }

    /// Host slots (`H`: batch `k + H` reuses `k`'s).
    pub fn host_slots(&self) -> u64 {
        self.host_slots
    }

    /// The hand-offs of the cycle over every batch that shows each (see the module docs),
    /// in cycle order, then the two slot cycles whole.
    pub fn handoffs(&self) -> Vec<Handoff> {
        let (d, h) = (self.device_slots, self.host_slots);
        let mut lists: Vec<(&'static str, Vec<u64>)> =
            HANDOFFS.iter().map(|n| (*n, Vec::new())).collect();
        let gap = |a: Option<u64>, b: Option<u64>| Some(b?.saturating_sub(a?));
        for c in &self.cycles {
            let before = c.seq.checked_sub(d).and_then(|s| self.cycle(s));
            let host_next = self.cycle(c.seq + h);
            // The copy's gate: the last of its fill, its device slot's release and the take
            // of the batch before it (the copy thread takes batches in order).
            let release = before.and_then(|b| b.released);
            let previous = c
                .seq
                .checked_sub(1)
                .and_then(|s| self.cycle(s))
                .and_then(|p| p.take);
            let gates = [c.filled, release, previous];
            // Before batch D the slot was never released (and batch 0 follows none): the
            // gates it has decide. After it, a gate the ring no longer holds leaves the take
            // uncounted.
            let all_held = gates.iter().all(Option::is_some);
            let gate = if c.take.is_none() || (c.seq >= d && !all_held) {
                None
            } else {
                (0..3)
                    .filter(|&i| gates[i].is_some())
                    .max_by_key(|&i| (gates[i], 2 - i))
            };
            let gated = |i: usize| {
                if gate == Some(i) {
                    gap(gates[i], c.take)
                } else {
                    None
                }
            };
            // The lease's way to the consumer: seen by a consumer waiting in `pop`, or found in
            // the ring by one that came later.
            let consumer_waited = matches!((c.pop_called, c.lease), (Some(p), Some(l)) if p <= l);
            let delivered = gap(c.lease, c.popped);
            let (to_waiting, to_busy) = if consumer_waited {
                (delivered, None)
            } else {
                (None, delivered)
            };
            let values = [
                gap(c.gather, c.filled),
                gated(0),
                gated(1),
                gated(2),
                gap(c.take, c.lease),
                to_waiting,
                to_busy,
                gap(c.popped, c.released),
                gap(c.take, c.host_freed),
                gap(c.host_freed, host_next.and_then(|n| n.gather)),
                gap(before.and_then(|b| b.take), c.take),
                gap(
                    c.seq
                        .checked_sub(h)
                        .and_then(|s| self.cycle(s))
                        .and_then(|b| b.gather),
                    c.gather,
                ),
            ];
            for (list, v) in lists.iter_mut().zip(values) {
                if let Some(v) = v {
                    list.1.push(v);
                }
            }
        }
        lists
            .into_iter()
            .map(|(name, mut v)| {
                v.sort_unstable();
                // The value at quantile `q` (nearest rank); 0 for a hand-off never seen.
                let at = |q: f64| {
                    let last = v.len().saturating_sub(1);
                    v.get((last as f64 * q).round() as usize)
                        .copied()
                        .unwrap_or(0)
                };
                Handoff {
                    name,
                    count: v.len(),
                    p50_ns: at(0.5),
                    p90_ns: at(0.9),
                    max_ns: at(1.0),
                }
            })
            .collect()
    }
}

/// The hand-offs [`SlotTimeline::handoffs`] reports, in its order.
const HANDOFFS: [&str; 12] = [
    "gather + decode (feeder, decoders)",
    "FILLED -> take (copy thread sees a fill)",
    "RELEASED -> take (copy thread sees a release)",
    "take k-1 -> take k (in order: its run, or busy)",
    "take -> LEASED (fence wait, copy call, READY)",
    "LEASED -> popped (consumer was waiting)",
    "LEASED -> popped (consumer was busy)",
    "popped -> RELEASED (consumer holds it)",
    "take -> host freed (copy completes, seen)",
    "host freed -> gather (feeder sees FREE)",
    "device slot cycle (take k - D -> take k)",
    "host slot cycle (gather k - H -> gather k)",
];

impl fmt::Display for SlotTimeline {
    /// A table of the hand-offs: count, p50, p90 and max in µs.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "slot cycle over {} batches (H {}, D {}); µs: p50 / p90 / max",
            self.cycles.len(),
            self.host_slots,
            self.device_slots
        )?;
        let us = |ns: u64| ns as f64 / 1e3;
        for h in self.handoffs() {
            writeln!(
                f,
                "  {:<46} {:>7}  {:>9.1} / {:>9.1} / {:>9.1}",
                h.name,
                h.count,
                us(h.p50_ns),
                us(h.p90_ns),
                us(h.max_ns)
            )?;
        }
        Ok(())
    }
}
