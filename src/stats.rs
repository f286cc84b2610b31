//! Counters each stage updates, and the [`Stats`] snapshot a caller reads.

use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;

use crate::config::NodeShare;
use crate::slot::stamp::{DeviceState, HostState};
use crate::source_tally::SourceStats;
// std's atomics in both builds: statistics order nothing, and models need not explore them.
use crate::sync::native::{AtomicU64, Ordering};

/// Busy and waiting time of one stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StageTimes {
    /// Time spent working (pulling samples, decoding, enqueueing copies).
    pub busy: Duration,
    /// Time spent waiting for a slot or for the stage before it.
    pub waited: Duration,
}

/// A snapshot of the pipeline's counters and slot states.
///
/// Its `Display` is a short report that ends with a line naming what limits throughput
/// (see [`bottleneck`](Stats::bottleneck)).
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Time since the pipeline started.
    pub elapsed: Duration,
    /// Batches handed to the consumer.
    pub batches: u64,
    /// Bytes of those batches.
    pub bytes: u64,
    /// The feeder: pulling samples from the source iterator / waiting for a free host slot.
    pub source: StageTimes,
    /// The decode workers (summed over them): decoding / waiting for the feeder to hand
    /// them a gathered batch.
    pub decode: StageTimes,
    /// Decode workers in the pool (what `decode.busy` is shared among).
    pub decode_threads: usize,
    /// The share of its node the pipeline took: of how many local ranks, its decode
    /// threads and host budget ([`ConfigBuilder::node_share`](crate::ConfigBuilder::node_share)).
    pub node_share: NodeShare,
    /// The copy thread: enqueueing copies and freeing host slots / waiting, for the next
    /// batch to be filled or for its device slot to be released (the latter part is
    /// [`copy_waited_for_device_slot`](Stats::copy_waited_for_device_slot)).
    pub copy: StageTimes,
    /// The part of `copy.waited` spent with the next batch filled, waiting for the
    /// consumer to release its device slot.
    pub copy_waited_for_device_slot: Duration,
    /// Time the backend's copy engine spent moving bytes, where the backend times it (the
    /// cpu backend's copies run on a thread of their own); `None` for cuda, whose copy
    /// engine is hardware.
    pub transfer: Option<Duration>,
    /// Copies the copy thread enqueued: each moves a run of consecutive batches (`batches /
    /// copies` is the average run).
    pub copies: u64,
    /// `pop` calls that found no batch ready and had to wait.
    pub consumer_stalls: u64,
    /// Time `pop` spent waiting for a batch.
    pub consumer_stall_time: Duration,
    /// Each host slot's (sequence, state).
    pub host_slots: Vec<(u64, HostState)>,
    /// Each device slot's (sequence, state).
    pub device_slots: Vec<(u64, DeviceState)>,
    /// Each source's decoded samples and decode time, indexed by source, where the
    /// decoder reads several sources (a [`Mixture`](crate::source::Mixture)'s
    /// [`MixedDecoder`](crate::source::MixedDecoder)); empty otherwise. A source's share is
    /// its samples over their sum ([`source_shares`](Stats::source_shares)).
    pub sources: Vec<SourceStats>,
}

/// The stage that limits a pipeline's throughput, as [`Stats::bottleneck`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Bottleneck {
    /// Too little has run to tell.
    NotYet,
    /// The consumer: `pop` rarely waits, so the loader keeps up with the trainer.
    Consumer,
    /// The source iterator: the feeder is busy pulling samples most of the time.
    Source,
    /// Decoding: the decode workers are busy most of the time.
    Decode,
    /// The copy: the copy thread (or the cpu backend's copy engine) is busy most of the
    /// time.
    Copy,
    /// Device slots: filled batches wait for the consumer to release a device slot.
    DeviceSlots,
    /// The machine's cores: the loader's threads together keep most of them busy.
    Cpu,
    /// No stage is saturated: the time goes in hand-offs between stages (too few host
    /// slots to keep every stage busy, or wake-up latency).
    HandOff,
}

