//! [`RankGuard`]: every `every` steps, each rank's small [`RankRecord`] (where its run
//! ends within a look ahead, its data wait and source time since the last check, its step)
//! reduced across the ranks through the caller's collective, and a rank that would run out
//! before the others, or whose wait is far above the rest, named in a [`RankError`] (or a
//! report, as configured) on every rank — before the collective that would hang.
//!
//! The collective is the caller's (pinring depends on no torch nor NCCL): a closure that
//! replaces each lane of a small `i64` array with its maximum over the ranks, in place —
//! one all-reduce MAX (`torch.distributed.all_reduce(t, op=ReduceOp.MAX)`). The lanes
//! that want a minimum are carried negated, and the lanes that must say *which* rank hold
//! `value · world_size + rank`, so that one reduction gives every rank the same minima,
//! maxima and the ranks they belong to, and every rank decides the same.

use std::fmt;
use std::time::{Duration, Instant};

use crate::backend::contract::Backend;
use crate::error::rank::RankError;
use crate::error::{ConfigError, Error, Result};
use crate::loader::Loader;
use crate::source::Source;

/// The lanes a check reduces: [`RankGuard::lanes`] writes them, the caller's collective
/// replaces each with its maximum over the ranks.
pub const RANK_LANES: usize = 9;

/// Lane indexes (each reduced by MAX; `neg` lanes carry a minimum negated, `who` lanes
/// `value · world_size + rank`).
mod lane {
    /// The lanes' layout version and the world size (`version << 32 | world_size`), so
    /// that ranks of two pinring versions, or of two world sizes, are told apart.
    pub const VERSION: usize = 0;
    /// −(end · W + rank): the earliest end and its rank.
    pub const END_MIN: usize = 1;
    /// end: the latest end.
    pub const END_MAX: usize = 2;
    /// −(step · W + rank): the lowest step and its rank.
    pub const STEP_MIN: usize = 3;
    /// step: the highest step.
    pub const STEP_MAX: usize = 4;
    /// wait µs · W + rank: the longest data wait and its rank.
    pub const WAIT_MAX: usize = 5;
    /// −wait µs: the shortest data wait.
    pub const WAIT_MIN: usize = 6;
    /// source µs · W + rank: the longest source time and its rank.
    pub const SOURCE_MAX: usize = 7;
    /// −(layout version and world size): the lowest.
    pub const VERSION_MIN: usize = 8;
}

/// The layout of the lanes (up by one when it changes).
const LANES_VERSION: i64 = 1;

/// What one rank reports at a check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankRecord {
    /// The rank (in the collective's group).
    pub rank: u64,
    /// The loader's next step.
    pub step: u64,
    /// The step at which its run ends, capped at `step + horizon` (a run that goes on
    /// past the look ahead reports that step): [`Loader::ends_within`].
    pub end: u64,
    /// Time the trainer waited in `pop` for data since the last check
    /// ([`Stats::consumer_stall_time`](crate::Stats::consumer_stall_time)).
    pub data_wait: Duration,
    /// Time the feeder spent pulling samples from the source since the last check (reads,
    /// index walks: [`Stats::source`](crate::Stats::source)'s `busy`).
    pub source_time: Duration,
}

/// What a check found, the same on every rank: the reduced record, and the problem if
/// there was one (with [`RankGuard::warn_only`], the problem is here instead of an error).
#[derive(Debug, Clone, PartialEq)]
pub struct RankReport {
    /// The step the ranks checked at (the lowest one's).
    pub step: u64,
    /// The earliest end (capped at the look ahead) and the rank it is of.
    pub first_end: (u64, u64),
    /// The latest end (capped at the look ahead).
    pub last_end: u64,
    /// The longest data wait since the last check, and its rank.
    pub most_wait: (Duration, u64),
    /// The shortest data wait since the last check.
    pub least_wait: Duration,
    /// The longest source time since the last check, and its rank.
    pub most_source_time: (Duration, u64),
    /// The problem found, when the guard only reports ([`RankGuard::warn_only`]).
    pub problem: Option<RankError>,
}

