//! What the benchmark prints: `ROW` lines (the table), `STATS` lines (each stage's busy
//! and waiting time behind a result) and `CTXSW` lines (context switches by thread).

use std::time::Duration;

use pinring::{StageTimes, Stats};

pub const GB: f64 = 1e9;

pub const GIB: f64 = (1u64 << 30) as f64;

pub fn row(what: &str, pinring: &str, reference: &str, target: &str, met: Option<bool>) {
    let met = match met {
        Some(true) => "yes",
        Some(false) => "NO",
        None => "-",
    };
    println!("ROW\t{what}\t{pinring}\t{reference}\t{target}\t{met}");
}

/// Stage times between two snapshots, as fractions of `wall`, on one `STATS` line;
/// returns the stage that was busiest, with what the copy thread and the consumer cost per
/// batch (the consumer's: its time outside `pop`'s waits, all of it host work: pop, its
/// driver calls, release), which says which side limits a rate.
pub fn stats_line(name: &str, before: &Stats, after: &Stats, wall: Duration) -> String {
    let frac = |a: StageTimes, b: StageTimes| {
        (
            (b.busy.saturating_sub(a.busy)).as_secs_f64() / wall.as_secs_f64(),
            (b.waited.saturating_sub(a.waited)).as_secs_f64() / wall.as_secs_f64(),
        )
    };
    let stages = [
        ("source", frac(before.source, after.source)),
        ("decode", frac(before.decode, after.decode)),
        ("copy", frac(before.copy, after.copy)),
    ];
    let stall = (after
        .consumer_stall_time
        .saturating_sub(before.consumer_stall_time))
    .as_secs_f64()
        / wall.as_secs_f64();
    let mut line = format!("STATS\t{name}");
    for (stage, (busy, waited)) in stages {
        line.push_str(&format!(
            "\t{stage} busy {:.0}% waited {:.0}%",
            busy * 100.0,
            waited * 100.0
        ));
    }
    let batches = after.batches - before.batches;
    let copies = (after.copies - before.copies).max(1);
    line.push_str(&format!(
        "\tcopy runs of {:.1} batches",
        batches as f64 / copies as f64
    ));
    line.push_str(&format!(
        "\tconsumer stalled {:.0}% ({} of {} pops)",
        stall * 100.0,
        after.consumer_stalls - before.consumer_stalls,
        after.batches - before.batches
    ));
    let per_batch = |busy: f64| busy * wall.as_secs_f64() * 1e6 / batches.max(1) as f64;
    let (copy_busy, consumer) = (stages[2].1 .0, (1.0 - stall).max(0.0));
    let costs = format!(
        "copy thread {:.2} us/batch, consumer {:.2} us/batch",
        per_batch(copy_busy),
        per_batch(consumer)
    );
    line.push_str(&format!("\t{costs}"));
    line.push_str(&format!("\t{}", after.since(before).bottleneck().1));
    println!("{line}");
    let (busiest, (busy, _)) = stages
        .into_iter()
        .max_by(|a, b| a.1 .0.total_cmp(&b.1 .0))
        .expect("three stages");
    format!("{busiest} busy {:.0}%; {costs}", busy * 100.0)
}

/// Context switches so far of this process's threads, summed by name (`CTXSW` line):
/// involuntary ones mean a thread was preempted (more runnable threads than cores).
pub fn context_switches(name: &str) {
    let mut by: std::collections::BTreeMap<String, (u64, u64, u32)> = Default::default();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return;
    };
    for task in tasks.flatten() {
        let path = task.path();
        let comm = std::fs::read_to_string(path.join("comm")).unwrap_or_default();
        let status = std::fs::read_to_string(path.join("status")).unwrap_or_default();
        let field = |key: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(key))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or(0)
        };
        let group = comm
            .trim()
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .to_string();
        let e = by.entry(group).or_default();
        e.0 += field("voluntary_ctxt_switches:");
        e.1 += field("nonvoluntary_ctxt_switches:");
        e.2 += 1;
    }
    let cells: Vec<String> = by
        .iter()
        .map(|(g, (v, n, t))| format!("{g} x{t}: {v} vol {n} invol"))
        .collect();
    println!("CTXSW\t{name}\t{}", cells.join("\t"));
}