impl Stats {
    /// Bytes delivered per second of `elapsed`.
    pub fn throughput(&self, elapsed: Duration) -> f64 {
        self.bytes as f64 / elapsed.as_secs_f64()
    }

    /// The counters over the interval from `earlier` (a snapshot of the same pipeline) to
    /// this one, for a reading of a steady stretch (warm-up left out); slot states are
    /// this snapshot's.
    ///
    /// ```
    /// # use pinring::{decode_fn, Config, Fence, Pipeline};
    /// # let config = Config::builder().batch_size(1).bytes_per_sample(4).build()?;
    /// # let copy = |s: u32, out: &mut [u8]| { out.copy_from_slice(&s.to_le_bytes()); Ok(()) };
    /// let mut pipeline = Pipeline::new(config, decode_fn(copy), 0..100u32)?;
    /// let warm = pipeline.stats();
    /// while let Some(batch) = pipeline.pop()? {
    ///     batch.release(Fence::Sync)?;
    /// }
    /// let steady = pipeline.stats().since(&warm);
    /// assert_eq!(steady.batches, 100 - warm.batches);
    /// println!("{}", steady.bottleneck().1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn since(&self, earlier: &Stats) -> Stats {
        let stage = |a: StageTimes, b: StageTimes| StageTimes {
            busy: a.busy.saturating_sub(b.busy),
            waited: a.waited.saturating_sub(b.waited),
        };
        Stats {
            elapsed: self.elapsed.saturating_sub(earlier.elapsed),
            batches: self.batches.saturating_sub(earlier.batches),
            bytes: self.bytes.saturating_sub(earlier.bytes),
            source: stage(self.source, earlier.source),
            decode: stage(self.decode, earlier.decode),
            decode_threads: self.decode_threads,
            node_share: self.node_share,
            copy: stage(self.copy, earlier.copy),
            copy_waited_for_device_slot: (self.copy_waited_for_device_slot)
                .saturating_sub(earlier.copy_waited_for_device_slot),
            transfer: match (self.transfer, earlier.transfer) {
                (Some(a), Some(b)) => Some(a.saturating_sub(b)),
                (a, _) => a,
            },
            copies: self.copies.saturating_sub(earlier.copies),
            consumer_stalls: self.consumer_stalls.saturating_sub(earlier.consumer_stalls),
            consumer_stall_time: (self.consumer_stall_time)
                .saturating_sub(earlier.consumer_stall_time),
            host_slots: self.host_slots.clone(),
            device_slots: self.device_slots.clone(),
            sources: self
                .sources
                .iter()
                .enumerate()
                .map(|(i, now)| {
                    let before = earlier.sources.get(i).copied().unwrap_or_default();
                    SourceStats {
                        samples: now.samples.saturating_sub(before.samples),
                        decode: now.decode.saturating_sub(before.decode),
                    }
                })
                .collect(),
        }
    }

    /// Each source's share of the decoded samples ([`sources`](Stats::sources)), from 0 to
    /// 1; empty without per-source counts.
    pub fn source_shares(&self) -> Vec<f64> {
        let total: u64 = self.sources.iter().map(|s| s.samples).sum();
        self.sources
            .iter()
            .map(|s| s.samples as f64 / total.max(1) as f64)
            .collect()
    }

    /// The source that decodes markedly slower per sample than the rest, where there are
    /// several: its index, its decode time per sample and the others' (their decode time
    /// over their samples). "Markedly" is at least [`Stats::SLOW_SOURCE`] times the
    /// others'. `None` with fewer than two sources that decoded anything, or none that slow.
    pub fn slowest_source(&self) -> Option<(usize, Duration, Duration)> {
        let active = self.sources.iter().filter(|s| s.samples > 0).count();
        if active < 2 {
            return None;
        }
        let (slowest, stats) = self
            .sources
            .iter()
            .enumerate()
            .filter(|(_, s)| s.samples > 0)
            .max_by_key(|(_, s)| s.per_sample())?;
        let rest = self
            .sources
            .iter()
            .enumerate()
            .filter(|&(i, _)| i != slowest)
            .fold(SourceStats::default(), |sum, (_, s)| SourceStats {
                samples: sum.samples + s.samples,
                decode: sum.decode + s.decode,
            });
        let (mine, others) = (stats.per_sample(), rest.per_sample());
        (mine.as_secs_f64() >= Self::SLOW_SOURCE * others.as_secs_f64() && mine > others)
            .then_some((slowest, mine, others))
    }

    /// How many times slower per sample than the others a source must decode for
    /// [`slowest_source`](Stats::slowest_source) (and the decode-bound bottleneck line) to
    /// name it.
    pub const SLOW_SOURCE: f64 = 1.5;

    /// Share of [`elapsed`](Stats::elapsed) that `d` is, in percent.
    fn pct(&self, d: Duration) -> f64 {
        100.0 * d.as_secs_f64() / self.elapsed.as_secs_f64().max(1e-9)
    }

    /// Which stage limits throughput, and the figures that say so, in a sentence such as
    /// "decode-bound: decode busy 97% (of 8 threads); the copy thread waited for filled
    /// batches 68% of the time". Read over the whole run so far: take it after a steady
    /// stretch (or subtract two snapshots' counters yourself).
    pub fn bottleneck(&self) -> (Bottleneck, String) {
        let stalled = self.pct(self.consumer_stall_time);
        let source = self.pct(self.source.busy);
        let decode = self.pct(self.decode.busy) / self.decode_threads.max(1) as f64;
        let copy = self.pct(self.copy.busy);
        let transfer = self.transfer.map_or(0.0, |t| self.pct(t));
        let for_slot = self.pct(self.copy_waited_for_device_slot);
        let for_filled = self.pct(
            self.copy
                .waited
                .saturating_sub(self.copy_waited_for_device_slot),
        );
        let threads = thread_count(self.decode_threads);
        if self.batches < 2 {
            return (Bottleneck::NotYet, "too few batches yet to tell".into());
        }
        if stalled < 10.0 {
            return (
                Bottleneck::Consumer,
                format!(
                    "consumer-bound: pop waited only {stalled:.0}% of the time; the loader keeps up \
                     (the trainer's step is the limit)"
                ),
            );
        }
        if for_slot >= 30.0 {
            return (
                Bottleneck::DeviceSlots,
                format!(
                    "device-slot-bound: the copy thread waited {for_slot:.0}% of the time for the \
                     consumer to release a device slot (release batches sooner, or add device slots)"
                ),
            );
        }
        let (stage, busy) = [
            (Bottleneck::Copy, copy.max(transfer)),
            (Bottleneck::Decode, decode),
            (Bottleneck::Source, source),
        ]
        .into_iter()
        .fold((Bottleneck::HandOff, 0.0), |best, (b, v)| {
            if v > best.1 {
                (b, v)
            } else {
                best
            }
        });
        if busy >= 70.0 {
            let text = match stage {
                Bottleneck::Copy if transfer > copy => format!(
                    "copy-bound: the copy engine was busy {transfer:.0}% of the time"
                ),
                Bottleneck::Copy => format!(
                    "copy-bound: the copy thread was busy {copy:.0}% of the time ({:.1} batches a copy)",
                    self.batches as f64 / self.copies.max(1) as f64
                ),
                Bottleneck::Decode => format!(
                    "decode-bound: decode busy {decode:.0}% (of {threads}); the copy thread \
                     waited for filled batches {for_filled:.0}% of the time{}",
                    self.slowest_source().map_or_else(String::new, |(s, mine, others)| format!(
                        "; source {s} decodes slowest: {:.1} us a sample against {:.1} us for \
                         the others",
                        mine.as_secs_f64() * 1e6,
                        others.as_secs_f64() * 1e6
                    ))
                ),
                _ => format!(
                    "source-bound: the source iterator was busy {source:.0}% of the time; the copy \
                     thread waited for filled batches {for_filled:.0}% of the time"
                ),
            };
            return (stage, text);
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let total = (self.source.busy + self.decode.busy + self.copy.busy)
            + self.transfer.unwrap_or_default();
        let used = self.pct(total) / 100.0;
        if used >= 0.75 * cores as f64 {
            return (
                Bottleneck::Cpu,
                format!(
                    "cpu-bound: the loader's threads kept {used:.1} of this machine's {cores} cores \
                     busy (decode {decode:.0}% of {threads}, copy {copy:.0}%, transfer \
                     {transfer:.0}%); more cores, or cheaper decoding, would help"
                ),
            );
        }
        (
            Bottleneck::HandOff,
            format!(
                "hand-off-bound: no stage is saturated (source busy {source:.0}%, decode {decode:.0}% \
                 of {threads}, copy {copy:.0}%) while pop waited {stalled:.0}% of the time; \
                 more host slots let more batches decode at once"
            ),
        )
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let secs = self.elapsed.as_secs_f64().max(1e-9);
        writeln!(
            f,
            "{} batches, {:.1} MiB in {:.2} s ({:.1} batches/s, {:.2} GiB/s)",
            self.batches,
            self.bytes as f64 / (1u64 << 20) as f64,
            secs,
            self.batches as f64 / secs,
            self.bytes as f64 / secs / (1u64 << 30) as f64
        )?;
        writeln!(
            f,
            "source   busy {:>9.1} ms  waited {:>9.1} ms for a free host slot",
            ms(self.source.busy),
            ms(self.source.waited)
        )?;
        writeln!(
            f,
            "decode   busy {:>9.1} ms  waited {:>9.1} ms for gathered batches ({}, summed)",
            ms(self.decode.busy),
            ms(self.decode.waited),
            thread_count(self.decode_threads)
        )?;
        let share = self.node_share;
        if share.local_ranks > 1 {
            writeln!(
                f,
                "node     share of 1 of {} local ranks: {} decode thread(s), {:.2} GiB host budget",
                share.local_ranks,
                share.decode_threads,
                share.host_budget as f64 / (1u64 << 30) as f64
            )?;
        }
        writeln!(
            f,
            "copy     busy {:>9.1} ms  waited {:>9.1} ms for filled batches, {:.1} ms for released device slots ({} copies)",
            ms(self.copy.busy),
            ms(self.copy.waited.saturating_sub(self.copy_waited_for_device_slot)),
            ms(self.copy_waited_for_device_slot),
            self.copies
        )?;
        if let Some(t) = self.transfer {
            writeln!(
                f,
                "transfer busy {:>6.1} ms  (the cpu backend's copy engine)",
                ms(t)
            )?;
        }
        let shares = self.source_shares();
        for (i, (source, share)) in self.sources.iter().zip(shares).enumerate() {
            writeln!(
                f,
                "source {i:<3} {} samples ({:.1}%), decode {:.1} ms ({:.1} us a sample)",
                source.samples,
                100.0 * share,
                ms(source.decode),
                source.per_sample().as_secs_f64() * 1e6
            )?;
        }
        writeln!(
            f,
            "consumer waited {:.1} ms for a batch in {} of {} pops",
            ms(self.consumer_stall_time),
            self.consumer_stalls,
            self.batches
        )?;
        write!(f, "bottleneck: {}", self.bottleneck().1)
    }
}

