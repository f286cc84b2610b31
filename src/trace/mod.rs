//! An opt-in timeline of the pipeline: per-batch spans of every stage, recorded into a
//! preallocated ring and written as Chrome trace JSON (which Perfetto's UI and
//! `chrome://tracing` open).
//!
//! Off by default; [`ConfigBuilder::trace`](crate::ConfigBuilder::trace) turns it on with a
//! capacity in spans. Recording a span is a clock read, one Relaxed `fetch_add` to claim an
//! entry and a few stores: no allocation, no lock. When the ring is full the oldest spans
//! are overwritten, so a long run keeps its latest `capacity` spans. With tracing off each
//! stage tests one `Option` and does nothing more.
//!
//! Spans (one per batch unless said otherwise):
//!
//! | name | thread | from – to |
//! | --- | --- | --- |
//! | `source` | source | the feeder starts gathering batch `k` – hands it to the decoders |
//! | `decode` | decode worker `i` | one work item (a run of samples of batch `k`) |
//! | `copy enqueue` | copy | enqueueing a run of batches (`first`, `batches`) |
//! | `fence wait` | copy | handing a released slot's fence to the copy stream |
//! | `copy call` | copy | the backend's copy of a run (cuda: the copy and event records) |
//! | `H2D` | (async) | batch `k`'s copy enqueued – the copy thread saw it complete |
//! | `pop` | consumer | a `pop` that returned batch `k`, its wait included |
//! | `release` | consumer | releasing (or dropping) batch `k` |
//!
//! and three instants a batch, which place its slot cycle's hand-offs exactly: `take` (the
//! copy thread has just taken batch `k`'s device slot: COPYING), `lease` (its token is about
//! to be pushed: LEASED), `released` (its holder is about to store RELEASED). `lease` and
//! `released` come before the store that hands the slot on, `take` after the load that saw
//! it handed, so each owner's record is ordered after the last owner's (`popped(k)` ≥
//! `lease(k)`, `take(k + D)` ≥ `released(k)`). [`SlotTimeline`](cycle::SlotTimeline) (`cycle.rs`) reads a slot's cycle
//! from them.
//!
//! Each entry is a small seqlock of atomics: a writer claims an index, clears the entry's
//! tag, stores the fields, and stores the tag (index + 1) with Release; a reader loads the
//! tag with Acquire, reads the fields, and keeps the entry only if the tag is unchanged
//! after an Acquire fence. Two writers meet on one entry only if `capacity` spans are
//! recorded while one of them writes; the reader then sees a mixed entry at worst, never
//! undefined behaviour (every field is an atomic).

pub(crate) mod cycle;

use crate::sync::native::{fence, AtomicU64, Instant, Ordering};
use std::fmt::Write as _;
use std::io;

/// What a span shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Kind {
    Source = 1,
    Decode = 2,
    CopyEnqueue = 3,
    FenceWait = 4,
    H2d = 5,
    Pop = 6,
    Release = 7,
    CopyCall = 8,
    Take = 9,
    Lease = 10,
    Released = 11,
}

impl Kind {
    fn from_u8(v: u8) -> Option<Kind> {
        Some(match v {
            1 => Kind::Source,
            2 => Kind::Decode,
            3 => Kind::CopyEnqueue,
            4 => Kind::FenceWait,
            5 => Kind::H2d,
            6 => Kind::Pop,
            7 => Kind::Release,
            8 => Kind::CopyCall,
            9 => Kind::Take,
            10 => Kind::Lease,
            11 => Kind::Released,
            _ => return None,
        })
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Source => "source",
            Kind::Decode => "decode",
            Kind::CopyEnqueue => "copy enqueue",
            Kind::FenceWait => "fence wait",
            Kind::H2d => "H2D",
            Kind::Pop => "pop",
            Kind::Release => "release",
            Kind::CopyCall => "copy call",
            Kind::Take => "take",
            Kind::Lease => "lease",
            Kind::Released => "released",
        }
    }

    /// A point in time rather than a span.
    fn is_instant(self) -> bool {
        matches!(self, Kind::Take | Kind::Lease | Kind::Released)
    }
}

/// Which thread a span belongs to (its row in the timeline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Track {
    Source,
    Copy,
    Consumer,
    /// Decode worker `i`.
    Decode(u32),
}

impl Track {
    fn tid(self) -> u32 {
        match self {
            Track::Source => 1,
            Track::Copy => 2,
            Track::Consumer => 3,
            Track::Decode(i) => 10 + i.min(0xff_fff0),
        }
    }

    fn name(tid: u32) -> String {
        match tid {
            1 => "source".into(),
            2 => "copy".into(),
            3 => "consumer".into(),
            t => format!("decode {}", t - 10),
        }
    }

