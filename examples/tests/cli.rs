//! The example tools, run as a user runs them: the built binaries of `quickstart`,
//! `train_tokens`, `train_documents`, `make_shard`, `locate` and `train_loop`, with good and
//! bad command lines.
//!
//! The tools are binary targets of this package too (`bin/`, each its example file), so
//! `cargo test` (and `cargo test --test cli`, `--release --test cli`) builds them with this
//! test, in its profile and features, and names them in `CARGO_BIN_EXE_<name>`: no test
//! runs cargo. Each check is about exit status and messages, never about speed: a watchdog
//! only ends a run that would otherwise never end (a wrapped batch count).

use std::io::{ErrorKind, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use pinring::source::{
    write_shard, write_shard_u32, DocOrder, Documents, Mixture, Order, ShardFormat, TokenShard,
    TokenShards,
};

/// Longest a run may take before it is taken for one that never ends. Far above what any
/// run here needs on a slow machine; reached only when a check would fail anyway.
const WATCHDOG: Duration = Duration::from_secs(300);

/// The executable of tool `name`, as cargo built it for this test.
fn exe(name: &str) -> &'static Path {
    Path::new(match name {
        "quickstart" => env!("CARGO_BIN_EXE_quickstart"),
        "train_tokens" => env!("CARGO_BIN_EXE_train_tokens"),
        "train_documents" => env!("CARGO_BIN_EXE_train_documents"),
        "make_shard" => env!("CARGO_BIN_EXE_make_shard"),
        "locate" => env!("CARGO_BIN_EXE_locate"),
        "train_loop" => env!("CARGO_BIN_EXE_train_loop"),
        other => panic!("no tool named {other}"),
    })
}

/// What a run printed, and how it ended.
#[derive(Debug)]
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// A clean run whose output says each of `phrases`.
    fn assert_says(&self, phrases: &[&str]) {
        assert!(self.ok(), "{self:#?}");
        for phrase in phrases {
            assert!(
                self.stdout.contains(phrase),
                "expected `{phrase}`: {self:#?}"
            );
        }
    }

    /// A refusal: a clean non-zero exit (not a signal) with an `error:` message, and no
    /// panic.
    fn assert_refused(&self, what: &str) {
        assert!(
            matches!(self.code, Some(c) if c != 0),
            "{what}: expected a non-zero exit, got {self:#?}"
        );
        assert!(
            self.stderr.contains("error:"),
            "{what}: no error message: {self:#?}"
        );
        self.assert_no_panic(what);
    }

    /// The quickstart's fallback: the cpu backend's report on stdout; on stderr, the
    /// reason and how to choose a backend.
    fn assert_fell_back(&self, why: &str) {
        assert!(self.stdout.contains("on the cpu backend"), "{self:#?}");
        let line = format!("note: running on the cpu backend, because {why}\n");
        assert!(self.stderr.contains(&line), "expected `{line}`: {self:#?}");
        assert!(
            self.stderr.contains("--cpu") && self.stderr.contains("--cuda N"),
            "the note does not say how to choose: {self:#?}"
        );
        assert!(!self.stdout.contains("note:"), "{self:#?}");
    }

    fn assert_no_panic(&self, what: &str) {
        assert!(
            !self.stderr.contains("panicked") && !self.stdout.contains("panicked"),
            "{what}: panicked: {self:#?}"
        );
    }
}

/// Runs example `name` with `args` in `dir`, its output captured.
fn run_in(dir: &Path, name: &str, args: &[&str]) -> Run {
    let path = exe(name);
    let mut child = Command::new(path)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}", path.display()));
    // Read both pipes to their end on threads; the pipes close when the process ends.
    let (tx, rx) = mpsc::channel();
    let pipes: [Box<dyn Read + Send>; 2] = [
        Box::new(child.stdout.take().expect("piped")),
        Box::new(child.stderr.take().expect("piped")),
    ];
    for (i, mut pipe) in pipes.into_iter().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut text = Vec::new();
            let _ = pipe.read_to_end(&mut text);
            let _ = tx.send((i, String::from_utf8_lossy(&text).into_owned()));
        });
    }
    drop(tx);
    let mut texts = [String::new(), String::new()];
    for _ in 0..2 {
        match rx.recv_timeout(WATCHDOG) {
            Ok((i, text)) => texts[i] = text,
            Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{name} {args:?} did not end within {WATCHDOG:?}");
            }
        }
    }
    let status = child.wait().expect("waiting for the example");
    let [stdout, stderr] = texts;
    Run {
        code: status.code(),
        stdout,
        stderr,
    }
}

