//! Helpers shared by the core tests: a content rule derived from (seq, sample index), a
//! decoder that follows it (optionally slowed down, failing or panicking at a chosen
//! sample), and a checker.
#![allow(dead_code)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use pinring::source::{write_shard, Sampler, TokenShards};
use pinring::{Decode, DecodeError, Pipeline};

/// A shard at `path` of the tokens `0..n`, read as windows of `window` tokens in order.
pub fn counting_windows(path: &Path, n: u16, window: u64) -> Sampler<TokenShards> {
    write_shard(path, &(0..n).collect::<Vec<_>>()).unwrap();
    TokenShards::open([path])
        .unwrap()
        .windows(window)
        .build()
        .unwrap()
}

/// Byte `i` of global sample `g`.
pub fn byte(g: u64, i: usize) -> u8 {
    let x = g.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ (i as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    (x ^ (x >> 29) ^ (x >> 47)) as u8
}

/// Panics unless `bytes` is batch `seq` with `samples` samples of `sample_bytes` each,
/// `per_batch` samples per full batch.
pub fn check_batch(bytes: &[u8], seq: u64, samples: usize, sample_bytes: usize, per_batch: usize) {
    assert_eq!(bytes.len(), samples * sample_bytes, "length of batch {seq}");
    for j in 0..samples {
        let g = seq * per_batch as u64 + j as u64;
        let sample = &bytes[j * sample_bytes..(j + 1) * sample_bytes];
        for (i, &b) in sample.iter().enumerate() {
            assert_eq!(b, byte(g, i), "batch {seq} sample {j} byte {i}");
        }
    }
}

/// Whether `bytes` begin with full batch `seq`: `per_batch` samples of `sample_bytes` each
/// (as [`check_batch`], without panicking: for a reader that reports what it saw).
pub fn is_batch(bytes: &[u8], seq: u64, per_batch: usize, sample_bytes: usize) -> bool {
    (0..per_batch).all(|j| {
        let g = seq * per_batch as u64 + j as u64;
        bytes[j * sample_bytes..(j + 1) * sample_bytes]
            .iter()
            .enumerate()
            .all(|(i, &b)| b == byte(g, i))
    })
}

/// Whether the `len` bytes at `ptr` (a device slot's address, as a `usize` that a
/// stream's closure can carry) begin with full batch `seq` ([`is_batch`]).
///
/// # Safety
///
/// `ptr` must point to `len` bytes that stay allocated for the whole call (a device slot
/// of a pipeline that outlives the read). They need not be quiescent: where the fencing
/// under test is broken, the copy thread may be writing them, which is what the callers
/// detect (the bytes are plain `u8`, any value is valid).
pub unsafe fn holds(
    ptr: usize,
    len: usize,
    seq: u64,
    per_batch: usize,
    sample_bytes: usize,
) -> bool {
    // SAFETY: `len` bytes at `ptr` stay allocated for this call (the caller's contract);
    // any bit pattern is a valid `u8`.
    let bytes = unsafe { std::slice::from_raw_parts(ptr as *const u8, len) };
    is_batch(bytes, seq, per_batch, sample_bytes)
}

/// Pops every batch to the end of the stream, each checked ([`check_batch`]) as a full
/// batch of `per_batch` samples of `sample_bytes`; returns how many there were.
pub fn check_to_end(pipeline: &mut Pipeline, per_batch: usize, sample_bytes: usize) -> u64 {
    let mut n = 0;
    while let Some(b) = pipeline.pop().unwrap() {
        check_batch(b.bytes(), b.seq(), per_batch, sample_bytes, per_batch);
        n += 1;
    }
    n
}

/// What the test decoder does on one global sample.
#[derive(Clone, Copy, Debug, Default)]
pub enum Fault {
    #[default]
    None,
    /// Return an error on this global sample.
    FailAt(u64),
    /// Panic on this global sample.
    PanicAt(u64),
}

/// Writes `byte(g, i)` for sample `g`; optionally sleeps on some samples and fails or
/// panics on one.
#[derive(Default)]
pub struct TestDecoder {
    pub fault: Fault,
    /// Every `delay_every`-th sample (by a hash of g) sleeps `delay`.
    pub delay_every: u64,
    pub delay: Duration,
    /// Sleep before every sample (for shutdown tests).
    pub always_sleep: Duration,
    pub decoded: AtomicU64,
}

impl Decode for TestDecoder {
    type Sample = u64;

    fn decode(&self, g: u64, out: &mut [u8]) -> Result<(), DecodeError> {
        if !self.always_sleep.is_zero() {
            std::thread::sleep(self.always_sleep);
        }
        if self.delay_every > 0 && (byte(g, 7) as u64).is_multiple_of(self.delay_every) {
            std::thread::sleep(self.delay);
        }
        match self.fault {
            Fault::FailAt(f) if f == g => {
                return Err(DecodeError::new(format!("sample {g} is corrupt")))
            }
            Fault::PanicAt(p) if p == g => panic!("decoder bug on sample {g}"),
            _ => {}
        }
        for (i, b) in out.iter_mut().enumerate() {
            *b = byte(g, i);
        }
        self.decoded.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

pub fn decoder() -> TestDecoder {
    TestDecoder::default()
}

/// A bound on anything that must not hang; tests fail past it.
pub const BOUND: Duration = Duration::from_secs(20);

/// A gate that stages wait at until the test opens it, and that tells the test when a stage
/// has arrived: slow stages driven by the test, not by sleeps.
#[derive(Clone, Default)]
pub struct Gate(std::sync::Arc<(std::sync::Mutex<(bool, u64)>, std::sync::Condvar)>);

impl Gate {
    pub fn new() -> Self {
        Gate::default()
    }

    /// Counts an arrival, then blocks until the gate is open.
    pub fn pass(&self) {
        let (lock, cv) = &*self.0;
        let mut state = lock.lock().unwrap();
        state.1 += 1;
        cv.notify_all();
        while !state.0 {
            state = cv.wait(state).unwrap();
        }
    }

    /// Blocks until `n` stages have arrived (failing past [`BOUND`]).
    pub fn arrived(&self, n: u64) {
        let (lock, cv) = &*self.0;
        let mut state = lock.lock().unwrap();
        let start = std::time::Instant::now();
        while state.1 < n {
            assert!(start.elapsed() < BOUND, "only {} of {n} arrived", state.1);
            state = cv.wait_timeout(state, BOUND).unwrap().0;
        }
    }

    /// Opens the gate for good.
    pub fn open(&self) {
        let (lock, cv) = &*self.0;
        lock.lock().unwrap().0 = true;
        cv.notify_all();
    }
}

/// The test decoder, each decode waiting at `gate` first.
pub struct GatedDecoder {
    pub gate: Gate,
    pub inner: TestDecoder,
}

impl Decode for GatedDecoder {
    type Sample = u64;

    fn decode(&self, g: u64, out: &mut [u8]) -> Result<(), DecodeError> {
        self.gate.pass();
        self.inner.decode(g, out)
    }
}

/// Runs this test binary's ignored test `name` in a process of its own, with `env` set,
/// and returns whether it passed and what it printed. A child that runs past [`BOUND`] is
/// killed and counts as failed (it hung). For tests that change process-wide state (the
/// environment, a stream that failed) or that would hang the whole binary before a fix.
pub fn run_child(name: &str, env: &[(&str, &str)]) -> (bool, String) {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = std::process::Command::new(exe)
        .args([
            "--exact",
            name,
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the test binary starts");
    let start = std::time::Instant::now();
    let mut hung = false;
    while child.try_wait().expect("the child's status").is_none() {
        if start.elapsed() > BOUND {
            let _ = child.kill();
            hung = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("the child's output");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success() && !hung, text)
}