/// A stage's busy/wait counters, in nanoseconds.
#[derive(Debug, Default)]
pub(crate) struct StageCounters {
    /// Nanoseconds busy; Relaxed (a statistic, orders nothing).
    busy: AtomicU64,
    /// Nanoseconds waiting; Relaxed (a statistic, orders nothing).
    waited: AtomicU64,
}

impl StageCounters {
    pub(crate) fn new() -> Self {
        StageCounters {
            busy: AtomicU64::new(0),
            waited: AtomicU64::new(0),
        }
    }

    /// Adds the time since `since` to the busy counter; returns now.
    #[inline]
    pub(crate) fn busy_since(&self, since: Instant) -> Instant {
        let now = Instant::now();
        self.busy.fetch_add(nanos(now - since), Ordering::Relaxed);
        now
    }

    /// Adds the time since `since` to the waiting counter; returns now.
    #[inline]
    pub(crate) fn waited_since(&self, since: Instant) -> Instant {
        let now = Instant::now();
        self.waited.fetch_add(nanos(now - since), Ordering::Relaxed);
        now
    }

    pub(crate) fn snapshot(&self) -> StageTimes {
        StageTimes {
            busy: Duration::from_nanos(self.busy.load(Ordering::Relaxed)),
            waited: Duration::from_nanos(self.waited.load(Ordering::Relaxed)),
        }
    }
}

