//! The `protocol` property: an arbitrary script of consumer operations on the cpu backend,
//! with injected copy delays, copy failures, decode failures and panics, source panics and
//! stalls, checked against a small reference model:
//!
//! - every delivered batch has the right sequence, sample count, length and bytes, and
//!   keeps them while it is held (host-side via `bytes()`, and stream-side: a check run
//!   on a user stream after `wait_on` sees the right bytes, which only holds if the slot's
//!   reuse really waits for the release fence);
//! - the failure the script injected is reported exactly where the model says (after
//!   every earlier batch), and `Stopped` after it; the end comes as `None`, repeatedly;
//! - nothing hangs: `pop` runs under a pop timeout and a `PopTimeout` where the model
//!   says a batch is due is a failure; a `pop` that must wait for a held slot is checked
//!   with `try_pop` (it must say `NotReady`); dropping the pipeline is timed;
//! - no slot leaks: after every step, a device slot `LEASED` by a batch already handed
//!   out belongs to a batch the script still holds, and the batch counter agrees.
//!
//! Shared by `fuzz/fuzz_targets/protocol.rs` and `tests/prop_protocol.rs` via `#[path]`.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arbitrary::{Arbitrary, Unstructured};
use pinring::{
    decode_fn, Batch, Config, CpuEvent, CpuOptions, CpuStream, DecodeError, DeviceState, Error,
    Fence, LastBatch, Pipeline, StopHandle, TryPop,
};

/// Payload prefix of the panics this harness injects (a fuzz target's panic hook lets
/// these through and aborts on any other).
pub const INJECTED: &str = "pinring-fuzz injected panic";

/// Keeps the panics this harness injects quiet: installs (once) a panic hook that lets
/// them pass and hands every other panic to the hook that was there before (libFuzzer's
/// aborts, so an injected panic, caught by the pipeline, must not reach it).
pub fn quiet_injected_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let payload = info.payload();
            let message = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("");
            if !message.starts_with(INJECTED) {
                previous(info);
            }
        }));
    });
}

/// How long `pop` may wait for a batch the model says is due.
const POP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long dropping the pipeline may take (its shutdown timeout is 1 s).
const DROP_BOUND: Duration = Duration::from_secs(3);

/// A failure to inject into the decoder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeFault {
    /// Batch whose sample fails.
    pub seq: u64,
    /// Index of the failing sample in that batch (`< batch_size`).
    pub sample: usize,
    /// Panic instead of returning an error.
    pub panic: bool,
}

/// A release fence, as the script asks for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FenceForm {
    /// `Fence::Sync` (the harness synchronizes the user stream first if it read the batch).
    Sync,
    /// `Fence::Event` of an event just recorded on the user stream.
    EventRecorded,
    /// `Fence::Event` of a never-recorded event (stream synchronized first if needed).
    EventFresh,
    /// `Fence::Stream` on the user stream.
    Stream,
}

/// One consumer step. `pick` chooses a held batch (modulo how many are held).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Pop,
    TryPop,
    Release {
        pick: u8,
        fence: FenceForm,
    },
    ReleaseOnThread {
        pick: u8,
        fence: FenceForm,
        join: bool,
    },
    /// Drops the batch: fenced on its stream if bound, conservatively if not.
    Drop {
        pick: u8,
    },
    /// `wait_on(stream)` then a check of the bytes run on the stream.
    WaitOnCheck {
        pick: u8,
    },
    /// `synchronize()` then a host-side check of the bytes.
    Synchronize {
        pick: u8,
    },
    /// A "kernel" on the user stream (delays every fence recorded after it).
    StreamSleep {
        micros: u16,
    },
    /// Checks the bytes of every held batch.
    CheckHeld,
    /// Joins the threads still releasing batches.
    JoinThreads,
    Stop,
    DropPipeline,
}