/// A fresh folder, removed when dropped, and the tools run in it. It lies in the folder
/// cargo gives integration tests for their files (`CARGO_TARGET_TMPDIR`, the target
/// folder's `tmp/`). (Not the `tempfile` crate's: as a dev-dependency of this package it
/// would be built by the README's first command, `cargo run --example quickstart`, seven
/// crates of it.)
#[derive(Debug)]
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR"));
        // The first name no other folder has: creating a folder fails if it exists, so two
        // tests (or two runs) never share one.
        let mut n = 0u32;
        loop {
            let path = root.join(format!("pinring-cli-{tag}-{}-{n}", std::process::id()));
            match std::fs::create_dir(&path) {
                Ok(()) => return TempDir(path),
                Err(e) if e.kind() == ErrorKind::AlreadyExists => n += 1,
                Err(e) => panic!("cannot create {}: {e}", path.display()),
            }
        }
    }

    fn path(&self) -> &Path {
        &self.0
    }

    fn run(&self, name: &str, args: &[&str]) -> Run {
        run_in(self.path(), name, args)
    }

    /// Runs `tool` with `args`, which it must refuse with a message saying `says`.
    fn assert_refuses(&self, tool: &str, args: &[&str], says: &str) -> Run {
        let run = self.run(tool, args);
        run.assert_refused(&format!("{tool} {args:?}"));
        assert!(
            run.stderr.contains(says),
            "{tool} {args:?}: expected `{says}`: {run:#?}"
        );
        run
    }

    /// Runs `tool` with `args`, which are refused as bad arguments: exit status 2, as for
    /// any argument clap refuses.
    fn assert_bad_arguments(&self, tool: &str, args: &[&str]) -> Run {
        let run = self.run(tool, args);
        run.assert_refused(&format!("{tool} {args:?}"));
        assert_eq!(run.code, Some(2), "{tool} {args:?}: {run:#?}");
        run
    }

    /// The names in the folder, sorted.
    fn entries(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        // Best effort, as for any temporary folder: a failure to clean up fails no check.
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The words of `line`, a command line without quotes, as a shell splits it.
fn words(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// A small valid shard `shard.bin` in `dir`: 5000 u16 tokens.
fn small_shard(dir: &TempDir) -> String {
    let tokens: Vec<u16> = (0..5000u32).map(|i| (i * 7 % 50257) as u16).collect();
    write_shard(dir.path().join("shard.bin"), &tokens).unwrap();
    "shard.bin".to_owned()
}

// ---------------------------------------------------------------------------------------
// --help

#[test]
fn help_lists_every_option_with_its_default_and_exits_0() {
    let dir = TempDir::new("help");
    /// Each option or argument with the default it must show, if any.
    type Options<'a> = &'a [(&'a str, Option<&'a str>)];
    let tools: [(&str, Options<'_>); 5] = [
        (
            "quickstart",
            &[
                ("--batches <N>", Some("[default: 2000]")),
                ("--cpu", None),
                ("--cuda <N>", None),
                ("--help", None),
            ],
        ),
        (
            "train_tokens",
            &[
                ("<PATH>...", None),
                ("--seq-len <T>", Some("[default: 1024]")),
                ("--batch-size <B>", Some("[default: 16]")),
                ("--dtype <DTYPE>", Some("[default: int32]")),
                ("--order <ORDER>", Some("[default: shuffled]")),
                ("--seed <S>", Some("[default: 0]")),
                ("--batches <N>", Some("[default: 1000]")),
                ("--threads <N>", Some("[default: one per core]")),
                ("--rank <R>", Some("[default: 0]")),
                ("--world-size <W>", Some("[default: 1]")),
                ("--cuda <ORDINAL>", Some("[default: the cpu backend]")),
            ],
        ),
        (
            "train_documents",
            &[
                ("[PATH]...", None),
                (
                    "--bos <ID>",
                    Some("[default: 50256 for u16 shards, 128000 for u32]"),
                ),
                ("--tokens-per-batch <N>", Some("[default: 49152]")),
                ("--max-seq-len <L>", Some("[default: 2048]")),
                ("--max-docs <D>", Some("[default: modded-nanogpt's rule")),
                ("--schedule <FROM:N:L,...>", None),
                ("--order <ORDER>", Some("[default: sequential]")),
                ("--seed <S>", Some("[default: 0]")),
                ("--dtype <DTYPE>", Some("[default: int32]")),
                ("--positions", None),
                ("--steps <K>", Some("[default: 1000]")),
                ("--threads <N>", Some("[default: one per core]")),
                ("--rank <R>", Some("[default: 0]")),
                ("--world-size <W>", Some("[default: 1]")),
                ("--cpu", Some("[the default]")),
                ("--cuda <N>", None),
                ("--trace <FILE>", None),
                ("--source <PATTERN>", None),
                ("--weight <W>", Some("[default: equal]")),
                ("--mix-seed <S>", Some("[default: 0]")),
                ("--stop <STOP>", Some("[default: never]")),
                ("--start-step <K>", Some("[default: 0]")),
            ],
        ),
        (
            "make_shard",
            &[
                ("<PATH>", None),
                ("<TOKENS>", None),
                ("[SEED]", Some("[default: 0]")),
                ("--u32", None),
                ("--vocab <V>", Some("[default: 50257, or 128256 with --u32")),
            ],
        ),
        (
            "locate",
            &[
                ("--step <STEP>", None),
                ("--rank <RANK>", Some("[default: 0]")),
                (
                    "--world-size <WORLD_SIZE>",
                    Some("[default: the state's, else 1]"),
                ),
                ("--batch-size <BATCH_SIZE>", None),
                ("--shards <PATTERN>", None),
                ("--state <FILE>", None),
                ("--seq-len <SEQ_LEN>", None),
                ("--order <ORDER>", Some("[default: sequential]")),
                ("--seed <SEED>", Some("[default: 0]")),
                ("--weights <WEIGHTS>", Some("[default: equal]")),
                ("--stop <STOP>", Some("[default: never]")),
                ("--skip <START..END>", None),
                ("--tokens-per-batch <N>", None),
                ("--max-seq-len <L>", Some("[default: --tokens-per-batch]")),
                ("--max-docs <D>", Some("[default: modded-nanogpt's rule]")),
                ("--schedule <FROM:N:L,...>", None),
                ("--bos <ID>", Some("[default: 50256 for u16")),
            ],
        ),
    ];
    for (tool, options) in tools {
        for flag in ["--help", "-h"] {
            let run = dir.run(tool, &[flag]);
            assert!(run.ok(), "{tool} {flag}: {run:#?}");
            assert!(run.stderr.is_empty(), "{tool} {flag}: {run:#?}");
            assert!(run.stdout.contains("Usage:"), "{tool} {flag}: {run:#?}");
            let entries = help_entries(&run.stdout);
            for (option, default) in options {
                let entry = entries
                    .iter()
                    .find(|e| {
                        let head = e.lines().next().unwrap_or("").trim_start();
                        head.starts_with(option) || head.contains(&format!(", {option}"))
                    })
                    .unwrap_or_else(|| {
                        panic!("{tool} {flag} does not list {option}:\n{}", run.stdout)
                    });
                if let Some(default) = default {
                    assert!(
                        entry.contains(default),
                        "{tool} {flag}: {option} does not show `{default}`:\n{entry}"
                    );
                }
            }
        }
    }
}

/// A help text's entries: each option or argument line (indented at most 6 columns,
/// starting with `-`, `<` or `[`) with the lines that follow it, up to the next entry or
/// section heading.
fn help_entries(text: &str) -> Vec<String> {
    let mut entries: Vec<String> = Vec::new();
    let mut open = false;
    for line in text.lines() {
        let indent = line.len() - line.trim_start().len();
        let head = line.trim_start();
        if indent > 0 && indent <= 6 && head.starts_with(['-', '<', '[']) {
            entries.push(line.to_owned());
            open = true;
        } else if indent == 0 && !line.is_empty() {
            open = false;
        } else if open {
            let last = entries.last_mut().expect("an open entry");
            last.push('\n');
            last.push_str(line);
        }
    }
    entries
}

// ---------------------------------------------------------------------------------------
// Overflowing input: a message and a non-zero exit, in debug and release

#[test]
fn overflowing_numbers_are_refused_with_a_message() {
    let dir = TempDir::new("overflow");
    let shard = small_shard(&dir);
    let max = u64::MAX.to_string();
    let cases: [(&str, Vec<&str>, &str); 6] = [
        // T + 1 overflows (a debug build panicked, a release build wrapped to 0).
        ("train_tokens", vec![&shard, "--seq-len", &max], "--seq-len"),
        // 2 × T × 4 bytes overflows.
        (
            "train_tokens",
            vec![&shard, "--seq-len", "9223372036854775807"],
            "--seq-len",
        ),
        // batches × batch overflows (a release build wrapped to a run that never ended).
        (
            "train_tokens",
            vec![&shard, "--batches", &max, "--batch-size", "2"],
            "--batches",
        ),
        ("quickstart", vec!["--cpu", "--batches", &max], "--batches"),
        ("make_shard", vec!["out.bin", "2147483648"], "2147483647"),
        (
            "make_shard",
            vec!["out.bin", "99999999999999999999999"],
            "2147483647",
        ),
    ];
    for (tool, args, names) in cases {
        let run = dir.assert_bad_arguments(tool, &args);
        assert!(
            run.stderr.contains(names),
            "{tool} {args:?}: the message does not name `{names}`: {run:#?}"
        );
        // Refused before any work: no batch was streamed, no file written.
        assert!(!run.stdout.contains("batches in"), "{run:#?}");
        assert_eq!(
            dir.entries(),
            std::slice::from_ref(&shard),
            "{tool} {args:?} left a file"
        );
    }
}

// ---------------------------------------------------------------------------------------
// make_shard

#[test]
fn make_shard_leaves_no_file_when_it_fails() {
    let dir = TempDir::new("make-fail");
    std::fs::write(dir.path().join("not-a-dir"), b"x").unwrap();
    let cases: [&[&str]; 9] = [
        &["out.bin", "2147483648"],
        &["out.bin", "0"],
        &["out.bin", "abc"],
        &["out.bin", "--", "-5"],
        &["out.bin", "1000", "--vocab", "70000"],
        &["out.bin", "1000", "--vocab", "0"],
        &["missing/out.bin", "1000"],
        &["not-a-dir/out.bin", "1000"],
        &[".", "1000"],
    ];
    for args in cases {
        let run = dir.run("make_shard", args);
        run.assert_refused(&format!("make_shard {args:?}"));
        assert_eq!(
            dir.entries(),
            ["not-a-dir"],
            "make_shard {args:?} left a file"
        );
    }
}

/// A folder the shard cannot be created in: the failure leaves nothing (no shard, no
/// temporary file). A folder without write permission is one, unless this process may
/// write anyway (root): then a sysfs folder, which nobody may create files in.
#[test]
fn make_shard_in_an_unwritable_folder_leaves_no_file() {
    let dir = TempDir::new("make-unwritable");
    let locked = dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    let unwritable = |folder: &Path| {
        let probe = folder.join(".pinring-cli-probe");
        let writable = std::fs::write(&probe, b"").is_ok();
        let _ = std::fs::remove_file(&probe);
        !writable
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
    }
    let folder = if unwritable(&locked) {
        locked.clone()
    } else if Path::new("/sys").is_dir() && unwritable(Path::new("/sys")) {
        PathBuf::from("/sys")
    } else {
        eprintln!("no unwritable folder here (root, and no sysfs): case not run");
        return;
    };
    let before: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let target = folder.join(format!("pinring-cli-{}.bin", std::process::id()));
    let run = dir.run("make_shard", &[target.to_str().unwrap(), "1000"]);
    run.assert_refused("make_shard into an unwritable folder");
    assert!(
        run.stderr.contains(&*target.to_string_lossy()),
        "the message names no file: {run:#?}"
    );
    let after: Vec<_> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        before.len(),
        after.len(),
        "a file was left in {}",
        folder.display()
    );
    assert!(!target.exists());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755));
    }
}