/// Every counter of a pipeline. Each writer's counters sit on cache lines of their own
/// (`CachePadded`): the decode workers add to theirs on every item and the consumer to its
/// own on every pop, and a counter beside another thread's would cost the pop a cache miss
/// each time that thread wrote.
#[derive(Debug)]
pub(crate) struct Counters {
    /// The feeder's.
    pub(crate) source: CachePadded<StageCounters>,
    /// The decode workers'.
    pub(crate) decode: CachePadded<StageCounters>,
    /// The copy thread's busy and waiting time.
    pub(crate) copy: CachePadded<StageCounters>,
    /// The consumer's.
    pub(crate) consumer: CachePadded<ConsumerCounters>,
    /// Nanoseconds the copy thread waited with the next batch filled (for its device
    /// slot); Relaxed statistic.
    pub(crate) copy_device_wait: AtomicU64,
    /// Copy runs enqueued; Relaxed statistic.
    pub(crate) copies: AtomicU64,
    /// When the pipeline started.
    pub(crate) started: Instant,
}

/// What the consumer counts as it pops.
#[derive(Debug, Default)]
pub(crate) struct ConsumerCounters {
    /// Batches popped; Relaxed statistic.
    pub(crate) batches: AtomicU64,
    /// Bytes popped; Relaxed statistic.
    pub(crate) bytes: AtomicU64,
    /// Pops that waited; Relaxed statistic.
    pub(crate) stalls: AtomicU64,
    /// Nanoseconds pops waited; Relaxed statistic.
    pub(crate) stall_ns: AtomicU64,
}

