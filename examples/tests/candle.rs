//! The `candle_train` example (feature `candle`) run as a user runs it, on candle's cpu
//! device: a few dozen steps of a tiny causal language model on data this test writes,
//! its loss falling; a run stopped after its save and resumed pops the uninterrupted run's
//! batches and logs its losses, bit for bit; the llama2-c comparison runs beside it; bad
//! command lines are refused cleanly.

use std::path::{Path, PathBuf};
use std::process::Command;

use pinring::source::write_shard;

/// A folder of its own under cargo's temporary folder, removed when dropped (the examples
/// have no dev-dependencies: `tests/cli.rs` makes its folders the same way).
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("pinring-candle-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A run's stdout, checked to have exited 0.
fn run(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_candle_train"))
        .args(args)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "{args:?}\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    stdout.into_owned()
}

/// The `step K loss L` lines, as (K, L as printed).
fn losses(stdout: &str) -> Vec<(u64, String)> {
    stdout
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("step ")?;
            let (k, loss) = rest.split_once(" loss ")?;
            Some((k.parse().ok()?, loss.to_owned()))
        })
        .collect()
}

/// 30,000 tokens below 64 from a noisy affine rule (`x → 5x + 3 mod 64`, one in ten
/// steps off by one): a next token a model can learn.
fn data(dir: &Path) -> String {
    let mut x = 1u16;
    let tokens: Vec<u16> = (0..30_000u32)
        .map(|i| {
            x = (x * 5 + 3 + u16::from(i.wrapping_mul(2_654_435_761) % 10 == 0)) % 64;
            x
        })
        .collect();
    let path = dir.join("train_000.bin");
    write_shard(&path, &tokens).unwrap();
    path.to_str().unwrap().to_owned()
}

#[test]
fn candle_trains_through_pinring_and_resumes_exactly() {
    let dir = TempDir::new("resume");
    let data = data(dir.path());
    let at = |name: &str| dir.path().join(name).to_str().unwrap().to_owned();
    let (ids_a, ids_b, ckpt) = (at("a.ids"), at("b.ids"), at("ckpt"));
    let out = run(&["--steps", "40", "--ids", &ids_a, "--compare-llama2c", &data]);
    // The same model trained on candle's llama2-c data path too, both paths timed.
    assert!(
        out.contains("data path, host time a step (median of 40): pinring ")
            && out.contains("candle's llama2-c path"),
        "{out}"
    );
    let whole = losses(&out);
    assert_eq!(whole.len(), 40);
    let loss = |i: usize| whole[i].1.parse::<f32>().unwrap();
    // ln 64 = 4.16 at the start; it falls by a third within 40 steps.
    assert!(loss(0) > 3.5, "{whole:?}");
    assert!(
        loss(39) < 0.67 * loss(0),
        "the loss did not fall: {whole:?}"
    );
    let first = run(&[
        "--steps",
        "40",
        "--stop-after",
        "17",
        "--save",
        &ckpt,
        "--ids",
        &ids_b,
        &data,
    ]);
    assert!(first.contains("stopped after step 17"), "{first}");
    assert!(Path::new(&ckpt).join("loader.json").is_file());
    let second = run(&[
        "--steps", "40", "--save", &ckpt, "--resume", "--ids", &ids_b, &data,
    ]);
    assert!(second.contains("resumed at step 17"), "{second}");
    let resumed: Vec<_> = losses(&first).into_iter().chain(losses(&second)).collect();
    assert_eq!(
        resumed, whole,
        "the resumed run's losses are not the uninterrupted run's"
    );
    let (a, b) = (
        std::fs::read_to_string(&ids_a).unwrap(),
        std::fs::read_to_string(&ids_b).unwrap(),
    );
    assert_eq!(a.lines().count(), 40);
    assert_eq!(a, b, "the resumed run popped other batches");
}

#[test]
fn candle_train_refuses_bad_command_lines_cleanly() {
    let dir = TempDir::new("refused");
    let data = data(dir.path());
    let refused = |args: &[&str], says: &str| {
        let out = Command::new(env!("CARGO_BIN_EXE_candle_train"))
            .args(args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            matches!(out.status.code(), Some(c) if c != 0),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains(says),
            "{args:?}: expected {says:?} in {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    };
    refused(&["--resume", &data], "--resume needs --save");
    refused(&["--vocab", "10", &data], "is not below --vocab 10");
    refused(&["--device", "tpu", &data], "invalid value 'tpu'");
    // This test's build has candle's cpu device only (`--features candle`).
    refused(
        &["--device", "cuda", &data],
        "--device cuda needs the example built with --features candle-cuda",
    );
    let missing = dir.path().join("nothing").join("x");
    refused(
        &["--resume", "--save", missing.to_str().unwrap(), &data],
        "model.safetensors",
    );
}