/// Checks every `every` steps that no rank will run out before the others or wait far
/// longer for its data, through the caller's collective.
///
/// Call [`step`](Self::step) once a step, after the pop, on every rank (the same number of
/// times: it is a collective every `every` pops). A rank whose run ends within the look
/// ahead (`2 · every` steps) before the others' is named in [`RankError::RunsOut`] on
/// every rank at once, before any of them enters the training collective that would wait
/// for it forever. A rank whose data wait since the last check is above
/// `wait_ratio ×` the least-waiting rank's and above `wait_floor` is named in
/// [`RankError::SlowData`].
///
/// ```
/// use pinring::source::{write_shard, TokenShards};
/// use pinring::{Fence, Loader, RankGuard};
///
/// # let dir = std::env::temp_dir().join(format!("pinring-guard-doc-{}", std::process::id()));
/// # std::fs::create_dir_all(&dir).unwrap();
/// write_shard(dir.join("train_000.bin"), &(0..8193u16).collect::<Vec<_>>())?;
/// let source = TokenShards::glob(dir.join("train_*.bin"))?.windows(129).build()?;
/// let mut loader = Loader::builder(source).batch_size(8).epochs(1).build()?;
/// // One rank of one: its collective is the identity (torch: all_reduce with ReduceOp.MAX).
/// let mut guard = RankGuard::new(0, 1, 4)?;
/// while let Some(batch) = loader.pop()? {
///     batch.release(Fence::Sync).expect("a Sync fence always captures");
///     guard.step(&loader, |_lanes: &mut [i64]| Ok::<(), String>(()))?;
/// }
/// assert_eq!(guard.checks(), 2); // after 4 and 8 pops
/// # std::fs::remove_dir_all(&dir).unwrap();
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct RankGuard {
    rank: u64,
    world_size: u64,
    every: u64,
    wait_ratio: f64,
    wait_floor: Duration,
    warn_only: bool,
    /// The pop count of the last check (`None`: none yet).
    checked_at: Option<u64>,
    /// The loader's step at the last check.
    last_step: u64,
    /// The pipeline's cumulative data wait and source time at the last check.
    last_times: (Duration, Duration),
    checks: u64,
    check_time: Duration,
}

/// What the reduced lanes say, before the verdict.
struct Reduced {
    report: RankReport,
    step_min: (u64, u64),
    step_max: u64,
    versions: (i64, i64),
}

impl RankGuard {
    /// A guard for rank `rank` of the `world_size` ranks of the collective's group,
    /// checking every `every` pops. `every` of 0, or a rank not below the world size, is a
    /// [`ConfigError::Run`].
    pub fn new(rank: u64, world_size: u64, every: u64) -> Result<Self> {
        let bad = |field, why: String| Error::from(ConfigError::Run { field, why });
        if every == 0 {
            return Err(bad(
                "every",
                "every 0: the guard checks every `every` pops, at least 1".into(),
            ));
        }
        if world_size == 0 || rank >= world_size {
            return Err(bad(
                "rank",
                format!("rank {rank} is not below world_size {world_size}"),
            ));
        }
        if world_size > 1 << 20 {
            return Err(bad(
                "world_size",
                format!("world_size {world_size}: the guard names ranks below 2^20"),
            ));
        }
        Ok(RankGuard {
            rank,
            world_size,
            every,
            wait_ratio: 4.0,
            wait_floor: Duration::from_secs(1),
            warn_only: false,
            checked_at: None,
            last_step: 0,
            last_times: (Duration::ZERO, Duration::ZERO),
            checks: 0,
            check_time: Duration::ZERO,
        })
    }

    /// A rank is slow when its data wait since the last check is above `ratio ×` the
    /// least-waiting rank's (default 4).
    pub fn wait_ratio(mut self, ratio: f64) -> Self {
        self.wait_ratio = ratio;
        self
    }

    /// ... and above `floor` (default 1 s): waits below it are no problem.
    pub fn wait_floor(mut self, floor: Duration) -> Self {
        self.wait_floor = floor;
        self
    }

    /// Report a problem in the check's [`RankReport::problem`] instead of an error
    /// (default: an error). A rank that runs out then still leaves the loop early: the
    /// caller decides what to do.
    pub fn warn_only(mut self, on: bool) -> Self {
        self.warn_only = on;
        self
    }

    /// The steps between checks.
    pub fn every(&self) -> u64 {
        self.every
    }