#[test]
fn make_shard_writes_each_format_in_place() {
    let dir = TempDir::new("make-ok");
    // u16, the default: the same arguments give the same file; a rerun replaces it.
    let run = dir.run("make_shard", &["a.bin", "10000", "7"]);
    run.assert_says(&["wrote 10000 u16"]);
    let first = std::fs::read(dir.path().join("a.bin")).unwrap();
    let run = dir.run("make_shard", &["a.bin", "10000", "7"]);
    assert!(run.ok(), "{run:#?}");
    assert_eq!(std::fs::read(dir.path().join("a.bin")).unwrap(), first);
    let shard = TokenShard::open(dir.path().join("a.bin")).unwrap();
    assert_eq!((shard.format(), shard.len()), (ShardFormat::U16, 10000));
    assert!((0..10000).all(|i| shard.token(i).unwrap().unwrap() < 50257));

    // u32 (llm.c's LLaMA-3 format), with --flag=value.
    let run = dir.run("make_shard", &["--u32", "b.bin", "20000", "--vocab=200000"]);
    assert!(run.ok(), "{run:#?}");
    let shard = TokenShard::open(dir.path().join("b.bin")).unwrap();
    assert_eq!((shard.format(), shard.len()), (ShardFormat::U32, 20000));
    let tokens: Vec<u32> = (0..20000)
        .map(|i| shard.token(i).unwrap().unwrap())
        .collect();
    assert!(tokens.iter().all(|&t| t < 200_000));
    assert!(tokens.iter().any(|&t| t > u32::from(u16::MAX)));
    // Nothing else is left in the folder (no temporary file).
    assert_eq!(dir.entries(), ["a.bin", "b.bin"]);
}

