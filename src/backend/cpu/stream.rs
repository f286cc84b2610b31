//! cpu-backend streams: a thread running an ordered queue of operations, like a CUDA
//! stream runs its work in order.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use super::event::{CpuEvent, EventState};
use crate::backend::private::CopyWaker;
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
    /// Holds the stream until `epoch` of `event` has completed.
    Wait { event: Arc<EventState>, epoch: u64 },
    /// Marks batches before `upto` copied: stores it in `counter` (Release: the copies
    /// before it in the stream are done) and wakes the copy thread.
    Complete { counter: Arc<AtomicU64>, upto: u64 },
    /// Sleeps (an injected delay, or a stand-in for a long kernel).
    Sleep(Duration),
    /// Runs the caller's closure (a stand-in for a kernel).
    Call(Box<dyn FnOnce() + Send>),
}

// SAFETY: the raw pointers in `Copy` point into the host ring and device slots, which
// outlive the copy stream's queue (the backend drains it, or leaks both, before freeing
// them), and the slot protocol gives the stream exclusive use of both ranges while the op
// is queued. Every other variant is `Send`.
unsafe impl Send for Op {}

struct Queue {
    ops: VecDeque<Op>,
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
        let stream =
            Self::spawn("pinring-cpu-stream", None).expect("could not start a cpu stream thread");
        let mut streams = lock(&USER_STREAMS);
        streams.retain(|w| w.strong_count() > 0);
        streams.push(Arc::downgrade(&stream.handle));
        stream
    }

    /// A stream for the backend's own use (not a user stream).
    pub(super) fn spawn(name: &str, on_signal: Option<CopyWaker>) -> std::io::Result<Self> {
        let state = Arc::new(StreamState {
            queue: Mutex::new(Queue {
                ops: VecDeque::with_capacity(64),
                running: false,
                closed: false,
            }),
            cv: Condvar::new(),
            on_signal,
            copy_ns: AtomicU64::new(0),
        });
        let thread_state = state.clone();
        Builder::new()
            .name(name.into())
            .spawn(move || run(&thread_state))?;
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
        lock(&state.queue).ops.push_back(op);
        state.cv.notify_all();
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
        self.record_state(&event.0);
    }

    /// Records `event` here; returns the record's epoch.
    pub(super) fn record_state(&self, event: &Arc<EventState>) -> u64 {
        let epoch = event.record();
        self.push(Op::Signal {
            event: event.clone(),
            epoch,
        });
        epoch
    }

    /// A new event recorded here.
    pub fn record_new(&self) -> CpuEvent {
        let event = CpuEvent::new();
        self.record(&event);
        event
    }

    /// Makes later work on this stream wait for `event`'s latest record as of this call
    /// (stream-side).
    pub fn wait_event(&self, event: &CpuEvent) {
        self.wait_epoch(&event.0, event.0.latest());
    }

    pub(super) fn wait_epoch(&self, event: &Arc<EventState>, epoch: u64) {
        self.push(Op::Wait {
            event: event.clone(),
            epoch,
        });
    }

    /// Blocks until everything enqueued so far has run.
    pub fn synchronize(&self) {
        let state = &self.handle.state;
        let mut queue = lock(&state.queue);
        while !queue.ops.is_empty() || queue.running {
            queue = state.cv.wait(queue).unwrap_or_else(|e| e.into_inner());
        }
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
    pub(super) fn mark_all_user_streams() -> Vec<(Arc<EventState>, u64)> {
        let streams: Vec<Arc<StreamHandle>> = {
            let streams = lock(&USER_STREAMS);
            streams.iter().filter_map(Weak::upgrade).collect()
        };
        streams
            .into_iter()
            .map(|handle| {
                let marker = handle.marker.clone();
                let stream = CpuStream { handle };
                let epoch = stream.record_state(&marker);
                (marker, epoch)
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
    loop {
        let Some(op) = queue.ops.pop_front() else {
            if queue.closed {
                return;
            }
            queue = state.cv.wait(queue).unwrap_or_else(|e| e.into_inner());
            continue;
        };
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
            Op::Signal { event, epoch } => event.complete(epoch),
            // Release: pairs with the copy thread's Acquire load in `completed`.
            Op::Complete { counter, upto } => counter.store(upto, Ordering::Release),
            Op::Wait { event, epoch } => event.wait_for(epoch),
            Op::Sleep(d) => pause(d),
            Op::Call(f) => f(),
        }
        if signalled {
            if let Some(waker) = &state.on_signal {
                waker.wake();
            }
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
