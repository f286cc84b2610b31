//! cpu-backend streams: a thread running an ordered queue of operations, like a CUDA
//! stream runs its work in order.

use std::collections::VecDeque;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use super::event::{CpuEvent, EventState, Mark};
use super::failure::{Origin, StreamFailure};
use crate::backend::contract::CopyWaker;
use crate::backend::copy_count::CopyCount;
use crate::error::{panic_message, Error, Result};
use crate::sync::native::{
    sleep, Arc, AtomicU64, Builder, Condvar, Instant, Mutex, MutexGuard, Ordering, Weak,
};

/// One queued operation.
pub(super) enum Op {
    /// Copies `len` bytes (the copy stream's H2D).
    Copy {
        src: *const u8,
        dst: *mut u8,
        len: usize,
    },
    /// Completes `epoch` of `event`.
    Signal { event: Arc<EventState>, epoch: u64 },
    /// Holds the stream until `mark` has completed (and fails the stream if the mark was
    /// made after its own stream failed).
    Wait { mark: Mark },
    /// Fills `len` bytes at `dst` with `byte` (the poison mode's fill of a device slot).
    Fill { dst: *mut u8, len: usize, byte: u8 },
    /// Marks batches before `upto` copied: publishes it in `counter` (a Release store: the
    /// copies before it in the stream are done; then the waiters in `Batch::synchronize`
    /// are woken) and wakes the copy thread.
    Complete { counter: Arc<CopyCount>, upto: u64 },
    /// Sleeps (an injected delay, or a stand-in for a long kernel).
    Sleep(Duration),
    /// Runs the caller's closure (a stand-in for a kernel).
    Call(Box<dyn FnOnce() + Send>),
}

// SAFETY: the raw pointers in `Copy` and `Fill` point into the host ring and device slots,
// which outlive the streams' queues (the backend drains the copy stream, which waits on
// every poison fill through the slots' fences, or leaks both, before freeing them), and
// the slot protocol gives the stream exclusive use of the ranges while the op is queued.
// Every other variant is `Send`.
unsafe impl Send for Op {}

struct Queue {
    ops: VecDeque<Op>,
    /// Ops pushed so far: the next op's index.
    pushed: u64,
    /// An op was taken from `ops` and has not finished.
    running: bool,
    /// Every handle is gone: the thread ends once the queue drains.
    closed: bool,
}

struct StreamState {
    queue: Mutex<Queue>,
    /// Signalled when ops arrive or the queue closes (the stream thread waits) and when
    /// the queue drains (`synchronize` waits).
    cv: Condvar,
    /// Called after every Signal and Complete op (the copy stream wakes the copy thread
    /// with it).
    on_signal: Option<CopyWaker>,
    /// Nanoseconds this stream spent in copies; Relaxed (a statistic, orders nothing).
    copy_ns: AtomicU64,
    /// The stream's first failure (a closure that panicked, or a wait on a failed record).
    failure: Arc<StreamFailure>,
}

impl Queue {
    /// Appends `op`; returns its index.
    fn push(&mut self, op: Op) -> u64 {
        self.ops.push_back(op);
        self.pushed += 1;
        self.pushed - 1
    }
}

/// A cpu-backend stream: a thread running the operations enqueued on it, in order (the
/// stand-in for a CUDA stream, and the place a cpu "kernel" runs).
///
/// Cloning gives another handle to the same stream; the thread ends once every handle is
/// dropped and the queue has drained.
#[derive(Clone)]
pub struct CpuStream {
    handle: Arc<StreamHandle>,
}

pub(super) struct StreamHandle {
    state: Arc<StreamState>,
    /// Recorded by a conservative fence (a dropped unbound batch): marks everything queued
    /// here so far.
    marker: Arc<EventState>,
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        lock(&self.state.queue).closed = true;
        self.state.cv.notify_all();
    }
}

/// The user streams alive, for the conservative fence of a dropped unbound batch.
static USER_STREAMS: Mutex<Vec<Weak<StreamHandle>>> = Mutex::new(Vec::new());