/// Issue 29 item 10: the shard is documents — its first token and every later bos start
/// one, of geometric lengths of mean `--doc-len` (1000 by default), bos drawn nowhere else
/// — so that the README's packed-documents recipes walk an epoch in a sensible number of
/// steps; a length of 0 and a bos the format cannot hold are refused.
#[test]
fn make_shard_writes_documents_of_the_mean_length_asked_for() {
    let dir = TempDir::new("make-docs");
    let documents = |name: &str, bos: u32| {
        let shard = TokenShard::open(dir.path().join(name)).unwrap();
        let tokens: Vec<u32> = (0..shard.len())
            .map(|i| shard.token(i).unwrap().unwrap())
            .collect();
        assert_eq!(tokens[0], bos, "{name}: the first token starts a document");
        tokens.iter().filter(|&&t| t == bos).count()
    };
    // The default: documents of ~1000 tokens (200 documents expected in 200000 tokens;
    // the count is fixed by the seed, the bounds only say "about").
    let run = dir.run("make_shard", &["a.bin", "200000", "3"]);
    run.assert_says(&[
        "wrote 200000 u16",
        "documents of 1000 tokens on average",
        "bos 50256",
    ]);
    let n = documents("a.bin", 50256);
    assert!(
        (150..=250).contains(&n),
        "{n} documents of ~1000 tokens in 200000"
    );
    // --doc-len 50: ~4000 of them; --bos and --u32 too.
    let run = dir.run("make_shard", &["b.bin", "200000", "3", "--doc-len", "50"]);
    assert!(run.ok(), "{run:#?}");
    let n = documents("b.bin", 50256);
    assert!(
        (3600..=4400).contains(&n),
        "{n} documents of ~50 tokens in 200000"
    );
    let run = dir.run("make_shard", &["--u32", "c.bin", "50000", "--doc-len=100"]);
    run.assert_says(&["bos 128000"]);
    let n = documents("c.bin", 128_000);
    assert!(
        (400..=600).contains(&n),
        "{n} documents of ~100 tokens in 50000"
    );
    let run = dir.run(
        "make_shard",
        &["d.bin", "20000", "--bos", "7", "--doc-len", "10"],
    );
    assert!(run.ok(), "{run:#?}");
    assert!((1600..=2400).contains(&documents("d.bin", 7)));
    // A packed-documents source over the default shard walks whole steps of it.
    let docs = Documents::builder(TokenShards::open([dir.path().join("a.bin")]).unwrap())
        .tokens_per_batch(4096)
        .max_seq_len(896)
        .build()
        .unwrap();
    let epoch0 = docs.iter().take_while(|s| s.epoch() == 0).count();
    // (documents are cut at 896 tokens: about 60% of the tokens are packed)
    assert!(
        (15..=48).contains(&epoch0),
        "{epoch0} steps of 4097 tokens in an epoch"
    );
    for args in [
        &["e.bin", "1000", "--doc-len", "0"][..],
        &["e.bin", "1000", "--bos", "70000"],
        &["e.bin", "1000", "--doc-len", "x"],
    ] {
        dir.run("make_shard", args)
            .assert_refused(&format!("make_shard {args:?}"));
    }
    assert_eq!(dir.entries(), ["a.bin", "b.bin", "c.bin", "d.bin"]);
}

// ---------------------------------------------------------------------------------------
// quickstart

#[test]
fn quickstart_rejects_bad_arguments() {
    let dir = TempDir::new("quickstart-bad");
    for args in [
        &["abc"][..],
        &["-5"],
        &["--batches", "abc"],
        &["--batches=-5"],
        &["--batches", "0"],
        &["--cpu", "--cuda", "0"],
        &["--nonsense"],
    ] {
        let run = dir.assert_bad_arguments("quickstart", args);
        assert!(!run.stdout.contains("batches of"), "ran anyway: {run:#?}");
    }
}

#[test]
fn quickstart_runs_and_says_why_it_fell_back_to_the_cpu() {
    let dir = TempDir::new("quickstart-ok");
    // --flag=value, on the cpu backend: a Stats summary.
    let run = dir.run("quickstart", &["--cpu", "--batches=3"]);
    run.assert_says(&["on the cpu backend", "3 batches of 64 images"]);
    for stage in ["decode", "copy", "bytes"] {
        assert!(run.stdout.contains(stage), "no Stats summary: {run:#?}");
    }
    assert!(!run.stderr.contains("note:"), "{run:#?}");

    // No backend named: CUDA device 0 where it works; else the cpu, with the reason.
    let run = dir.run("quickstart", &["--batches", "1"]);
    assert!(run.ok(), "{run:#?}");
    #[cfg(feature = "cuda")]
    match pinring::Cuda::device_count() {
        Ok(n) if n > 0 => {
            assert!(
                run.stdout.contains("on the cuda (device 0) backend"),
                "{run:#?}"
            )
        }
        Ok(_) => run.assert_fell_back("the CUDA driver reports no device"),
        Err(e) => run.assert_fell_back(&format!("CUDA cannot be used here: {e}")),
    }
    #[cfg(not(feature = "cuda"))]
    run.assert_fell_back("CUDA cannot be used here: this build has no `cuda` feature");

    // --cuda N where the device cannot be used: an error, not a silent fallback.
    #[cfg(feature = "cuda")]
    if pinring::Cuda::device_count().is_err() {
        let run = dir.run("quickstart", &["--cuda", "0", "--batches", "1"]);
        run.assert_refused("quickstart --cuda 0 without CUDA");
        assert!(!run.stdout.contains("batches of"), "{run:#?}");
    }
}

// ---------------------------------------------------------------------------------------
// train_tokens

#[test]
fn train_tokens_takes_flag_equals_value() {
    let dir = TempDir::new("train-ok");
    let shard = small_shard(&dir);
    let mut args = words(
        "--seq-len=8 --batch-size=2 --batches=3 --dtype=int64 --order=sequential --threads=1",
    );
    args.push(&shard);
    let run = dir.run("train_tokens", &args);
    run.assert_says(&["batches of 2 × (T = 8) as i64, Sequential", "3 batches in"]);
    // A u32 shard streams too.
    let tokens: Vec<u32> = (0..3000u32).map(|i| i * 40).collect();
    write_shard_u32(dir.path().join("llama.bin"), &tokens).unwrap();
    let run = dir.run(
        "train_tokens",
        &["--seq-len", "16", "--batches", "2", "llama.bin"],
    );
    run.assert_says(&["of u32 tokens"]);
}

