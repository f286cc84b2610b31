//! Counters each stage updates, and the [`Stats`] snapshot a caller reads.

use std::time::{Duration, Instant};

use crate::slot::{DeviceState, HostState};
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
#[derive(Debug, Clone, PartialEq)]
pub struct Stats {
    /// Batches handed to the consumer.
    pub batches: u64,
    /// Bytes of those batches.
    pub bytes: u64,
    /// The feeder: pulling samples from the source iterator / waiting for a free host slot.
    pub source: StageTimes,
    /// The decode pool: decoding batches / the decode dispatcher waiting for gathered batches.
    pub decode: StageTimes,
    /// The copy thread: enqueueing copies and polling completions / waiting for work.
    pub copy: StageTimes,
    /// Copies the copy thread enqueued: each moves a run of consecutive batches (`batches /
    /// copies` is the average run).
    pub copies: u64,
    /// `pop` calls that found no batch ready and had to wait.
    pub consumer_stalls: u64,
    /// Time `pop` spent waiting.
    pub consumer_stall_time: Duration,
    /// Each host slot's (sequence, state).
    pub host_slots: Vec<(u64, HostState)>,
    /// Each device slot's (sequence, state).
    pub device_slots: Vec<(u64, DeviceState)>,
}

impl Stats {
    /// Bytes delivered per second of `elapsed`.
    pub fn throughput(&self, elapsed: Duration) -> f64 {
        self.bytes as f64 / elapsed.as_secs_f64()
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        writeln!(f, "batches {:>10}   bytes {:>14}", self.batches, self.bytes)?;
        for (name, t) in [
            ("source", self.source),
            ("decode", self.decode),
            ("copy", self.copy),
        ] {
            writeln!(
                f,
                "{name:<8} busy {:>10.1} ms   waited {:>10.1} ms",
                ms(t.busy),
                ms(t.waited)
            )?;
        }
        write!(
            f,
            "consumer stalls {} ({:.1} ms)",
            self.consumer_stalls,
            ms(self.consumer_stall_time)
        )
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

/// Every counter of a pipeline.
#[derive(Debug)]
pub(crate) struct Counters {
    pub(crate) source: StageCounters,
    pub(crate) decode: StageCounters,
    pub(crate) copy: StageCounters,
    /// Batches popped; Relaxed statistic.
    pub(crate) batches: AtomicU64,
    /// Bytes popped; Relaxed statistic.
    pub(crate) bytes: AtomicU64,
    /// Copy runs enqueued; Relaxed statistic.
    pub(crate) copies: AtomicU64,
    /// Pops that waited; Relaxed statistic.
    pub(crate) stalls: AtomicU64,
    /// Nanoseconds pops waited; Relaxed statistic.
    pub(crate) stall_ns: AtomicU64,
}

impl Counters {
    pub(crate) fn new() -> Self {
        Counters {
            source: StageCounters::new(),
            decode: StageCounters::new(),
            copy: StageCounters::new(),
            batches: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            copies: AtomicU64::new(0),
            stalls: AtomicU64::new(0),
            stall_ns: AtomicU64::new(0),
        }
    }
}

#[inline]
pub(crate) fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}