    /// How far ahead a check looks for a run's end: `2 · every` steps.
    pub fn horizon(&self) -> u64 {
        self.every.saturating_mul(2)
    }

    /// Checks made so far.
    pub fn checks(&self) -> u64 {
        self.checks
    }

    /// Time spent in checks so far, the collective included ([`checks`](Self::checks)
    /// divides it into the cost of one).
    pub fn check_time(&self) -> Duration {
        self.check_time
    }

    /// Whether a check is due after `popped` pops: a multiple of `every` not checked yet.
    pub fn due(&self, popped: u64) -> bool {
        popped.is_multiple_of(self.every) && self.checked_at != Some(popped)
    }

    /// Once a step, after the pop: a [`check`](Self::check) when the loader's pops are a
    /// multiple of `every` (and not checked at that count yet), else nothing (`Ok(None)`).
    pub fn step<S: Source, B: Backend, E: fmt::Display>(
        &mut self,
        loader: &Loader<S, B>,
        reduce: impl FnOnce(&mut [i64]) -> std::result::Result<(), E>,
    ) -> Result<Option<RankReport>> {
        if !self.due(loader.popped()) {
            return Ok(None);
        }
        self.check(loader, reduce).map(Some)
    }

    /// Checks now: this rank's record, reduced through `reduce` (which every rank calls
    /// at once), and the verdict, the same on every rank.
    pub fn check<S: Source, B: Backend, E: fmt::Display>(
        &mut self,
        loader: &Loader<S, B>,
        reduce: impl FnOnce(&mut [i64]) -> std::result::Result<(), E>,
    ) -> Result<RankReport> {
        let began = Instant::now();
        let record = self.record(loader)?;
        self.conclude(&record, loader.popped(), began, reduce)
    }

    /// The rest of a check from this rank's `record` (made by [`record`](Self::record)
    /// after `popped` pops, at `began`): the lanes reduced through `reduce`, the verdict,
    /// the check counted. For a caller that lets go of the loader while the collective runs
    /// (a binding whose loader is behind a lock).
    pub fn conclude<E: fmt::Display>(
        &mut self,
        record: &RankRecord,
        popped: u64,
        began: Instant,
        reduce: impl FnOnce(&mut [i64]) -> std::result::Result<(), E>,
    ) -> Result<RankReport> {
        let mut lanes = self.lanes(record);
        reduce(&mut lanes).map_err(|e| Error::Rank(RankError::Collective(e.to_string())))?;
        let verdict = self.decide(&lanes, record.step);
        self.last_step = record.step;
        self.checks += 1;
        self.check_time += began.elapsed();
        self.checked_at = Some(popped);
        verdict.map_err(Error::Rank)
    }

    /// This rank's record now, and the guard's marks moved on to it.
    pub fn record<S: Source, B: Backend>(&mut self, loader: &Loader<S, B>) -> Result<RankRecord> {
        let step = loader.next_step();
        let horizon = self.horizon();
        let end = loader
            .ends_within(horizon)?
            .unwrap_or_else(|| step.saturating_add(horizon));
        let stats = loader.stats();
        let now = (stats.consumer_stall_time, stats.source.busy);
        // A restarted pipeline (reshard, resume) counts from zero again.
        let since = |now: Duration, last: Duration| now.checked_sub(last).unwrap_or(now);
        let record = RankRecord {
            rank: self.rank,
            step,
            end,
            data_wait: since(now.0, self.last_times.0),
            source_time: since(now.1, self.last_times.1),
        };
        self.last_times = now;
        Ok(record)
    }

    /// The layout lane: the lanes' version and the world size the ranks are counted in.
    fn layout(&self) -> i64 {
        (LANES_VERSION << 32) | self.world_size as i64
    }

    /// `record` as the lanes the collective reduces.
    pub fn lanes(&self, record: &RankRecord) -> [i64; RANK_LANES] {
        let w = self.world_size;
        let who = |value: u64| -> i64 {
            let cap = (i64::MAX as u64 / 2) / w;
            (value.min(cap) * w + record.rank) as i64
        };
        let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let mut lanes = [0i64; RANK_LANES];
        lanes[lane::VERSION] = self.layout();
        lanes[lane::VERSION_MIN] = -self.layout();
        lanes[lane::END_MIN] = -who(record.end);
        lanes[lane::END_MAX] = who(record.end) / w as i64;
        lanes[lane::STEP_MIN] = -who(record.step);
        lanes[lane::STEP_MAX] = who(record.step) / w as i64;
        lanes[lane::WAIT_MAX] = who(micros(record.data_wait));
        lanes[lane::WAIT_MIN] = -(who(micros(record.data_wait)) / w as i64);
        lanes[lane::SOURCE_MAX] = who(micros(record.source_time));
        lanes
    }