#[test]
fn train_tokens_errors_name_the_real_cause() {
    let dir = TempDir::new("train-bad");
    let shard = small_shard(&dir);
    write_shard_u32(dir.path().join("llama.bin"), &[1, 2, 3, 70000, 5, 6, 7, 8]).unwrap();
    std::fs::create_dir(dir.path().join("data")).unwrap();
    let cases: [(Vec<&str>, &str); 5] = [
        (vec!["data"], "data: is a directory"),
        (
            vec![
                &shard,
                "--seq-len",
                "1024",
                "--rank",
                "99999",
                "--world-size",
                "100000",
            ],
            "rank 99999's share of the epoch is empty",
        ),
        (
            vec![&shard, "--seq-len", "5000"],
            "no window of 5001 tokens fits: the longest file, shard.bin, holds 5000 tokens",
        ),
        (
            vec!["llama.bin", "--seq-len", "4", "--dtype", "uint16"],
            "holds u32 tokens, which the decoder's u16 cannot hold",
        ),
        (
            vec![&shard, "--rank", "3", "--world-size", "2"],
            "rank 3 is not below world_size 2",
        ),
    ];
    for (args, phrase) in cases {
        dir.assert_refuses("train_tokens", &args, phrase);
    }
    // Arguments clap refuses: exit status 2.
    for args in [
        &["--batch-size", "0", "x.bin"][..],
        &["--dtype", "u8", "x.bin"],
        &[],
    ] {
        dir.assert_bad_arguments("train_tokens", args);
    }
}

/// Issue 19 item 18: `--batches N` streams exactly N batches, also when epochs end in
/// short batches (here 624 windows an epoch, batches of 5: before, 301 for 300) and when a
/// rank's share of an epoch is smaller than a batch (`--world 64`: 10 windows a rank,
/// batches of 16; before, 32 batches of at most 10 for 20).
#[test]
fn train_tokens_streams_exactly_the_batches_asked_for() {
    let dir = TempDir::new("train-count");
    let shard = small_shard(&dir);
    for (args, want) in [
        ("--seq-len 8 --batch-size 5 --batches 300", 300),
        (
            "--seq-len 8 --batch-size 16 --batches 20 --world-size 64",
            20,
        ),
    ] {
        let mut args = words(args);
        args.extend(["--order", "sequential", "--threads", "1", &shard]);
        let run = dir.run("train_tokens", &args);
        assert!(run.ok(), "{run:#?}");
        assert!(
            run.stdout.contains(&format!("\n{want} batches in ")),
            "train_tokens {args:?}: expected {want} batches: {run:#?}"
        );
    }
}

/// Issue 19 item 18: `--trace` to a path that cannot be written ends the run before it
/// starts (nothing streamed), with the path in the message. Before, the whole run went by
/// and only then failed.
#[test]
fn train_tokens_trace_to_an_unwritable_path_fails_before_the_run() {
    let dir = TempDir::new("train-trace");
    let shard = small_shard(&dir);
    let trace = dir.path().join("no-such-folder").join("trace.json");
    let trace = trace.to_str().unwrap();
    let run = dir.run(
        "train_tokens",
        &["--seq-len", "8", "--batches", "5", "--trace", trace, &shard],
    );
    run.assert_refused("train_tokens --trace into a missing folder");
    assert!(run.stderr.contains(trace), "{run:#?}");
    assert!(!run.stdout.contains("batches in"), "it ran first: {run:#?}");
    // A writable path gets the trace.
    let mut args = words("--seq-len 8 --batches 5 --trace trace.json");
    args.push(&shard);
    let run = dir.run("train_tokens", &args);
    assert!(run.ok(), "{run:#?}");
    let json = std::fs::read_to_string(dir.path().join("trace.json")).unwrap();
    assert!(json.starts_with('{') || json.starts_with('['), "{json}");
}

// ---------------------------------------------------------------------------------------
// train_documents

/// `docs.bin` in `dir`: 50 documents of 20 to 79 u16 tokens, each starting with 50256.
fn document_shard(dir: &TempDir) -> String {
    let mut tokens: Vec<u16> = vec![3, 4];
    for d in 0..50u16 {
        tokens.push(50256);
        tokens.extend((1..20 + d % 60).map(|i| (d * 100 + i) % 50000));
    }
    write_shard(dir.path().join("docs.bin"), &tokens).unwrap();
    "docs.bin".to_owned()
}

#[test]
fn train_documents_streams_exactly_the_steps_asked_for() {
    let dir = TempDir::new("docs-ok");
    let shard = document_shard(&dir);
    let mut args = words(
        "--tokens-per-batch=64 --max-seq-len=32 --steps=25 --threads=1 \
         --schedule=10:100:16,20:32:64 --positions --world-size=2 --rank=1 --cpu",
    );
    args.push(&shard);
    let run = dir.run("train_documents", &args);
    run.assert_says(&[
        "steps of up to 100 + 1 tokens as i32, cut at 64",
        "\n25 steps in ",
        "after step 25: epoch ",
    ]);
    // Shuffled, a u32 shard with LLaMA-3's bos by default, a trace.
    let mut tokens: Vec<u32> = Vec::new();
    for d in 0..40u32 {
        tokens.push(128_000);
        tokens.extend((1..30).map(|i| 100_000 + d * 30 + i));
    }
    write_shard_u32(dir.path().join("llama.bin"), &tokens).unwrap();
    let run = dir.run(
        "train_documents",
        &words(
            "--tokens-per-batch 40 --steps 12 --order shuffled --seed 3 --dtype int64 \
             --trace trace.json llama.bin",
        ),
    );
    run.assert_says(&["documents from bos 128000", "\n12 steps in "]);
    let json = std::fs::read_to_string(dir.path().join("trace.json")).unwrap();
    assert!(json.starts_with('{') || json.starts_with('['), "{json}");
}

#[test]
fn train_documents_errors_name_the_real_cause() {
    let dir = TempDir::new("docs-bad");
    let shard = document_shard(&dir);
    let plain = small_shard(&dir);
    let trace = dir.path().join("no-such-folder").join("trace.json");
    let trace = trace.to_str().unwrap().to_owned();
    let cases: [(Vec<&str>, &str); 7] = [
        (
            vec![&plain, "--tokens-per-batch", "8"],
            "holds no bos token 50256, so no document starts in it",
        ),
        (
            vec![&shard, "--bos", "70000"],
            "holds u16 tokens, which never reach bos 70000",
        ),
        (
            vec![
                &shard,
                "--tokens-per-batch",
                "64",
                "--schedule",
                "5:64:8,5:32:8",
            ],
            "schedule entry 1 (from step 5)",
        ),
        (
            vec![&shard, "--tokens-per-batch", "100000"],
            "no step fits in a whole epoch",
        ),
        (
            vec![
                &shard,
                "--tokens-per-batch",
                "64",
                "--max-docs",
                "2",
                "--max-seq-len",
                "8",
            ],
            "step 0 needs",
        ),
        (
            vec![&shard, "--rank", "3", "--world-size", "2"],
            "rank 3 is not below world_size 2",
        ),
        (
            vec![&shard, "--tokens-per-batch", "64", "--trace", &trace],
            &trace,
        ),
    ];
    for (args, phrase) in cases {
        let run = dir.assert_refuses("train_documents", &args, phrase);
        assert!(!run.stdout.contains("steps in"), "it ran: {run:#?}");
    }
    // Arguments clap refuses: exit status 2.
    for args in [
        &["--tokens-per-batch", "0", "x.bin"][..],
        &["--schedule", "5:64", "x.bin"],
        &["--order", "random", "x.bin"],
        &["--cpu", "--cuda", "0", "x.bin"],
        &[],
    ] {
        dir.assert_bad_arguments("train_documents", args);
    }
}

