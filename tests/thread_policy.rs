//! The pipeline's own threads run as Linux's `SCHED_BATCH` unless
//! `ConfigBuilder::batch_scheduling(false)` (src/thread_policy.rs). A test binary of its
//! own with one test: it reads the policy of every thread of the process.

mod common;

use std::collections::HashSet;

use common::{counting_windows, decoder, BOUND};
use pinring::{Config, Fence, Loader, Pipeline};

/// `SCHED_OTHER` and `SCHED_BATCH` (linux/sched.h).
const SCHED_OTHER: u32 = 0;
const SCHED_BATCH: u32 = 3;

/// Every thread of this process: its id, name and scheduling policy (`/proc`).
fn threads() -> Vec<(u64, String, u32)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc/self/task").expect("/proc/self/task") {
        let dir = entry.expect("a task").path();
        let (Ok(stat), Ok(comm)) = (
            std::fs::read_to_string(dir.join("stat")),
            std::fs::read_to_string(dir.join("comm")),
        ) else {
            continue; // the thread ended meanwhile
        };
        // Fields after the name (in parentheses): the 3rd is the state, the 41st the policy.
        let rest = &stat[stat.rfind(')').expect("stat's name") + 1..];
        let policy = rest.split_whitespace().nth(41 - 3).expect("stat's policy");
        let tid = dir.file_name().unwrap().to_string_lossy().parse().unwrap();
        out.push((tid, comm.trim().to_owned(), policy.parse().unwrap()));
    }
    out
}

/// The `pinring-` threads started since `before`, once every stage named in `stages`
/// is among them and each runs with `want` (a thread names itself, then sets its policy,
/// from inside: neither is done when its spawn returns). Polls against `BOUND`; past it,
/// what it saw, for the assertions to name.
fn settled(before: &HashSet<u64>, stages: &[&str], want: u32) -> Vec<(u64, String, u32)> {
    let deadline = std::time::Instant::now() + BOUND;
    loop {
        let ours: Vec<_> = threads()
            .into_iter()
            .filter(|(tid, name, _)| !before.contains(tid) && name.starts_with("pinring-"))
            .collect();
        let all_there = stages
            .iter()
            .all(|stage| ours.iter().any(|(_, name, _)| name.starts_with(stage)));
        let all_set = ours.iter().all(|(_, _, policy)| *policy == want);
        if (all_there && all_set) || std::time::Instant::now() > deadline {
            return ours;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

#[test]
fn pipeline_threads_run_as_sched_batch_unless_turned_off() {
    for on in [false, true] {
        let before: HashSet<u64> = threads().into_iter().map(|t| t.0).collect();
        let config = Config::builder()
            .batch_size(4)
            .bytes_per_sample(96)
            .decode_threads(2)
            .pop_timeout(BOUND)
            .batch_scheduling(on)
            .build()
            .unwrap();
        assert_eq!(config.batch_scheduling(), on);
        let mut p = Pipeline::new(config, decoder(), 0..4000u64).unwrap();
        // A batch through: every stage has been spawned.
        p.pop().unwrap().unwrap().release(Fence::Sync).unwrap();
        let want = if on { SCHED_BATCH } else { SCHED_OTHER };
        let stages = [
            "pinring-copy",
            "pinring-feeder",
            "pinring-decode-",
            "pinring-cpucopy",
        ];
        let ours = settled(&before, &stages, want);
        for stage in stages {
            assert!(
                ours.iter().any(|(_, name, _)| name.starts_with(stage)),
                "no {stage} thread among {ours:?}"
            );
        }
        for (_, name, policy) in &ours {
            assert_eq!(*policy, want, "{name} (batch_scheduling({on}))");
        }
        drop(p);
    }
    // The same through `Loader`, which forwards the setting to its pipeline.
    let dir = tempfile::TempDir::new().unwrap();
    let path = dir.path().join("train_000.bin");
    let src = counting_windows(&path, 20_000, 64);
    for on in [false, true] {
        let before: HashSet<u64> = threads().into_iter().map(|t| t.0).collect();
        let mut loader = Loader::builder(src.clone())
            .batch_size(4)
            .decode_threads(2)
            .batch_scheduling(on)
            .build()
            .unwrap();
        loader.pop().unwrap().unwrap().release(Fence::Sync).unwrap();
        let want = if on { SCHED_BATCH } else { SCHED_OTHER };
        let ours = settled(&before, &["pinring-copy"], want);
        assert!(
            ours.iter().any(|(_, name, _)| name == "pinring-copy"),
            "{ours:?}"
        );
        for (_, name, policy) in &ours {
            assert_eq!(*policy, want, "{name} (Loader, batch_scheduling({on}))");
        }
    }
}