    /// The decode worker the calling thread is, by its place in the rayon pool.
    pub(crate) fn this_decoder() -> Track {
        Track::Decode(rayon::current_thread_index().map_or(0, |i| i as u32))
    }
}

/// One recorded span. Every field is a statistic: Relaxed, except `tag` (see the module
/// docs).
#[derive(Debug)]
struct Entry {
    /// 0 while empty or being written; else the claim index + 1.
    tag: AtomicU64,
    /// kind (8 bits) | tid (24 bits) | arg (32 bits).
    word: AtomicU64,
    seq: AtomicU64,
    start_ns: AtomicU64,
    dur_ns: AtomicU64,
}

/// A span read back from the ring.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub(crate) kind: Kind,
    pub(crate) tid: u32,
    pub(crate) arg: u32,
    pub(crate) seq: u64,
    pub(crate) start_ns: u64,
    pub(crate) dur_ns: u64,
}

/// The ring of spans of one pipeline.
#[derive(Debug)]
pub(crate) struct Trace {
    origin: Instant,
    entries: Box<[Entry]>,
    /// Spans claimed so far; Relaxed (each index is handed out once; the entry's tag orders
    /// its fields).
    claims: AtomicU64,
}

impl Trace {
    /// A ring for `capacity` spans (at least one).
    pub(crate) fn new(capacity: usize) -> Self {
        let entries = (0..capacity.max(1))
            .map(|_| Entry {
                tag: AtomicU64::new(0),
                word: AtomicU64::new(0),
                seq: AtomicU64::new(0),
                start_ns: AtomicU64::new(0),
                dur_ns: AtomicU64::new(0),
            })
            .collect();
        Trace {
            origin: Instant::now(),
            entries,
            claims: AtomicU64::new(0),
        }
    }

    /// Now, on the trace's clock.
    #[inline]
    pub(crate) fn now(&self) -> u64 {
        nanos_since(self.origin, Instant::now())
    }

    /// Records a span from `start` (a [`now`](Self::now) reading) to now.
    #[inline]
    pub(crate) fn span(&self, kind: Kind, track: Track, seq: u64, arg: u32, start: u64) {
        let end = self.now();
        self.record(kind, track, seq, arg, start, end);
    }

    /// Records an instant: a span of no length at now.
    #[inline]
    pub(crate) fn instant(&self, kind: Kind, track: Track, seq: u64, arg: u32) {
        let now = self.now();
        self.record(kind, track, seq, arg, now, now);
    }

    /// Records a span from `start` to `end` (both [`now`](Self::now) readings).
    pub(crate) fn record(
        &self,
        kind: Kind,
        track: Track,
        seq: u64,
        arg: u32,
        start: u64,
        end: u64,
    ) {
        let claim = self.claims.fetch_add(1, Ordering::Relaxed);
        let entry = &self.entries[(claim % self.entries.len() as u64) as usize];
        entry.tag.store(0, Ordering::Relaxed);
        // Release fence: a reader that sees a field stored below also sees the tag cleared
        // (pairs with the reader's Acquire fence before its second tag load).
        fence(Ordering::Release);
        let word = (kind as u64) << 56 | u64::from(track.tid() & 0xff_ffff) << 32 | u64::from(arg);
        entry.word.store(word, Ordering::Relaxed);
        entry.seq.store(seq, Ordering::Relaxed);
        entry.start_ns.store(start, Ordering::Relaxed);
        entry
            .dur_ns
            .store(end.saturating_sub(start), Ordering::Relaxed);
        // Release: the fields above happen-before a reader's Acquire load of this tag.
        entry.tag.store(claim + 1, Ordering::Release);
    }

    /// The complete spans in the ring, oldest first.
    pub(crate) fn spans(&self) -> Vec<Span> {
        let mut spans: Vec<(u64, Span)> = Vec::with_capacity(self.entries.len());
        for entry in self.entries.iter() {
            // Acquire: pairs with the writer's Release store of the tag.
            let tag = entry.tag.load(Ordering::Acquire);
            if tag == 0 {
                continue;
            }
            let word = entry.word.load(Ordering::Relaxed);
            let seq = entry.seq.load(Ordering::Relaxed);
            let start_ns = entry.start_ns.load(Ordering::Relaxed);
            let dur_ns = entry.dur_ns.load(Ordering::Relaxed);
            // Acquire fence: a field overwritten by a later writer makes the tag reload
            // below see that writer's clear (or later); pairs with its Release fence.
            fence(Ordering::Acquire);
            if entry.tag.load(Ordering::Relaxed) != tag {
                continue; // rewritten while read
            }
            let Some(kind) = Kind::from_u8((word >> 56) as u8) else {
                continue;
            };
            spans.push((
                tag,
                Span {
                    kind,
                    tid: ((word >> 32) & 0xff_ffff) as u32,
                    arg: word as u32,
                    seq,
                    start_ns,
                    dur_ns,
                },
            ));
        }
        spans.sort_by_key(|(tag, s)| (s.start_ns, *tag));
        spans.into_iter().map(|(_, s)| s).collect()
    }