/// A pipeline set-up and a consumer script.
#[derive(Debug, Clone)]
pub struct Script {
    pub batch_size: usize,
    pub sample_bytes: usize,
    pub host_slots: usize,
    pub device_slots: usize,
    pub decode_threads: usize,
    pub spin: Duration,
    pub last_batch: LastBatch,
    pub total_samples: u32,
    pub copy_delay: Option<(Duration, Duration)>,
    pub delay_seed: u64,
    pub fail_copy_at: Option<u64>,
    pub decode_fault: Option<DecodeFault>,
    /// The source panics when it would yield this sample id.
    pub source_panic_at: Option<u32>,
    /// The source sleeps this long before yielding this sample id.
    pub source_stall: Option<(u32, Duration)>,
    /// Most a decode sleeps (some samples sleep a hashed part of it).
    pub decode_delay: Duration,
    pub ops: Vec<Op>,
}

impl Script {
    /// Reads a script from fuzz bytes: a 16-byte header, then operations. Each draw takes
    /// the input's next byte (zero past the end), so a seed means what it meant when it
    /// was written. `panics` allows injected panics (decoder and source).
    pub fn decode(u: &mut Unstructured<'_>, panics: bool) -> arbitrary::Result<Self> {
        let batch_size = 1 + usize::from(u8::arbitrary(u)? % 5);
        let sample_bytes = 1 + usize::from(u8::arbitrary(u)? % 48);
        let host_slots = 1 + usize::from(u8::arbitrary(u)? % 5);
        let device_slots = 1 + usize::from(u8::arbitrary(u)? % 4);
        let x = u8::arbitrary(u)?;
        let decode_threads = 1 + usize::from(x % 3);
        let spin = [0, 5, 30][usize::from(x >> 2) % 3];
        let spin = Duration::from_micros(spin);
        let last_batch = if x & 0x10 == 0 {
            LastBatch::Partial
        } else {
            LastBatch::Drop
        };
        let total_samples = u32::from(u8::arbitrary(u)? % 41);
        let x = u8::arbitrary(u)?;
        let copy_delay = (x & 1 == 1).then(|| {
            (
                Duration::ZERO,
                Duration::from_micros(u64::from(x >> 1) * 16),
            )
        });
        let delay_seed = u64::from(u8::arbitrary(u)?);
        let x = u8::arbitrary(u)?;
        let fail_copy_at = (x & 0x80 != 0).then_some(u64::from(x & 0x0f));
        let (x, y) = (u8::arbitrary(u)?, u8::arbitrary(u)?);
        // Often just after the copy failure, so that the two race: the earlier must win.
        let seq = match (fail_copy_at, x & 0x40 != 0) {
            (Some(k), true) => k + u64::from(x & 3),
            _ => u64::from(x & 0x0f),
        };
        let decode_fault = (x & 0x80 != 0).then_some(DecodeFault {
            seq,
            sample: usize::from(y) % batch_size,
            panic: panics && y & 0x80 != 0,
        });
        let x = u8::arbitrary(u)?;
        let source_panic_at = (panics && x & 0xc0 == 0xc0).then_some(u32::from(x & 0x3f));
        let x = u8::arbitrary(u)?;
        let source_stall =
            (x & 0x80 != 0).then_some((u32::from(x & 0x3f), Duration::from_millis(20)));
        let decode_delay = Duration::from_micros(u64::from(u8::arbitrary(u)? % 64) * 8);
        let mut ops = Vec::new();
        while !u.is_empty() && ops.len() < 64 {
            let x = u8::arbitrary(u)?;
            let pick = u8::arbitrary(u)?;
            let fence = [
                FenceForm::Sync,
                FenceForm::EventRecorded,
                FenceForm::EventFresh,
                FenceForm::Stream,
            ][usize::from(pick >> 6)];
            ops.push(match x % 32 {
                0..=11 => Op::Pop,
                12 | 13 => Op::TryPop,
                14..=17 => Op::Release { pick, fence },
                18 | 19 => Op::ReleaseOnThread {
                    pick,
                    fence,
                    join: pick & 0x20 != 0,
                },
                20 | 21 => Op::Drop { pick },
                22 | 23 => Op::WaitOnCheck { pick },
                24 => Op::Synchronize { pick },
                25 => Op::StreamSleep {
                    micros: u16::from(pick) * 8,
                },
                26 => Op::CheckHeld,
                27 => Op::JoinThreads,
                28 => Op::Stop,
                29 => Op::DropPipeline,
                _ => Op::Pop,
            });
        }
        Ok(Script {
            batch_size,
            sample_bytes,
            host_slots,
            device_slots,
            decode_threads,
            spin,
            last_batch,
            total_samples,
            copy_delay,
            delay_seed,
            fail_copy_at,
            decode_fault,
            source_panic_at,
            source_stall,
            decode_delay,
            ops,
        })
    }
}

