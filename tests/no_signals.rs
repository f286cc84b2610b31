//! pinring installs no signal handler (issue 28): a library embedded in PyTorch processes,
//! beside JVMs, `faulthandler` and other libraries' handlers, must not own the process's
//! signal dispositions. Files are read by position, so no read faults and nothing needs
//! catching.
//!
//! Checked on the source, so that no read path can bring a handler back unnoticed: the
//! library's `src/` names no signal call or signal, declares no foreign function (the only
//! way to reach `sigaction` without a crate for it), calls nothing of libc's but the
//! scheduling policy of its own threads (src/thread_policy.rs), and its manifest depends on
//! no crate that installs or wraps signal handlers. (The Python package's tests run the behaviour in
//! child interpreters: `faulthandler`, `kill -BUS`, a truncated shard.)

use std::path::{Path, PathBuf};

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a Rust file without its comments (line comments and doc comments; the crate
/// uses no block comments), so that docs may say what the library does not do.
fn code(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The library's `.rs` files (under `src/`), each as its path from the crate's root and
/// its [`code`].
fn library_code() -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    files
        .iter()
        .map(|file| {
            let name = file.strip_prefix(root).unwrap().display().to_string();
            (name, code(&std::fs::read_to_string(file).unwrap()))
        })
        .collect()
}

#[test]
fn the_library_names_no_signal_call_and_declares_no_foreign_function() {
    let files = library_code();
    assert!(files.len() > 50, "the crate's sources: {}", files.len());
    // Signal calls and signals by name (a symbol looked up at run time too), foreign
    // blocks (`extern "C" {`: function pointer types such as the CUDA driver's are fine),
    // and the crates that reach them.
    let banned = [
        "sigaction",
        "signal(",
        "sigemptyset",
        "sigaltstack",
        "SIGBUS",
        "SIGSEGV",
        "SA_SIGINFO",
        "extern \"C\" {",
        "extern \"system\" {",
        "extern {",
        "#[link",
        "signal_hook",
        " nix::",
    ];
    let mut found = Vec::new();
    for (file, code) in &files {
        let squeezed = code.split_whitespace().collect::<Vec<_>>().join(" ");
        for word in banned {
            if squeezed.contains(word) || code.contains(word) {
                found.push(format!("{file}: {word}"));
            }
        }
    }
    assert!(found.is_empty(), "signal handling in src/: {found:#?}");
}

#[test]
fn the_library_calls_nothing_of_libc_but_its_threads_scheduling_policy() {
    let files = library_code();
    // The pipeline threads' own policy (src/thread_policy.rs): SCHED_BATCH, and the copy
    // thread's timer slack.
    let allowed = [
        "sched_setscheduler",
        "sched_param",
        "SCHED_BATCH",
        "prctl",
        "PR_SET_TIMERSLACK",
        "c_ulong",
    ];
    let mut named = Vec::new();
    for (file, code) in &files {
        for (at, _) in code.match_indices("libc::") {
            let name: String = code[at + "libc::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            named.push((file.clone(), name));
        }
    }
    let others: Vec<_> = named
        .iter()
        .filter(|(_, name)| !allowed.contains(&name.as_str()))
        .collect();
    assert!(
        others.is_empty(),
        "libc calls in src/ beyond {allowed:?}: {others:#?}"
    );
    assert!(
        named.iter().any(|(_, name)| name == "sched_setscheduler"),
        "read the sources: {named:?}"
    );
}

#[test]
fn the_library_depends_on_no_crate_that_handles_signals() {
    let manifest =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml")).unwrap();
    // The library's own dependencies: every [dependencies] table (target ones too), up to
    // the dev-dependencies.
    let mut deps = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_deps = line.ends_with("dependencies]") && !line.contains("dev-dependencies");
            continue;
        }
        if in_deps && let Some((name, _)) = line.split_once('=') {
            deps.push(name.trim().to_owned());
        }
    }
    assert!(
        deps.iter().any(|d| d == "rayon"),
        "read the dependencies: {deps:?}"
    );
    // libc is the threads' scheduling policy alone (checked on the source above).
    for banned in ["nix", "signal-hook", "rustix", "ctrlc"] {
        assert!(
            !deps.iter().any(|d| d == banned),
            "pinring depends on {banned}: {deps:?}"
        );
    }
}
