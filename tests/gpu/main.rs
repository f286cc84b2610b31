//! The cuda backend's GPU suite: every check needs an NVIDIA GPU, so each is `#[ignore]`d
//! here and run on a GPU machine by `scripts/gpu-check.sh` (`--include-ignored
//! --test-threads=1`), which prints one table of the `RESULT` lines the checks print.
//!
//! - `fences.rs`: every release form keeps a slot until a kernel has read it (checked on
//!   the device), and an unfenced release is shown to corrupt;
//! - `seeds.rs`: the two damacy patterns (deferred release; dedicated copy stream);
//! - `soundness.rs`: the soundness issue's CUDA items (the view's stream, the context's
//!   settings, streams that cannot be fenced, a bounded teardown);
//! - `lifecycle.rs`: drops, devices, contexts, a CUDA fault reaching the consumer;
//! - `reliability.rs`: the reliability issue's CUDA items (every bound stream fenced, the
//!   poison mode and its cost, no completion thread left by a failed open);
//! - `ready.rs`: issue 23's Rust items (`synchronize` parks on the copy count; copies per
//!   piece and batched; the consumer stream declared once and `Fence::Bound`);
//! - `graphs.rs`: issue 23's CUDA graphs, one per device slot over its fixed address,
//!   replayed for every batch of the slot (no static buffer), checked on the device.
//!
//! Checks that break the context (a fault) or need a process setting (a locked-memory
//! limit, a kernel that outlives the pipeline) run in a process of their own.
#![cfg(feature = "cuda")]

/// A GPU check as a test: `name => check` (a `Res<String>`) is the test `name`, ignored
/// without a GPU, that prints `check`'s `RESULT` line under its own name ([`report`]).
macro_rules! gpu_test {
    ($test:ident => $check:expr) => {
        #[test]
        #[ignore = "needs a CUDA GPU (scripts/gpu-check.sh)"]
        fn $test() {
            $crate::report(stringify!($test), $check);
        }
    };
}

mod harness;
#[path = "../common/own_process.rs"]
mod own_process;

mod fences;
mod graphs;
mod lifecycle;
mod ready;
mod reliability;
mod seeds;
mod soundness;

use harness::Res;

/// Prints the check's `RESULT` line (its detail on success) or fails with its error.
pub fn report(name: &str, result: Res<String>) {
    match result {
        Ok(detail) => println!(
            "\nRESULT\t{name}\tPASS\t{}",
            detail.replace(['\t', '\n'], " ")
        ),
        Err(e) => panic!("{name}: {e}"),
    }
}

/// An informational line (no pass/fail).
pub fn info(name: &str, detail: &str) {
    println!(
        "\nRESULT\t{name}\tINFO\t{}",
        detail.replace(['\t', '\n'], " ")
    );
}

/// Runs the ignored test `child` of this binary in a process of its own, under `shell`
/// (a prefix such as `ulimit -l 64;`), and fails with its output unless it passed.
pub fn passes_in_own_process(child: &str, shell: &str) {
    let (ok, text) = own_process::run_in_own_process(child, shell, &[], "RESULT\t");
    assert!(ok, "{child} failed in its own process:\n{text}");
}
