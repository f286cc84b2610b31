//! Runs one test of the running test binary in a process of its own: for a test that may
//! abort, deadlock, break a CUDA context or need a process setting. Shared by the GPU suite
//! (`tests/gpu/main.rs`) and the loom models (`loom-tests/tests/models.rs`), each of which
//! includes this file with `#[path]`.
//!
//! The test harness has no such mode and rusty-fork does not fit here: the GPU suite runs
//! a child under a shell limit (`ulimit -l`), which rusty-fork's `Command` hook cannot do
//! without an unsafe `setrlimit`, and both callers read the child's whole output.

use std::process::Command;

/// Runs the test named `test` (exactly; ignored tests included) of this test binary in a
/// process of its own, started through `sh` after `shell` (a prefix such as
/// `ulimit -l 64;`, or empty), with `env` added to its environment. Echoes each line of
/// its output that holds `tag`, from the tag on; returns whether the test passed and its
/// whole output (stdout, then stderr).
pub fn run_in_own_process(
    test: &str,
    shell: &str,
    env: &[(&str, &str)],
    tag: &str,
) -> (bool, String) {
    let exe = std::env::current_exe().expect("the test binary");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("{shell} exec \"$0\" \"$@\""))
        .arg(exe)
        .args([
            "--exact",
            test,
            "--include-ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(env.iter().copied())
        .output()
        .expect("run the test's process");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for line in text.lines().filter_map(|l| l.find(tag).map(|i| &l[i..])) {
        println!("\n{line}");
    }
    (out.status.success(), text)
}