    /// Writes the spans as Chrome trace JSON; returns how many.
    pub(crate) fn write_json(&self, mut out: impl io::Write) -> io::Result<usize> {
        let spans = self.spans();
        let mut tids: Vec<u32> = spans.iter().map(|s| s.tid).collect();
        tids.sort_unstable();
        tids.dedup();
        let mut text = String::with_capacity(64 + spans.len() * 160);
        text.push_str("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n");
        text.push_str(
            "{\"ph\":\"M\",\"pid\":1,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"pinring\"}}",
        );
        for tid in &tids {
            let _ = write!(
                text,
                ",\n{{\"ph\":\"M\",\"pid\":1,\"tid\":{tid},\"name\":\"thread_name\",\"args\":{{\"name\":\"{}\"}}}}",
                Track::name(*tid)
            );
        }
        let us = |ns: u64| ns as f64 / 1e3;
        for s in &spans {
            let name = s.kind.name();
            let args = match s.kind {
                Kind::Decode => format!("{{\"batch\":{},\"first_sample\":{}}}", s.seq, s.arg),
                Kind::CopyEnqueue | Kind::CopyCall => {
                    format!("{{\"first\":{},\"batches\":{}}}", s.seq, s.arg)
                }
                Kind::FenceWait => format!("{{\"batch\":{},\"device_slot\":{}}}", s.seq, s.arg),
                _ => format!("{{\"batch\":{}}}", s.seq),
            };
            if s.kind.is_instant() {
                let _ = write!(
                    text,
                    ",\n{{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"slot\",\"name\":\"{name}\",\"pid\":1,\"tid\":{},\"ts\":{:.3},\"args\":{{\"batch\":{},\"slot\":{}}}}}",
                    s.tid,
                    us(s.start_ns),
                    s.seq,
                    s.arg
                );
            } else if s.kind == Kind::H2d {
                // An async span: copies in flight overlap, so they are not nested on a
                // thread's row.
                let _ = write!(
                    text,
                    ",\n{{\"ph\":\"b\",\"cat\":\"h2d\",\"name\":\"{name}\",\"id\":{},\"pid\":1,\"tid\":{},\"ts\":{:.3},\"args\":{args}}}\
                     ,\n{{\"ph\":\"e\",\"cat\":\"h2d\",\"name\":\"{name}\",\"id\":{},\"pid\":1,\"tid\":{},\"ts\":{:.3}}}",
                    s.seq,
                    s.tid,
                    us(s.start_ns),
                    s.seq,
                    s.tid,
                    us(s.start_ns + s.dur_ns)
                );
            } else {
                let _ = write!(
                    text,
                    ",\n{{\"ph\":\"X\",\"cat\":\"pinring\",\"name\":\"{name}\",\"pid\":1,\"tid\":{},\"ts\":{:.3},\"dur\":{:.3},\"args\":{args}}}",
                    s.tid,
                    us(s.start_ns),
                    us(s.dur_ns)
                );
            }
        }
        text.push_str("\n]}\n");
        out.write_all(text.as_bytes())?;
        Ok(spans.len())
    }
}

fn nanos_since(origin: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(origin).as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use crate::trace::{Kind, Trace, Track};

    #[test]
    fn ring_keeps_the_latest_spans() {
        let t = Trace::new(4);
        for k in 0..10 {
            t.record(Kind::Source, Track::Source, k, 0, k * 10, k * 10 + 5);
        }
        let spans = t.spans();
        let seqs: Vec<u64> = spans.iter().map(|s| s.seq).collect();
        assert_eq!(seqs, [6, 7, 8, 9]);
        assert!(spans
            .iter()
            .all(|s| s.dur_ns == 5 && s.kind == Kind::Source));
    }

    #[test]
    fn json_names_threads_and_async_copies() {
        let t = Trace::new(8);
        t.record(Kind::Decode, Track::Decode(3), 7, 16, 100, 2100);
        t.record(Kind::H2d, Track::Copy, 7, 0, 2200, 9000);
        let mut out = Vec::new();
        assert_eq!(t.write_json(&mut out).unwrap(), 2);
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("\"name\":\"decode 3\""), "{text}");
        assert!(text.contains("\"ph\":\"b\",\"cat\":\"h2d\""), "{text}");
        assert!(text.contains("\"ts\":0.100,\"dur\":2.000"), "{text}");
    }
}