/// A script with injected panics allowed (what the fuzz target and the proptest twin run).
impl<'a> Arbitrary<'a> for Script {
    fn arbitrary(u: &mut Unstructured<'a>) -> arbitrary::Result<Self> {
        Script::decode(u, true)
    }
}

/// The byte at position `i` of sample `id`'s decoding: depends on both.
fn byte(id: u32, i: usize) -> u8 {
    let x = (u64::from(id) << 32 | i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 56) as u8
}

fn fill(id: u32, out: &mut [u8]) {
    for (i, b) in out.iter_mut().enumerate() {
        *b = byte(id, i);
    }
}

/// How the model says the stream of batches ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Terminal {
    End,
    Source { sample: usize },
    Decode { sample: usize, panic: bool },
    Copy,
}

/// The reference model: which batches come, and what follows them.
#[derive(Debug)]
struct Model {
    per: usize,
    sample_bytes: usize,
    total: u32,
    /// Sequence at which the terminal comes (batches `0..first_bad` come before it).
    first_bad: u64,
    terminal: Terminal,
}

impl Model {
    fn new(s: &Script) -> Self {
        let per = s.batch_size;
        let total = u64::from(s.total_samples);
        let full = total / per as u64;
        let batches = match s.last_batch {
            LastBatch::Drop => full,
            _ => full + u64::from(total % per as u64 != 0),
        };
        // (seq, rank at equal seq, terminal): the source fails before a batch is decoded,
        // a decode before its copy.
        let mut ends = vec![(batches, 3, Terminal::End)];
        if let Some(id) = s.source_panic_at.filter(|&id| u64::from(id) < total) {
            let sample = id as usize % per;
            ends.push((u64::from(id) / per as u64, 0, Terminal::Source { sample }));
        }
        if let Some(f) = s.decode_fault {
            let id = f.seq * per as u64 + f.sample as u64;
            if f.seq < batches && id < total {
                ends.push((
                    f.seq,
                    1,
                    Terminal::Decode {
                        sample: f.sample,
                        panic: f.panic,
                    },
                ));
            }
        }
        if let Some(k) = s.fail_copy_at.filter(|&k| k < batches) {
            ends.push((k, 2, Terminal::Copy));
        }
        let (first_bad, _, terminal) = ends.into_iter().min_by_key(|e| (e.0, e.1)).unwrap();
        Model {
            per,
            sample_bytes: s.sample_bytes,
            total: s.total_samples,
            first_bad,
            terminal,
        }
    }

    fn samples(&self, seq: u64) -> usize {
        let start = seq * self.per as u64;
        (u64::from(self.total) - start).min(self.per as u64) as usize
    }

    fn bytes(&self, seq: u64) -> Vec<u8> {
        let n = self.samples(seq);
        let mut out = vec![0; n * self.sample_bytes];
        for (j, chunk) in out.chunks_exact_mut(self.sample_bytes).enumerate() {
            fill((seq * self.per as u64) as u32 + j as u32, chunk);
        }
        out
    }

    /// Whether batch `seq` (or the terminal at `seq`) needs a free device slot.
    fn needs_slot(&self, seq: u64) -> bool {
        seq < self.first_bad || (seq == self.first_bad && self.terminal == Terminal::Copy)
    }

    /// Whether `error` is the terminal failure the model expects.
    fn is_terminal_error(&self, error: &Error) -> bool {
        let k = self.first_bad;
        match (self.terminal, error) {
            (Terminal::Source { sample }, Error::SourcePanic { seq, sample: s, .. }) => {
                (*seq, *s) == (k, sample)
            }
            (
                Terminal::Decode {
                    sample,
                    panic: false,
                },
                Error::Decode { seq, sample: s, .. },
            ) => (*seq, *s) == (k, sample),
            (
                Terminal::Decode {
                    sample,
                    panic: true,
                },
                Error::DecoderPanic {
                    seq,
                    sample: s,
                    message,
                },
            ) => (*seq, *s) == (k, sample) && message.starts_with(INJECTED),
            (Terminal::Copy, Error::Backend { message, .. }) => {
                message.contains(&format!("batch {k}"))
            }
            _ => false,
        }
    }
}

