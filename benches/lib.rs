//! Helpers shared by pinring's benchmarks (`handoff`, `pipeline`, `gpu`).

use std::time::Duration;

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