/// `web.bin` (80 documents of 5 to 44 tokens of 1s and 2s) and `code.bin` (60 documents
/// of 3 to 22 tokens of 3s) in `dir`, u16, bos 50256.
fn document_sources(dir: &TempDir) -> [&'static str; 2] {
    let docs = |n: u16, len: &dyn Fn(u16) -> u16, t: u16| -> Vec<u16> {
        let mut tokens = vec![7, 7];
        for d in 0..n {
            tokens.push(50256);
            tokens.extend((1..len(d)).map(|i| t + i % 2));
        }
        tokens
    };
    write_shard(dir.path().join("web.bin"), &docs(80, &|d| 5 + d % 40, 1)).unwrap();
    write_shard(dir.path().join("code.bin"), &docs(60, &|d| 3 + d % 20, 3)).unwrap();
    ["web.bin", "code.bin"]
}

#[test]
fn train_documents_mixes_sources_by_weight() {
    let dir = TempDir::new("docs-mix");
    let [web, code] = document_sources(&dir);
    let run = dir.run(
        "train_documents",
        &[
            "--tokens-per-batch=64",
            "--max-seq-len=32",
            "--steps=30",
            "--threads=1",
            "--source",
            web,
            "--weight=0.75",
            "--source",
            code,
            "--weight=0.25",
            "--order=shuffled",
            "--mix-seed=5",
            "--world-size=2",
            "--rank=1",
        ],
    );
    run.assert_says(&[
        "source 0 (weight 0.750): web.bin: 1 shard(s)",
        "source 1 (weight 0.250): code.bin",
        "a mixture of 2 sources of documents",
        "\n30 steps in ",
        "after step 30: ",
        "  source 1: epoch ",
    ]);
    // A stop rule ends the run early: fewer steps than asked for.
    let run = dir.run(
        "train_documents",
        &[
            "--tokens-per-batch=64",
            "--steps=1000",
            "--source",
            web,
            "--source",
            code,
            "--stop=first",
            "--start-step=2",
        ],
    );
    assert!(run.ok(), "{run:#?}");
    assert!(!run.stdout.contains("\n1000 steps in "), "{run:#?}");
    // Bad mixtures: a message naming the cause.
    let mut tokens: Vec<u32> = Vec::new();
    for _ in 0..40u32 {
        tokens.push(50256);
        tokens.extend([100_000; 20]);
    }
    write_shard_u32(dir.path().join("wide.bin"), &tokens).unwrap();
    for (args, says) in [
        (
            vec!["--source", web, "--source", code, "--weight", "1"],
            "1 weight(s) for 2 source(s)",
        ),
        (
            vec![
                "--source",
                web,
                "--source",
                "wide.bin",
                "--tokens-per-batch",
                "64",
            ],
            "source 1's samples differ from source 0's: its token width is 4",
        ),
        (
            vec!["--source", web, "--weight=-1", "--tokens-per-batch", "64"],
            "weight 0 is -1",
        ),
    ] {
        dir.assert_refuses("train_documents", &args, says);
    }
    // Arguments clap refuses: paths with --source, --weight without one.
    for args in [
        &[web, "--source", code][..],
        &["--weight", "1", web],
        &["--mix-seed", "1", web],
    ] {
        dir.assert_bad_arguments("train_documents", args);
    }
}

// ---------------------------------------------------------------------------------------
// locate

/// Shards `web.bin` (5000 tokens) and `code.bin` (3000) in `dir`, and the mixture of their
/// windows of 65 (shuffled with seeds 1 and 2) a run on rank `rank` of 2 with batches of
/// 4 and weights 0.7, 0.3 uses, starting at `start`.
fn two_sources(dir: &TempDir, rank: u64, start: u64) -> Mixture<TokenShards> {
    let sources: Vec<_> = [("web.bin", 5000u32, 1u64), ("code.bin", 3000, 2)]
        .into_iter()
        .map(|(name, n, seed)| {
            let tokens: Vec<u16> = (0..n).map(|i| (i * 13 % 50257) as u16).collect();
            write_shard(dir.path().join(name), &tokens).unwrap();
            TokenShards::open([dir.path().join(name)])
                .unwrap()
                .windows(65)
                .order(Order::Shuffled { seed })
                .build()
                .unwrap()
        })
        .collect();
    Mixture::builder(sources)
        .weights([0.7, 0.3])
        .shard(rank, 2)
        .batch_size(4)
        .start_step(start)
        .build()
        .unwrap()
}

/// The rows `locate` printed, as (source, offset, length, id, file).
fn printed_rows(run: &Run) -> Vec<(u16, u64, u64, u64, String)> {
    run.stdout
        .lines()
        .skip(2)
        .map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            assert_eq!(f.len(), 6, "{line}");
            (
                f[1].parse().unwrap(),
                f[2].parse().unwrap(),
                f[3].parse().unwrap(),
                f[4].parse().unwrap(),
                f[5].to_owned(),
            )
        })
        .collect()
}