impl Counters {
    pub(crate) fn new() -> Self {
        Counters {
            source: CachePadded::new(StageCounters::new()),
            decode: CachePadded::new(StageCounters::new()),
            copy: CachePadded::new(StageCounters::new()),
            consumer: CachePadded::default(),
            copy_device_wait: AtomicU64::new(0),
            copies: AtomicU64::new(0),
            started: Instant::now(),
        }
    }
}

/// "1 thread", "2 threads".
fn thread_count(n: usize) -> String {
    if n == 1 {
        "1 thread".to_owned()
    } else {
        format!("{n} threads")
    }
}

#[inline]
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::config::NodeShare;
    use crate::stats::{Bottleneck, StageTimes, Stats};

    /// Stats over one second: `stalled`, `source`, `decode` (summed over 4 threads),
    /// `copy` busy, and the copy thread's wait for device slots, in ms.
    fn stats(stalled: u64, source: u64, decode: u64, copy: u64, for_slot: u64) -> Stats {
        let ms = Duration::from_millis;
        Stats {
            elapsed: ms(1000),
            batches: 100,
            bytes: 100 << 20,
            source: StageTimes {
                busy: ms(source),
                waited: ms(1000 - source),
            },
            decode: StageTimes {
                busy: ms(decode),
                waited: ms(4000 - decode),
            },
            decode_threads: 4,
            node_share: NodeShare {
                local_ranks: 1,
                decode_threads: 4,
                host_budget: 16 << 30,
            },
            copy: StageTimes {
                busy: ms(copy),
                waited: ms(1000 - copy),
            },
            copy_waited_for_device_slot: ms(for_slot),
            transfer: None,
            copies: 50,
            consumer_stalls: 90,
            consumer_stall_time: ms(stalled),
            host_slots: Vec::new(),
            device_slots: Vec::new(),
            sources: Vec::new(),
        }
    }

    #[test]
    fn the_text_counts_its_decode_threads_in_words() {
        let mut one = stats(20, 10, 100, 10, 0);
        one.decode_threads = 1;
        assert!(one.to_string().contains("(1 thread, summed)"), "{one}");
        let four = stats(20, 10, 100, 10, 0);
        assert!(four.to_string().contains("(4 threads, summed)"), "{four}");
    }

    #[test]
    fn bottleneck_names_the_limiting_stage() {
        let (b, why) = stats(20, 10, 100, 10, 0).bottleneck();
        assert_eq!(b, Bottleneck::Consumer, "{why}");
        let (b, why) = stats(600, 10, 100, 10, 500).bottleneck();
        assert_eq!(b, Bottleneck::DeviceSlots, "{why}");
        let (b, why) = stats(600, 10, 3600, 20, 0).bottleneck();
        if b != Bottleneck::Cpu {
            assert_eq!(b, Bottleneck::Decode, "{why}");
            assert!(
                why.starts_with("decode-bound: decode busy 90% (of 4 threads)"),
                "{why}"
            );
        }
        let (b, why) = stats(600, 900, 40, 20, 0).bottleneck();
        assert_eq!(b, Bottleneck::Source, "{why}");
        let (b, why) = stats(600, 10, 40, 850, 0).bottleneck();
        assert_eq!(b, Bottleneck::Copy, "{why}");
        let (b, why) = stats(600, 10, 40, 20, 0).bottleneck();
        assert_eq!(b, Bottleneck::HandOff, "{why}");
        let mut early = stats(600, 10, 40, 20, 0);
        early.batches = 1;
        assert_eq!(early.bottleneck().0, Bottleneck::NotYet);
    }

    #[test]
    fn decode_bound_line_names_a_slow_source() {
        use crate::source_tally::SourceStats;
        let us = Duration::from_micros;
        let mut s = stats(600, 10, 3600, 20, 0);
        s.sources = vec![
            SourceStats {
                samples: 700,
                decode: us(700 * 10),
            },
            SourceStats {
                samples: 300,
                decode: us(300 * 40),
            },
        ];
        assert_eq!(s.slowest_source(), Some((1, us(40), us(10))));
        let (b, why) = s.bottleneck();
        if b == Bottleneck::Decode {
            assert!(
                why.ends_with(
                    "source 1 decodes slowest: 40.0 us a sample against 10.0 us for the others"
                ),
                "{why}"
            );
        }
        let text = s.to_string();
        assert!(text.contains("source 0   700 samples (70.0%)"), "{text}");
        assert!(text.contains("source 1   300 samples (30.0%)"), "{text}");
        // Alike sources: none named.
        s.sources[1].decode = us(300 * 12);
        assert_eq!(s.slowest_source(), None);
    }

    #[test]
    fn display_says_what_each_stage_waited_for() {
        let text = stats(600, 10, 3600, 20, 100).to_string();
        assert!(text.contains("for a free host slot"), "{text}");
        assert!(text.contains("for gathered batches"), "{text}");
        assert!(
            text.contains("for filled batches, 100.0 ms for released device slots"),
            "{text}"
        );
        assert!(
            text.lines().last().unwrap().starts_with("bottleneck: "),
            "{text}"
        );
    }
}