/// What a passing run exercised (for coverage checks).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Summary {
    /// Batches handed out and checked.
    pub batches: u64,
    /// The terminal the consumer saw: "end", "source", "decode", "decode panic", "copy",
    /// "stopped", or "" if none.
    pub terminal: &'static str,
    /// Pops answered by `try_pop` because the next slot was held (`NotReady` checked).
    pub held_slot_checks: u64,
    /// Checks run on the user stream after `wait_on`.
    pub stream_reads: u64,
    /// Releases done on other threads.
    pub thread_releases: u64,
    /// Batches still held when the pipeline was dropped.
    pub held_past_drop: u64,
}

/// A batch the script holds.
struct Held {
    batch: Batch,
    /// A check was enqueued on the user stream that reads the batch's bytes.
    stream_reads: bool,
}

/// How the consumer side finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finished {
    End,
    /// The terminal error was delivered, or `Stopped` was.
    Stopped,
}

struct Run<'s> {
    script: &'s Script,
    model: Model,
    pipeline: Option<Pipeline>,
    stop: StopHandle,
    stream: CpuStream,
    /// Failures seen by checks running on the user stream.
    stream_failures: Arc<Mutex<Vec<String>>>,
    held: Vec<Held>,
    /// Batches being released on other threads: (seq, thread).
    pending: Vec<(u64, JoinHandle<Result<(), String>>)>,
    /// Batches handed out so far (the next expected sequence).
    next: u64,
    finished: Option<Finished>,
    stopped: bool,
    summary: Summary,
}

/// Runs `script` and checks it against the model. `Err` describes the first violation.
pub fn run(script: &Script) -> Result<Summary, String> {
    quiet_injected_panics();
    let model = Model::new(script);
    let mut options = CpuOptions::default();
    if let Some((min, max)) = script.copy_delay {
        options = options.copy_delay(min, max, script.delay_seed);
    }
    if let Some(k) = script.fail_copy_at {
        options = options.fail_copy_at(k);
    }
    let config = Config::builder()
        .batch_size(script.batch_size)
        .bytes_per_sample(script.sample_bytes)
        .host_slots(script.host_slots)
        .device_slots(script.device_slots)
        .decode_threads(script.decode_threads)
        .spin(script.spin)
        .last_batch(script.last_batch)
        .pop_timeout(POP_TIMEOUT)
        .shutdown_timeout(Duration::from_secs(1))
        .backend::<pinring::Cpu>(options)
        .build()
        .map_err(|e| format!("config rejected: {e}"))?;

    let per = script.batch_size as u64;
    let fault = script
        .decode_fault
        .map(|f| (f.seq * per + f.sample as u64, f.panic));
    let delay = script.decode_delay;
    let decoder = decode_fn(move |id: u32, out: &mut [u8]| {
        if !delay.is_zero() && byte(id, 0) & 3 == 0 {
            std::thread::sleep(delay.mul_f64(f64::from(byte(id, 1)) / 255.0));
        }
        match fault {
            Some((at, true)) if u64::from(id) == at => panic!("{INJECTED}: decode of {id}"),
            Some((at, false)) if u64::from(id) == at => {
                return Err(DecodeError::new(format!("injected failure at sample {id}")))
            }
            _ => {}
        }
        fill(id, out);
        Ok(())
    });
    let (panic_at, stall) = (script.source_panic_at, script.source_stall);
    let source = (0..script.total_samples).inspect(move |&id| {
        if panic_at == Some(id) {
            panic!("{INJECTED}: source at {id}");
        }
        if let Some((at, d)) = stall
            && at == id
        {
            std::thread::sleep(d);
        }
    });
    let pipeline = Pipeline::new(config, decoder, source).map_err(|e| format!("start: {e}"))?;
    let mut run = Run {
        script,
        model,
        stop: pipeline.stop_handle(),
        pipeline: Some(pipeline),
        stream: CpuStream::new(),
        stream_failures: Arc::new(Mutex::new(Vec::new())),
        held: Vec::new(),
        pending: Vec::new(),
        next: 0,
        finished: None,
        stopped: false,
        summary: Summary::default(),
    };
    for (i, op) in script.ops.iter().enumerate() {
        run.step(*op)
            .and_then(|()| run.check_slots())
            .map_err(|e| format!("step {i} ({op:?}): {e}\nmodel {:?}", run.model))?;
    }
    run.finish()
        .map_err(|e| format!("at the end: {e}\nmodel {:?}", run.model))?;
    run.summary.batches = run.next;
    Ok(run.summary)
}