impl CpuStream {
    /// Starts a stream thread.
    ///
    /// # Panics
    /// If the system cannot start a thread.
    pub fn new() -> Self {
        let stream = Self::spawn("pinring-cpu-stream", None, false)
            .expect("could not start a cpu stream thread");
        let mut streams = lock(&USER_STREAMS);
        streams.retain(|w| w.strong_count() > 0);
        streams.push(Arc::downgrade(&stream.handle));
        stream
    }

    /// A stream for the backend's own use (not a user stream).
    /// `batch`: the thread runs as `SCHED_BATCH` (src/thread_policy.rs).
    pub(super) fn spawn(
        name: &str,
        on_signal: Option<CopyWaker>,
        batch: bool,
    ) -> std::io::Result<Self> {
        let state = Arc::new(StreamState {
            queue: Mutex::new(Queue {
                ops: VecDeque::with_capacity(64),
                pushed: 0,
                running: false,
                closed: false,
            }),
            cv: Condvar::new(),
            on_signal,
            copy_ns: AtomicU64::new(0),
            failure: Arc::new(StreamFailure::default()),
        });
        let thread_state = state.clone();
        Builder::new().name(name.into()).spawn(move || {
            crate::thread_policy::yield_at_wakeup(batch);
            run(&thread_state)
        })?;
        Ok(CpuStream {
            handle: Arc::new(StreamHandle {
                state,
                marker: Arc::new(EventState::new()),
            }),
        })
    }

    /// Time this stream has spent in copies so far.
    pub(super) fn copy_time(&self) -> Duration {
        Duration::from_nanos(self.handle.state.copy_ns.load(Ordering::Relaxed))
    }

    pub(super) fn push(&self, op: Op) {
        let state = &self.handle.state;
        lock(&state.queue).push(op);
        state.cv.notify_all();
    }

    /// Whether `other` is a handle to this same stream.
    pub(super) fn same_stream(&self, other: &CpuStream) -> bool {
        Arc::ptr_eq(&self.handle, &other.handle)
    }

    /// Enqueues `f`, to run on the stream thread after everything enqueued before it.
    pub fn enqueue(&self, f: impl FnOnce() + Send + 'static) {
        self.push(Op::Call(Box::new(f)));
    }

    /// Enqueues a sleep (a stand-in for a long kernel).
    pub fn sleep(&self, d: Duration) {
        self.push(Op::Sleep(d));
    }

    /// Records `event` here: it completes once everything enqueued so far has run.
    pub fn record(&self, event: &CpuEvent) {
        self.record_mark(&event.0);
    }

    /// Records `event` here; returns the record, to wait for.
    pub(super) fn record_mark(&self, event: &Arc<EventState>) -> Mark {
        let state = &self.handle.state;
        let mut queue = lock(&state.queue);
        let origin = Origin {
            failure: state.failure.clone(),
            op: queue.pushed,
        };
        let epoch = event.record(origin.clone());
        queue.push(Op::Signal {
            event: event.clone(),
            epoch,
        });
        drop(queue);
        state.cv.notify_all();
        Mark {
            event: event.clone(),
            epoch,
            origin: Some(origin),
        }
    }

    /// A new event recorded here.
    pub fn record_new(&self) -> CpuEvent {
        let event = CpuEvent::new();
        self.record(&event);
        event
    }

    /// Makes later work on this stream wait for `event`'s latest record as of this call
    /// (stream-side). A record made by a stream that had failed fails this stream too.
    pub fn wait_event(&self, event: &CpuEvent) {
        self.wait_mark(Mark::latest(&event.0));
    }

    /// Makes later work on this stream wait for `mark` (stream-side).
    pub(super) fn wait_mark(&self, mark: Mark) {
        self.push(Op::Wait { mark });
    }

    /// Blocks until everything enqueued so far has run. A closure that panicked on this
    /// stream (or a wait on a record of a stream that had failed) fails the stream for good,
    /// as a kernel fault does on CUDA: this returns [`Error::Backend`] saying why (the
    /// stream still runs what is queued, so nothing waiting on it hangs).
    pub fn synchronize(&self) -> Result<()> {
        let state = &self.handle.state;
        let mut queue = lock(&state.queue);
        while !queue.ops.is_empty() || queue.running {
            queue = state.cv.wait(queue).unwrap_or_else(|e| e.into_inner());
        }
        drop(queue);
        match self.failure() {
            Some(why) => Err(Error::Backend {
                call: "CpuStream::synchronize",
                message: why.to_owned(),
                source: None,
            }),
            None => Ok(()),
        }
    }