    /// The reduced lanes read back; a lane no maximum of guards' lanes could hold is
    /// [`RankError::BadReduction`].
    fn read(&self, lanes: &[i64]) -> std::result::Result<Reduced, RankError> {
        let w = self.world_size as i64;
        let bad = |what: &str| RankError::BadReduction(format!("{what}: {lanes:?}"));
        if lanes.len() != RANK_LANES {
            return Err(bad("not RANK_LANES lanes"));
        }
        let split = |v: i64, what: &str| -> std::result::Result<(u64, u64), RankError> {
            if v < 0 {
                return Err(bad(what));
            }
            Ok(((v / w) as u64, (v % w) as u64))
        };
        let us = |v: u64| Duration::from_micros(v);
        let end_min = split(-lanes[lane::END_MIN], "the earliest end")?;
        let step_min = split(-lanes[lane::STEP_MIN], "the lowest step")?;
        let wait_max = split(lanes[lane::WAIT_MAX], "the longest wait")?;
        let source_max = split(lanes[lane::SOURCE_MAX], "the longest source time")?;
        let [end_max, step_max, wait_min] = [
            lanes[lane::END_MAX],
            lanes[lane::STEP_MAX],
            -lanes[lane::WAIT_MIN],
        ]
        .map(|v| v.max(0) as u64);
        if end_max < end_min.0 || step_max < step_min.0 || wait_min > wait_max.0 {
            return Err(bad(
                "a minimum above its maximum (the collective did not reduce by MAX)",
            ));
        }
        Ok(Reduced {
            report: RankReport {
                step: step_min.0,
                first_end: (end_min.0, end_min.1),
                last_end: end_max,
                most_wait: (us(wait_max.0), wait_max.1),
                least_wait: us(wait_min),
                most_source_time: (us(source_max.0), source_max.1),
                problem: None,
            },
            step_min,
            step_max,
            versions: (-lanes[lane::VERSION_MIN], lanes[lane::VERSION]),
        })
    }

    /// The verdict on the reduced `lanes` (the same on every rank): the report, or the
    /// error naming a rank (in the report instead, with [`warn_only`](Self::warn_only)).
    /// `step` is this rank's.
    pub fn decide(&self, lanes: &[i64], step: u64) -> std::result::Result<RankReport, RankError> {
        let r = self.read(lanes)?;
        let mut report = r.report;
        // Never only a warning: the other lanes cannot be read.
        if r.versions.0 != r.versions.1 {
            return Err(RankError::Versions {
                lowest: r.versions.0,
                highest: r.versions.1,
            });
        }
        if r.versions.0 != self.layout() {
            return Err(RankError::BadReduction(format!(
                "the layout lane reads {}, which no guard writes: {lanes:?}",
                r.versions.0
            )));
        }
        let problem = if r.step_min.0 != r.step_max {
            Some(RankError::Steps {
                rank: r.step_min.1,
                step: r.step_min.0,
                others: r.step_max,
            })
        } else if report.first_end.0 < report.last_end {
            Some(RankError::RunsOut {
                rank: report.first_end.1,
                ends_at: report.first_end.0,
                others_reach: report.last_end,
                step,
            })
        } else {
            let (waited, rank) = report.most_wait;
            let least = report.least_wait;
            let far = waited.as_secs_f64() > self.wait_ratio * least.as_secs_f64();
            (far && waited > self.wait_floor).then(|| {
                let (most_source, of) = report.most_source_time;
                RankError::SlowData {
                    rank,
                    waited,
                    least,
                    source_time: (of == rank).then_some(most_source),
                    most_source_time: most_source,
                    steps: step.saturating_sub(self.last_step),
                    step,
                }
            })
        };
        match problem {
            Some(p) if !self.warn_only => Err(p),
            p => {
                report.problem = p;
                Ok(report)
            }
        }
    }
}
