//! Helpers shared by pinring's benchmarks: process CPU time, this machine's cores, medians
//! and percentiles, and the token shards they write ([`write_tokens`]; into the temp folder,
//! [`TempShard`]).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pinring::source::{ShardToken, ShardWriter};

/// The CPU time this process has used so far (user + system, all threads), from
/// `/proc/self/stat`; `None` where that cannot be read.
pub fn process_cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces) start past the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 12 and 13 of `rest`.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    let hz = ticks_per_second();
    Some(Duration::from_secs_f64(ticks as f64 / hz as f64))
}

/// Clock ticks per second (`_SC_CLK_TCK`): 100 on every Linux this runs on.
fn ticks_per_second() -> u64 {
    100
}

/// This machine's cores (1 where that cannot be told).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// This machine's cores but `spare` of them, 1 at least.
pub fn cores_but(spare: usize) -> usize {
    cores().saturating_sub(spare).max(1)
}

/// The median of `v` (sorted in place).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The `p` quantile of sorted `v`.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i]
}

/// Where a measurement of [`CpuShares`] starts: the process's CPU time, the decode
/// workers' busy time and the wall clock.
#[derive(Debug, Clone, Copy)]
pub struct CpuMark {
    cpu: Duration,
    decode_busy: Duration,
    at: Instant,
}

impl CpuMark {
    /// Now, with the pipeline's decode busy time so far (`Stats::decode.busy`); `None`
    /// where the process's CPU time cannot be read.
    pub fn now(decode_busy: Duration) -> Option<CpuMark> {
        Some(CpuMark {
            cpu: process_cpu_time()?,
            decode_busy,
            at: Instant::now(),
        })
    }

    /// The shares since this mark, given the decode busy time now.
    pub fn shares(&self, decode_busy: Duration) -> Option<CpuShares> {
        let cpu = process_cpu_time()?.saturating_sub(self.cpu);
        let decode = decode_busy.saturating_sub(self.decode_busy);
        let wall = self.at.elapsed();
        let of_wall = |d: Duration| d.as_secs_f64() / wall.as_secs_f64();
        Some(CpuShares {
            process: of_wall(cpu),
            decode: of_wall(decode),
            waiting: of_wall(cpu.saturating_sub(decode)),
            wall,
        })
    }
}

/// What a process's CPU went to over `wall` (beside a slow consumer, say), each as a
/// fraction of one core: all of it, the decode workers' busy time, and the rest (the
/// waiting).
#[derive(Debug, Clone, Copy)]
pub struct CpuShares {
    /// All the process's CPU time.
    pub process: f64,
    /// The decode workers' busy time.
    pub decode: f64,
    /// The process's CPU time less the decode workers' busy time: the cost of waiting.
    pub waiting: f64,
    /// The wall time measured over.
    pub wall: Duration,
}

/// Writes the shard `path` of `tokens` tokens of `T`, token `j` being `token(j)`, a chunk of
/// 64 Ki tokens at a time.
pub fn write_tokens<T: ShardToken>(path: &Path, tokens: u64, mut token: impl FnMut(u64) -> T) {
    let mut writer = ShardWriter::<T>::create_as(path).expect("create the shard");
    let mut chunk = Vec::with_capacity(1 << 16);
    let mut written = 0;
    while written < tokens {
        let n = (1 << 16).min(tokens - written);
        chunk.clear();
        chunk.extend((written..written + n).map(&mut token));
        writer.write(&chunk).expect("write the shard");
        written += n;
    }
    writer.finish().expect("finish the shard");
}

/// A token shard a benchmark writes into the temp folder, removed when dropped.
#[derive(Debug)]
pub struct TempShard(PathBuf);

impl TempShard {
    /// Writes `pinring-bench-{name}-{pid}.bin` in the temp folder: `tokens` tokens of `T`,
    /// each `next()` in turn.
    pub fn write<T: ShardToken>(name: &str, tokens: u64, mut next: impl FnMut() -> T) -> Self {
        let path =
            std::env::temp_dir().join(format!("pinring-bench-{name}-{}.bin", std::process::id()));
        write_tokens(&path, tokens, |_| next());
        TempShard(path)
    }

    /// The shard, read once, so that every row reads it from the page cache.
    pub fn cached(self) -> Self {
        black_box(std::fs::read(&self.0).expect("read the shard back"));
        self
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempShard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}
