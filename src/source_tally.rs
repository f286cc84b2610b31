//! [`SourceTally`]: each source's decoded samples and decode time, counted by a decoder
//! that reads several sources (a mixture's), and read into
//! [`Stats::sources`](crate::Stats::sources).

use std::time::Duration;

// std's atomics in every build: statistics order nothing.
use crate::sync::native::{AtomicU64, Ordering};

/// One source's counters, on a cache line of its own (decode workers of different
/// sources do not share a line).
#[derive(Debug, Default)]
#[repr(align(64))]
struct Counter {
    /// Samples decoded; Relaxed (a statistic, orders nothing).
    samples: AtomicU64,
    /// Nanoseconds spent decoding them; Relaxed (a statistic, orders nothing).
    nanos: AtomicU64,
}

/// Each source's decoded samples and the time their decodes took, counted by the decode
/// workers: a decoder of several sources ([`MixedDecoder`](crate::source::MixedDecoder))
/// keeps one, hands it to the pipeline through
/// [`Decode::source_tally`](crate::Decode::source_tally), and
/// [`Pipeline::stats`](crate::Pipeline::stats) reads it into
/// [`Stats::sources`](crate::Stats::sources). Counting is two Relaxed additions a sample.
///
/// ```
/// use std::time::Duration;
/// let tally = pinring::SourceTally::new(2);
/// tally.record(1, Duration::from_micros(5));
/// tally.record(1, Duration::from_micros(7));
/// let counts = tally.snapshot();
/// assert_eq!((counts[0].samples, counts[1].samples), (0, 2));
/// assert_eq!(counts[1].decode, Duration::from_micros(12));
/// ```
#[derive(Debug)]
pub struct SourceTally {
    counters: Box<[Counter]>,
}

/// One source's part of [`Stats`](crate::Stats): samples decoded and the time their decodes
/// took (summed over the decode workers).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SourceStats {
    /// Samples of this source decoded (popped ones, and the few batches in flight).
    pub samples: u64,
    /// Time the decode workers spent decoding them.
    pub decode: Duration,
}

impl SourceStats {
    /// Decode time per sample (zero before any sample).
    pub fn per_sample(&self) -> Duration {
        if self.samples == 0 {
            Duration::ZERO
        } else {
            self.decode / u32::try_from(self.samples).unwrap_or(u32::MAX)
        }
    }
}

impl SourceTally {
    /// Counters for `sources` sources, all zero.
    pub fn new(sources: usize) -> Self {
        SourceTally {
            counters: (0..sources).map(|_| Counter::default()).collect(),
        }
    }

    /// How many sources it counts.
    pub fn sources(&self) -> usize {
        self.counters.len()
    }

    /// Counts one sample of `source` that took `decode` to decode (a source past the
    /// counters is not counted).
    #[inline]
    pub fn record(&self, source: usize, decode: Duration) {
        if let Some(c) = self.counters.get(source) {
            c.samples.fetch_add(1, Ordering::Relaxed);
            let nanos = u64::try_from(decode.as_nanos()).unwrap_or(u64::MAX);
            c.nanos.fetch_add(nanos, Ordering::Relaxed);
        }
    }

    /// Each source's counts so far.
    pub fn snapshot(&self) -> Vec<SourceStats> {
        self.counters
            .iter()
            .map(|c| SourceStats {
                samples: c.samples.load(Ordering::Relaxed),
                decode: Duration::from_nanos(c.nanos.load(Ordering::Relaxed)),
            })
            .collect()
    }
}