#[test]
fn locate_prints_each_row_of_a_step_from_the_runs_settings_or_a_state() {
    let dir = TempDir::new("locate");
    let mix = two_sources(&dir, 1, 7);
    let want: Vec<(u16, u64, u64, u64, String)> = mix
        .iter()
        .take(4)
        .map(|s| {
            let at = mix.location(s.source(), s.item().id()).unwrap();
            let file = at.path.file_name().unwrap().to_string_lossy().into_owned();
            (at.source, at.offset, at.len, s.item().id(), file)
        })
        .collect();
    let settings = words(
        "--step 7 --rank 1 --world-size 2 --batch-size 4 --shards web.bin --shards code.bin \
         --seq-len 64 --order shuffled --seed 1,2 --weights 0.7,0.3",
    );
    let run = dir.run("locate", &settings);
    assert!(run.ok(), "{run:#?}");
    assert!(
        run.stdout
            .starts_with("step 7 of rank 1: 4 rows (offset and length in tokens)\n"),
        "{run:#?}"
    );
    assert_eq!(printed_rows(&run), want);
    // From a state saved at step 3 of the same run: the same rows.
    let state = two_sources(&dir, 0, 0)
        .checkpoint_after(None, 3 * 4)
        .unwrap();
    std::fs::write(dir.path().join("state.json"), state.to_text()).unwrap();
    let run = dir.run(
        "locate",
        &words("--step 7 --rank 1 --state state.json --shards web.bin --shards code.bin"),
    );
    assert!(run.ok(), "{run:#?}");
    assert_eq!(printed_rows(&run), want);
    // A step before the state's: refused, saying what to do.
    let run = dir.run(
        "locate",
        &words("--step 2 --state state.json --shards web.bin --shards code.bin"),
    );
    run.assert_refused("a step before the state");
    assert!(
        run.stderr
            .contains("trace earlier ones from the run's settings"),
        "{run:#?}"
    );
    // One source: a sampler; its row is the window the library gives.
    let run = dir.run(
        "locate",
        &words("--step 3 --batch-size 2 --shards web.bin --seq-len 64"),
    );
    assert!(run.ok(), "{run:#?}");
    let rows = printed_rows(&run);
    assert_eq!(
        rows,
        [
            (0, 6 * 64, 65, 6, "web.bin".to_owned()),
            (0, 7 * 64, 65, 7, "web.bin".to_owned())
        ]
    );
}

#[test]
fn locate_refuses_bad_settings_with_a_message() {
    let dir = TempDir::new("locate-bad");
    two_sources(&dir, 0, 0);
    let base = words("--batch-size 4 --shards web.bin --shards code.bin");
    // Step 1 unless the case gives its own.
    let with = |more: &'static str| -> Vec<&'static str> {
        let more = words(more);
        let step: &[&str] = if more.contains(&"--step") {
            &[]
        } else {
            &["--step", "1"]
        };
        base.iter().chain(step).chain(&more).copied().collect()
    };
    for (args, says) in [
        (with("--seq-len 64 --weights 1,-1"), "weight 1 is -1"),
        (
            with("--seq-len 64 --weights 1,2,3"),
            "3 weight(s) for 2 source(s)",
        ),
        (with("--seq-len 64 --seed 1,2,3"), "3 seeds for 2 sources"),
        (with(""), "give --seq-len"),
        (
            with("--seq-len 64 --stop first --step 100000"),
            "has no step 100000",
        ),
        (with("--seq-len 64 --skip 1..3"), "has no step 1"),
        (with("--seq-len 64 --skip 3"), "is not a range START..END"),
        (
            with("--seq-len 64 --state missing.json"),
            "cannot read the state",
        ),
    ] {
        dir.assert_refuses("locate", &args, says);
    }
}

/// The rows of step `step` of rank `rank` of 2 of a mixture of `document_sources` (or of
/// `web.bin` alone), as `locate` prints them: each piece of the library's step, its length
/// the batch row's (the last one less 1).
fn document_rows(
    dir: &TempDir,
    mixed: bool,
    rank: u64,
    step: u64,
) -> Vec<(u16, u64, u64, u64, String)> {
    let source = |f: &str| Documents::builder(TokenShards::open([dir.path().join(f)]).unwrap());
    let mut rows = Vec::new();
    if mixed {
        let mix = Mixture::documents([
            source("web.bin").order(DocOrder::Shuffled { seed: 1 }),
            source("code.bin").order(DocOrder::Shuffled { seed: 2 }),
        ])
        .weights([0.7, 0.3])
        .shard(rank, 2)
        .tokens_per_batch(48)
        .max_seq_len(16)
        .start_step(step)
        .build()
        .unwrap();
        let s = mix.iter().next().unwrap();
        let n = s.pieces().len();
        for (i, p) in s.pieces().iter().enumerate() {
            let len = p.piece.len - u64::from(i + 1 == n);
            let at = mix.location(p.source, p.piece.doc, len).unwrap();
            let file = at.path.file_name().unwrap().to_string_lossy().into_owned();
            rows.push((p.source, at.offset, at.len, p.piece.doc, file));
        }
    } else {
        let docs = source("web.bin")
            .tokens_per_batch(48)
            .max_seq_len(16)
            .shard(rank, 2)
            .build()
            .unwrap();
        let state = docs.checkpoint_after(None, step).unwrap();
        let s = docs.iter_from(&state).unwrap().next().unwrap();
        let n = s.piece_count() as usize;
        for (i, p) in s.pieces().enumerate() {
            let at = docs.location(p.doc, p.len - u64::from(i + 1 == n)).unwrap();
            rows.push((0, at.offset, at.len, p.doc, "web.bin".to_owned()));
        }
    }
    rows
}