    /// Why the stream failed, if it did.
    pub(super) fn failure(&self) -> Option<&str> {
        self.handle.state.failure.why()
    }

    /// As [`synchronize`](Self::synchronize), giving up at `deadline`; true if drained.
    pub(super) fn synchronize_until(&self, deadline: Instant) -> bool {
        let state = &self.handle.state;
        let mut queue = lock(&state.queue);
        while !queue.ops.is_empty() || queue.running {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            queue = state
                .cv
                .wait_timeout(queue, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        true
    }

    /// Records every live user stream's marker: the fences that together cover all work
    /// queued on user streams so far (the conservative fence). Never blocks the host.
    pub(super) fn mark_all_user_streams() -> Vec<Mark> {
        let streams: Vec<Arc<StreamHandle>> = {
            let streams = lock(&USER_STREAMS);
            streams.iter().filter_map(Weak::upgrade).collect()
        };
        streams
            .into_iter()
            .map(|handle| {
                let marker = handle.marker.clone();
                CpuStream { handle }.record_mark(&marker)
            })
            .collect()
    }
}

impl Default for CpuStream {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CpuStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CpuStream")
    }
}

fn run(state: &StreamState) {
    let mut queue = lock(&state.queue);
    // The index of the next op to run: ops run in the order they were pushed.
    let mut next_op = 0u64;
    loop {
        let Some(op) = queue.ops.pop_front() else {
            if queue.closed {
                return;
            }
            queue = state.cv.wait(queue).unwrap_or_else(|e| e.into_inner());
            continue;
        };
        let index = next_op;
        next_op += 1;
        queue.running = true;
        drop(queue);
        let signalled = matches!(op, Op::Signal { .. } | Op::Complete { .. });
        match op {
            Op::Copy { src, dst, len } => {
                let t = Instant::now();
                // SAFETY: see `Op`'s Send impl: both ranges are valid and owned by this
                // stream for the op's duration under the slot protocol, and they lie in
                // different allocations, so they do not overlap.
                unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
                let ns = u64::try_from(t.elapsed().as_nanos()).unwrap_or(u64::MAX);
                state.copy_ns.fetch_add(ns, Ordering::Relaxed);
            }
            // SAFETY: see `Op`'s Send impl: the range is valid and the stream's alone for
            // the op's duration under the slot protocol (the slot is released, its readers'
            // fences waited on before this op, and its next copy waits for this op).
            Op::Fill { dst, len, byte } => unsafe { std::ptr::write_bytes(dst, byte, len) },
            Op::Signal { event, epoch } => event.complete(epoch),
            // Release: pairs with the copy thread's Acquire load in `completed`.
            Op::Complete { counter, upto } => counter.publish(upto),
            Op::Wait { mark } => {
                mark.event.wait_for(mark.epoch);
                if let Some(why) = mark.origin.as_ref().and_then(Origin::failed) {
                    state.failure.fail(index, why.to_owned());
                }
            }
            Op::Sleep(d) => pause(d),
            Op::Call(f) => {
                // A panic is an error on this stream, not the end of its thread: the ops
                // queued after it still run, so no wait on the stream hangs.
                if let Err(payload) = catch_unwind(AssertUnwindSafe(f)) {
                    let why = format!(
                        "a closure enqueued on a CpuStream panicked: {}",
                        panic_message(&*payload)
                    );
                    state.failure.fail(index, why);
                }
            }
        }
        if signalled && let Some(waker) = &state.on_signal {
            waker.wake();
        }
        queue = lock(&state.queue);
        queue.running = false;
        if queue.ops.is_empty() {
            state.cv.notify_all();
        }
    }
}

/// Holds the stream for `d`, as a busy copy engine or kernel would: short pauses spin
/// (a sleep would last the timer slack, tens of µs, whatever was asked), long ones sleep.
fn pause(d: Duration) {
    if d >= Duration::from_micros(200) {
        sleep(d);
        return;
    }
    let start = Instant::now();
    while start.elapsed() < d {
        std::hint::spin_loop();
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