impl Run<'_> {
    fn step(&mut self, op: Op) -> Result<(), String> {
        match op {
            Op::Pop => self.pop(),
            Op::TryPop => self.try_pop(),
            Op::Release { pick, fence } => match self.take(pick) {
                Some(held) => {
                    let expected = self.model.bytes(held.batch.seq());
                    release(held, fence, &self.stream, &expected)
                }
                None => Ok(()),
            },
            Op::ReleaseOnThread { pick, fence, join } => {
                let Some(held) = self.take(pick) else {
                    return Ok(());
                };
                let seq = held.batch.seq();
                let expected = self.model.bytes(seq);
                let stream = self.stream.clone();
                self.summary.thread_releases += 1;
                let thread = std::thread::spawn(move || release(held, fence, &stream, &expected));
                self.pending.push((seq, thread));
                if join {
                    self.join_threads()?;
                }
                Ok(())
            }
            Op::Drop { pick } => {
                drop(self.take(pick));
                Ok(())
            }
            Op::WaitOnCheck { pick } => {
                let Some(i) = self.index(pick) else {
                    return Ok(());
                };
                let held = &mut self.held[i];
                let seq = held.batch.seq();
                held.batch
                    .wait_on(&self.stream)
                    .map_err(|e| format!("wait_on of batch {seq}: {e}"))?;
                held.stream_reads = true;
                self.summary.stream_reads += 1;
                let expected = self.model.bytes(seq);
                let ptr = held.batch.device_ptr();
                let failures = self.stream_failures.clone();
                self.stream.enqueue(move || {
                    // SAFETY: the batch is leased until a release whose fence covers this
                    // stream (Fence::Stream on it, an event recorded on it after this op, a
                    // Sync only after synchronizing it, or a drop bound to it), so no copy
                    // writes the slot while this op reads it; `expected.len()` is the
                    // batch's length, inside its slot.
                    let got = unsafe { std::slice::from_raw_parts(ptr.as_ptr(), expected.len()) };
                    if got != expected.as_slice() {
                        failures
                            .lock()
                            .unwrap()
                            .push(format!("stream-side read of batch {seq}: wrong bytes"));
                    }
                });
                Ok(())
            }
            Op::Synchronize { pick } => {
                let Some(i) = self.index(pick) else {
                    return Ok(());
                };
                let batch = &self.held[i].batch;
                batch
                    .synchronize()
                    .map_err(|e| format!("synchronize of batch {}: {e}", batch.seq()))?;
                check_bytes(batch, &self.model.bytes(batch.seq()))
            }
            Op::StreamSleep { micros } => {
                self.stream.sleep(Duration::from_micros(u64::from(micros)));
                Ok(())
            }
            Op::CheckHeld => {
                for held in &self.held {
                    check_bytes(&held.batch, &self.model.bytes(held.batch.seq()))?;
                }
                Ok(())
            }
            Op::JoinThreads => self.join_threads(),
            Op::Stop => {
                self.stop.stop();
                self.stopped = true;
                Ok(())
            }
            Op::DropPipeline => self.drop_pipeline(),
        }
    }

    fn index(&self, pick: u8) -> Option<usize> {
        (!self.held.is_empty()).then(|| usize::from(pick) % self.held.len())
    }

    fn take(&mut self, pick: u8) -> Option<Held> {
        self.index(pick).map(|i| self.held.swap_remove(i))
    }

    fn join_threads(&mut self) -> Result<(), String> {
        for (seq, thread) in self.pending.drain(..) {
            thread
                .join()
                .map_err(|_| format!("release of batch {seq} on another thread panicked"))??;
        }
        Ok(())
    }

    /// Whether batch `self.next` must wait for a slot the script still holds.
    fn blocked(&self) -> bool {
        let d = self.script.device_slots as u64;
        self.model.needs_slot(self.next)
            && self.next >= d
            && (self.held.iter().any(|h| h.batch.seq() == self.next - d)
                || self.pending.iter().any(|p| p.0 == self.next - d))
    }

    fn pop(&mut self) -> Result<(), String> {
        if self.pipeline.is_none() {
            return Ok(());
        }
        if self.finished.is_none() && !self.stopped && self.blocked() {
            self.join_threads()?;
            if self.blocked() {
                // A pop would wait out its timeout: the slot is ours. Nothing may be ready.
                self.summary.held_slot_checks += 1;
                return match self.pipeline.as_mut().unwrap().try_pop() {
                    Ok(TryPop::NotReady) => Ok(()),
                    other => Err(format!(
                        "batch {}'s slot is held, yet try_pop gave {}",
                        self.next,
                        describe(&other)
                    )),
                };
            }
        }
        let got = self.pipeline.as_mut().unwrap().pop();
        let got = match got {
            Ok(Some(batch)) => Ok(TryPop::Batch(batch)),
            Ok(None) => Ok(TryPop::End),
            Err(e) => Err(e),
        };
        self.accept(got, false)
    }

    fn try_pop(&mut self) -> Result<(), String> {
        let Some(pipeline) = self.pipeline.as_mut() else {
            return Ok(());
        };
        let got = pipeline.try_pop();
        self.accept(got, true)
    }

    /// Checks what `pop` (`may_wait == false`) or `try_pop` gave against the model.
    fn accept(&mut self, got: pinring::Result<TryPop>, may_wait: bool) -> Result<(), String> {
        match self.finished {
            Some(Finished::End) => {
                return match got {
                    Ok(TryPop::End) => Ok(()),
                    other => Err(format!("after the end: {}", describe(&other))),
                }
            }
            Some(Finished::Stopped) => {
                return match got {
                    Err(Error::Stopped) => Ok(()),
                    other => Err(format!("after stopping: {}", describe(&other))),
                }
            }
            None => {}
        }
        let k = self.next;
        let due_batch = k < self.model.first_bad;
        match got {
            Ok(TryPop::Batch(batch)) if due_batch => {
                let expected = self.model.bytes(k);
                if batch.seq() != k
                    || batch.samples() != self.model.samples(k)
                    || batch.len() != expected.len()
                    || batch.slot() >= self.script.device_slots
                {
                    return Err(format!("wrong batch {batch:?}, expected seq {k}"));
                }
                check_bytes(&batch, &expected)?;
                self.next += 1;
                self.held.push(Held {
                    batch,
                    stream_reads: false,
                });
                Ok(())
            }
            Ok(TryPop::End) if !due_batch && self.model.terminal == Terminal::End => {
                self.finished = Some(Finished::End);
                self.summary.terminal = "end";
                Ok(())
            }
            Err(e) if !due_batch && self.model.is_terminal_error(&e) => {
                self.finished = Some(Finished::Stopped);
                self.summary.terminal = match self.model.terminal {
                    Terminal::Source { .. } => "source",
                    Terminal::Decode { panic: false, .. } => "decode",
                    Terminal::Decode { panic: true, .. } => "decode panic",
                    _ => "copy",
                };
                Ok(())
            }
            Ok(TryPop::NotReady) if may_wait => Ok(()),
            Err(Error::Stopped) if self.stopped => {
                self.finished = Some(Finished::Stopped);
                self.summary.terminal = "stopped";
                Ok(())
            }
            other => Err(format!(
                "expected {} at seq {k}, got {}",
                if due_batch {
                    "a batch".to_owned()
                } else {
                    format!("{:?}", self.model.terminal)
                },
                describe(&other)
            )),
        }
    }

    /// No slot leaks: a slot LEASED by a batch already handed out belongs to a batch the
    /// script holds (or one a thread is releasing), and the batch counter agrees.
    fn check_slots(&self) -> Result<(), String> {
        let Some(pipeline) = &self.pipeline else {
            return Ok(());
        };
        let stats = pipeline.stats();
        if stats.batches != self.next {
            return Err(format!(
                "stats count {} batches, {} were handed out",
                stats.batches, self.next
            ));
        }
        for (d, &(seq, state)) in stats.device_slots.iter().enumerate() {
            if seq >= self.next {
                continue;
            }
            let ours = self.held.iter().any(|h| h.batch.seq() == seq)
                || self.pending.iter().any(|p| p.0 == seq);
            match state {
                DeviceState::Leased if !ours => {
                    return Err(format!(
                        "device slot {d} is still LEASED by batch {seq}, which was released"
                    ))
                }
                DeviceState::Free => {
                    return Err(format!(
                        "device slot {d} is still FREE({seq}), yet batch {seq} was handed out"
                    ))
                }
                DeviceState::Copying => {
                    return Err(format!(
                        "device slot {d} is COPYING batch {seq}, which was handed out"
                    ))
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn drop_pipeline(&mut self) -> Result<(), String> {
        if let Some(pipeline) = self.pipeline.take() {
            self.summary.held_past_drop += (self.held.len() + self.pending.len()) as u64;
            let t = Instant::now();
            drop(pipeline);
            if t.elapsed() > DROP_BOUND {
                return Err(format!("dropping the pipeline took {:?}", t.elapsed()));
            }
        }
        Ok(())
    }

    /// Releases everything, checks for leaks, drops the pipeline, and collects the
    /// stream-side checks.
    fn finish(&mut self) -> Result<(), String> {
        self.join_threads()?;
        for held in std::mem::take(&mut self.held) {
            check_bytes(&held.batch, &self.model.bytes(held.batch.seq()))?;
            drop(held);
        }
        self.check_slots()?;
        // With every batch back and no failure or stop, the pipeline delivers what is due.
        if self.pipeline.is_some() && self.finished.is_none() && !self.stopped {
            for _ in 0..2 {
                self.pop()?;
                self.held.clear();
                self.check_slots()?;
            }
        }
        self.drop_pipeline()?;
        self.stream.synchronize().map_err(|e| e.to_string())?;
        let failures = self.stream_failures.lock().unwrap();
        if let Some(first) = failures.first() {
            return Err(first.clone());
        }
        Ok(())
    }
}

/// Releases `held` with the fence `form`, keeping the promise each fence makes: reads
/// enqueued on `stream` are covered before the slot may be reused.
fn release(held: Held, form: FenceForm, stream: &CpuStream, expected: &[u8]) -> Result<(), String> {
    check_bytes(&held.batch, expected)?;
    let seq = held.batch.seq();
    let result = match form {
        FenceForm::Sync | FenceForm::EventFresh => {
            if held.stream_reads {
                stream.synchronize().map_err(|e| e.to_string())?;
            }
            if form == FenceForm::Sync {
                held.batch.release(Fence::Sync)
            } else {
                held.batch.release(Fence::Event(&CpuEvent::new()))
            }
        }
        FenceForm::EventRecorded => {
            let event = CpuEvent::new();
            stream.record(&event);
            held.batch.release(Fence::Event(&event))
        }
        FenceForm::Stream => held.batch.release(Fence::Stream(stream)),
    };
    result.map_err(|e| format!("release of batch {seq} failed: {}", e.error))
}

fn check_bytes(batch: &Batch, expected: &[u8]) -> Result<(), String> {
    let got = batch.bytes();
    if got == expected {
        return Ok(());
    }
    let at = got.iter().zip(expected).position(|(a, b)| a != b);
    Err(format!(
        "batch {} has wrong bytes (len {} vs {}, first difference at {at:?})",
        batch.seq(),
        got.len(),
        expected.len()
    ))
}

fn describe(got: &pinring::Result<TryPop>) -> String {
    match got {
        Ok(TryPop::Batch(b)) => format!("batch {}", b.seq()),
        Ok(TryPop::End) => "the end".into(),
        Ok(TryPop::NotReady) => "not ready".into(),
        Err(e) => format!("error {e:?}"),
    }
}