#[test]
fn locate_prints_the_rows_of_a_step_of_packed_documents() {
    let dir = TempDir::new("locate-docs");
    document_sources(&dir);
    let mixture = words(
        "--step 9 --rank 1 --world-size 2 --tokens-per-batch 48 --max-seq-len 16 \
         --shards web.bin --shards code.bin --order shuffled --seed 1,2 --weights 0.7,0.3",
    );
    let want = document_rows(&dir, true, 1, 9);
    let run = dir.run("locate", &mixture);
    assert!(run.ok(), "{run:#?}");
    assert!(
        run.stdout.starts_with(&format!(
            "step 9 of rank 1: {} rows (offset and length in tokens)\n",
            want.len()
        )),
        "{run:#?}"
    );
    assert_eq!(printed_rows(&run), want);
    // From a mixture's state saved at step 4: the same rows.
    let source = |f: &str, seed| {
        Documents::builder(TokenShards::open([dir.path().join(f)]).unwrap())
            .order(DocOrder::Shuffled { seed })
    };
    let state = Mixture::documents([source("web.bin", 1), source("code.bin", 2)])
        .weights([0.7, 0.3])
        .shard(0, 2)
        .tokens_per_batch(48)
        .max_seq_len(16)
        .build()
        .unwrap()
        .checkpoint_after(None, 4)
        .unwrap();
    std::fs::write(dir.path().join("mix.json"), state.to_text()).unwrap();
    let from_state = words("--step 9 --rank 1 --state mix.json --shards web.bin --shards code.bin");
    let run = dir.run("locate", &from_state);
    assert!(run.ok(), "{run:#?}");
    assert_eq!(printed_rows(&run), want);
    // One source: the rows of Documents' step.
    let one = words(
        "--step 6 --rank 0 --world-size 2 --tokens-per-batch 48 --max-seq-len 16 --shards web.bin",
    );
    let run = dir.run("locate", &one);
    assert!(run.ok(), "{run:#?}");
    assert_eq!(printed_rows(&run), document_rows(&dir, false, 0, 6));
    // ... and from its checkpoint.
    let docs = Documents::builder(TokenShards::open([dir.path().join("web.bin")]).unwrap())
        .tokens_per_batch(48)
        .max_seq_len(16)
        .shard(1, 2)
        .build()
        .unwrap();
    let state = docs.checkpoint_after(None, 2).unwrap();
    std::fs::write(dir.path().join("docs.json"), state.to_text()).unwrap();
    let run = dir.run(
        "locate",
        &words("--step 6 --state docs.json --shards web.bin"),
    );
    assert!(run.ok(), "{run:#?}");
    assert_eq!(printed_rows(&run), document_rows(&dir, false, 0, 6));
    // Bad settings: a message.
    for (args, says) in [
        (
            "--step 1 --tokens-per-batch 0 --shards web.bin",
            "`tokens_per_batch` must be at least 1",
        ),
        (
            "--step 1 --tokens-per-batch 48 --shards web.bin --order random",
            "sequential or shuffled, not random",
        ),
        (
            "--step 1 --tokens-per-batch 48 --shards web.bin --skip 0..3",
            "has no step 1",
        ),
        (
            "--step 1 --state mix.json --shards web.bin",
            "the state has 2 source(s)",
        ),
    ] {
        dir.assert_refuses("locate", &words(args), says);
    }
}

/// A shard a bigram model can learn: each token mostly follows from the one before
/// (`(5t + 1) mod 64`), one in eight drawn at random.
fn learnable_shard(dir: &TempDir) -> String {
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut t = 0u16;
    let tokens: Vec<u16> = (0..60_000)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            t = if x.is_multiple_of(8) {
                (x >> 8) as u16 % 64
            } else {
                (5 * t + 1) % 64
            };
            t
        })
        .collect();
    write_shard(dir.path().join("learn_000.bin"), &tokens).unwrap();
    "learn_*.bin".to_owned()
}

/// The losses a train_loop run printed, by step.
fn losses(text: &str) -> Vec<(u64, f64)> {
    text.lines()
        .filter_map(|l| match words(l)[..] {
            ["step", k, "loss", x] => Some((k.parse().ok()?, x.parse().ok()?)),
            _ => None,
        })
        .collect()
}

/// The window ids a train_loop run logged (`step rank ids...`), as (step, id).
fn logged_ids(path: &Path) -> Vec<(u64, u64)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .flat_map(|l| {
            let w = words(l);
            let step: u64 = w[0].parse().unwrap();
            w[2..]
                .iter()
                .map(move |id| (step, id.parse().unwrap()))
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn train_loop_killed_after_a_save_resumes_on_another_world_size() {
    let dir = TempDir::new("train-loop");
    let shards = learnable_shard(&dir);
    let (ckpt, ids1, ids2) = ("ckpt.bin", dir.path().join("ids1"), dir.path().join("ids2"));
    let args = |world: &str, extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "--world",
            world,
            "--batch-size",
            "4",
            "--seq-len",
            "32",
            "--epochs",
            "1",
            "--save",
            ckpt,
            "--save-every",
            "5",
            "--lr",
            "2",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        a.extend(extra.iter().map(|s| (*s).to_owned()));
        a.push(shards.clone());
        a
    };
    // The first run, killed once it saved step 15 (it may have trained on a little).
    let mut child = Command::new(exe("train_loop"))
        .args(args(
            "2",
            &["--steps", "100000", "--ids", ids1.to_str().unwrap()],
        ))
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut text = String::new();
        let mut buf = [0u8; 4096];
        loop {
            match out.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    text.push_str(&String::from_utf8_lossy(&buf[..n]));
                    let _ = tx.send(text.clone());
                }
            }
        }
    });
    let first = loop {
        let text = rx
            .recv_timeout(WATCHDOG)
            .expect("the first run saved step 15");
        if text.contains("saved step 15 ") {
            child.kill().unwrap();
            break text;
        }
    };
    let _ = child.wait();
    let before = losses(&first);
    assert!(before.len() >= 15, "{first}");
    // Resumed on three ranks from the last whole save.
    let run = dir.run(
        "train_loop",
        &args(
            "3",
            &["--steps", "40", "--resume", "--ids", ids2.to_str().unwrap()],
        )
        .iter()
        .map(String::as_str)
        .collect::<Vec<_>>(),
    );
    assert!(run.ok(), "{run:#?}");
    let saved: u64 = run
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("resumed at step "))
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no resume line: {run:#?}"));
    assert!(saved >= 15 && saved.is_multiple_of(5), "{run:#?}");
    assert!(run
        .stdout
        .contains(&format!("resumed at step {saved} on 3 ranks (saved on 2)")));
    // The loss goes on from where the saved weights stood, not from the start.
    let after = losses(&run.stdout);
    assert_eq!(after[0].0, saved + 1);
    let start = before[0].1;
    let at_save = before
        .iter()
        .find(|(k, _)| *k == saved)
        .map_or(after[0].1, |l| l.1);
    assert!(
        after[0].1 < start - 0.3 && (after[0].1 - at_save).abs() < 0.3,
        "{before:?} {after:?}"
    );
    // Every window once across the two runs: the first run's before the save, the rest.
    let used: Vec<u64> = logged_ids(&ids1)
        .into_iter()
        .filter(|(s, _)| *s < saved)
        .map(|(_, id)| id)
        .collect();
    let rest: Vec<u64> = logged_ids(&ids2).into_iter().map(|(_, id)| id).collect();
    let mut all: Vec<u64> = used.iter().chain(&rest).copied().collect();
    let n = all.len();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), n, "a window delivered twice");
    assert_eq!(used.len() as u64, saved * 2 * 4);
}
