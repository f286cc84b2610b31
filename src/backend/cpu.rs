//! The cpu backend: device slots in ordinary memory, asynchronous on purpose.
//!
//! A [`CpuStream`] is a thread executing an ordered queue of operations; a [`CpuEvent`]
//! is an epoch counter: recording it on a stream takes the next epoch and enqueues
//! "complete this epoch"; waiting on it waits for the epoch it had when the wait was
//! enqueued (waiting on a never-recorded event returns at once, as in CUDA). Copies run on
//! the backend's own copy stream, so ordering bugs in the protocol show up as wrong bytes
//! in CI. Delays and failures can be injected through [`CpuOptions`].
//!
//! The stream queues are mutex-guarded, like a driver's; pinring's own protocol is not.

use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

use crate::backend::{Backend, CopyWaker, Layout, Sealed};
use crate::error::{Error, Result};
use crate::host_ring::HostRing;
use crate::sync::native::{
    sleep, Arc, AtomicU64, Builder, Condvar, Mutex, MutexGuard, Ordering, Weak,
};
use crate::Fence;

/// Faults and delays the cpu backend injects, for tests.
#[derive(Debug, Clone, Default)]
pub struct CpuOptions {
    /// Before each copy, the copy stream sleeps a random time in `[min, max]`.
    pub copy_delay: Option<(Duration, Duration)>,
    /// The copy of this batch fails (as a device error would).
    pub fail_copy_at: Option<u64>,
    /// Seed of the delay generator.
    pub seed: u64,
}

impl CpuOptions {
    /// Random copy delays in `[min, max]`, drawn from `seed`.
    pub fn copy_delay(mut self, min: Duration, max: Duration, seed: u64) -> Self {
        self.copy_delay = Some((min, max));
        self.seed = seed;
        self
    }

    /// Makes the copy of batch `seq` fail.
    pub fn fail_copy_at(mut self, seq: u64) -> Self {
        self.fail_copy_at = Some(seq);
        self
    }
}

#[doc(hidden)]
pub struct EventState {
    /// Epochs handed out by records; incremented (AcqRel) by `record`, read (Acquire) by
    /// waits, which capture the target epoch at the time they are made.
    recorded: AtomicU64,
    /// Highest epoch completed; written under `done`'s lock, mirrored here for lock-free
    /// queries (Release on store, Acquire on load).
    completed: AtomicU64,
    done: Mutex<()>,
    cv: Condvar,
}

impl EventState {
    fn new() -> Self {
        EventState {
            recorded: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            done: Mutex::new(()),
            cv: Condvar::new(),
        }
    }

    fn next_epoch(&self) -> u64 {
        self.recorded.fetch_add(1, Ordering::AcqRel) + 1
    }

    fn target(&self) -> u64 {
        self.recorded.load(Ordering::Acquire)
    }

    fn reached(&self, epoch: u64) -> bool {
        self.completed.load(Ordering::Acquire) >= epoch
    }

    fn complete(&self, epoch: u64) {
        let _guard = lock(&self.done);
        self.completed.fetch_max(epoch, Ordering::Release);
        self.cv.notify_all();
    }

    fn wait_for(&self, epoch: u64) {
        let mut guard = lock(&self.done);
        while !self.reached(epoch) {
            guard = self.cv.wait(guard).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// A cpu-backend event: an epoch counter a stream completes in order.
#[derive(Clone)]
pub struct CpuEvent(Arc<EventState>);

impl CpuEvent {
    /// A never-recorded event (waiting on it returns at once).
    pub fn new() -> Self {
        CpuEvent(Arc::new(EventState::new()))
    }

    /// Whether everything captured by the latest record has completed.
    pub fn query(&self) -> bool {
        self.0.reached(self.0.target())
    }

    /// Blocks until everything captured by the latest record has completed.
    pub fn synchronize(&self) {
        self.0.wait_for(self.0.target());
    }
}

impl Default for CpuEvent {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Debug for CpuEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CpuEvent")
            .field("recorded", &self.0.recorded.load(Ordering::Relaxed))
            .field("completed", &self.0.completed.load(Ordering::Relaxed))
            .finish()
    }
}

/// A release fence as the cpu backend captured it: an event and the epoch to wait for
/// (`None` for `Fence::Sync`).
#[doc(hidden)]
pub struct CpuFence(Option<(Arc<EventState>, u64)>);

/// A pointer to cpu-backend device memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuDevicePtr(*mut u8);

// SAFETY: an address, like a CUdeviceptr; dereferencing it is unsafe and governed by the
// slot protocol.
unsafe impl Send for CpuDevicePtr {}
// SAFETY: as above.
unsafe impl Sync for CpuDevicePtr {}

impl CpuDevicePtr {
    /// The address.
    pub fn as_ptr(self) -> *const u8 {
        self.0
    }
}

enum Op {
    Copy {
        src: *const u8,
        dst: *mut u8,
        len: usize,
    },
    Signal {
        event: Arc<EventState>,
        epoch: u64,
    },
    Wait {
        event: Arc<EventState>,
        epoch: u64,
    },
    Sleep(Duration),
    Call(Box<dyn FnOnce() + Send>),
}

// SAFETY: the raw pointers in `Copy` point into the host ring and device slots, which
// outlive the copy stream (the backend drains it before freeing them), and the slot
// protocol gives the stream exclusive use of both ranges while the op is queued.
unsafe impl Send for Op {}

struct Queue {
    ops: VecDeque<Op>,
    /// Ops taken from `ops` and not yet finished.
    running: bool,
    closed: bool,
}

struct StreamState {
    queue: Mutex<Queue>,
    /// Signalled when ops arrive or the queue closes (stream thread waits) and when the
    /// queue drains (synchronize waits).
    cv: Condvar,
    /// Called after every Signal op (the copy stream wakes the copy thread with it).
    on_signal: Option<CopyWaker>,
}

/// A cpu-backend stream: a thread running the operations enqueued on it, in order.
///
/// Cloning gives another handle to the same stream; the thread ends once every handle
/// is dropped and the queue has drained.
#[derive(Clone)]
pub struct CpuStream {
    handle: Arc<StreamHandle>,
}

struct StreamHandle {
    state: Arc<StreamState>,
}

impl Drop for StreamHandle {
    fn drop(&mut self) {
        lock(&self.state.queue).closed = true;
        self.state.cv.notify_all();
    }
}

/// User streams, for the conservative fence of a dropped unbound batch.
static USER_STREAMS: Mutex<Vec<Weak<StreamHandle>>> = Mutex::new(Vec::new());

impl CpuStream {
    /// Starts a stream thread.
    pub fn new() -> Self {
        let stream = Self::spawn(None).expect("could not start a cpu stream thread");
        let mut streams = lock(&USER_STREAMS);
        streams.retain(|w| w.strong_count() > 0);
        streams.push(Arc::downgrade(&stream.handle));
        stream
    }

    fn spawn(on_signal: Option<CopyWaker>) -> std::io::Result<Self> {
        let state = Arc::new(StreamState {
            queue: Mutex::new(Queue {
                ops: VecDeque::with_capacity(64),
                running: false,
                closed: false,
            }),
            cv: Condvar::new(),
            on_signal,
        });
        let thread_state = state.clone();
        Builder::new()
            .name("pinring-cpu-stream".into())
            .spawn(move || run_stream(&thread_state))?;
        Ok(CpuStream {
            handle: Arc::new(StreamHandle { state }),
        })
    }

    fn push(&self, op: Op) {
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
        self.record_epoch(event);
    }

    fn record_epoch(&self, event: &CpuEvent) -> u64 {
        let epoch = event.0.next_epoch();
        self.push(Op::Signal {
            event: event.0.clone(),
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

    /// Makes later work on this stream wait for `event`'s latest record (stream-side).
    pub fn wait_event(&self, event: &CpuEvent) {
        self.push(Op::Wait {
            event: event.0.clone(),
            epoch: event.0.target(),
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

fn run_stream(state: &StreamState) {
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
        let signalled = matches!(op, Op::Signal { .. });
        match op {
            Op::Copy { src, dst, len } => {
                // SAFETY: see `Op`'s Send impl: both ranges are valid and owned by this
                // stream for the op's duration under the slot protocol, and they lie in
                // different mappings, so they do not overlap.
                unsafe { std::ptr::copy_nonoverlapping(src, dst, len) }
            }
            Op::Signal { event, epoch } => event.complete(epoch),
            Op::Wait { event, epoch } => event.wait_for(epoch),
            Op::Sleep(d) => sleep(d),
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The cpu backend's device side of one pipeline.
pub struct Cpu {
    ring: Arc<HostRing>,
    /// Device slots, `device_slots × batch_bytes`; touched only through `device`.
    _memory: Vec<u8>,
    device: *mut u8,
    batch_bytes: usize,
    copy_stream: CpuStream,
    /// READY(d): recorded on the copy stream after each H2D into slot d.
    ready: Box<[CpuEvent]>,
    /// COPIED(h): recorded on the copy stream after each H2D out of host slot h.
    copied: Box<[CpuEvent]>,
    /// Per-slot events a `Fence::Stream` release records on the caller's stream.
    fences: Box<[CpuEvent]>,
    options: CpuOptions,
    /// xorshift state for injected delays; Relaxed (copy thread only, no ordering).
    rng: AtomicU64,
}

// SAFETY: `device` points into `_memory`, which the struct owns; which thread may touch
// which slot is decided by the slot protocol. Everything else is Send + Sync.
unsafe impl Send for Cpu {}
// SAFETY: as above.
unsafe impl Sync for Cpu {}

impl Sealed for Cpu {}

impl fmt::Debug for Cpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cpu")
            .field("batch_bytes", &self.batch_bytes)
            .field("options", &self.options)
            .finish()
    }
}

impl Cpu {
    fn slot_ptr(&self, d: usize) -> *mut u8 {
        assert!(d < self.ready.len(), "device slot {d} out of range");
        // SAFETY: d < device_slots, so the offset stays inside `_memory`.
        unsafe { self.device.add(d * self.batch_bytes) }
    }

    fn delay(&self) -> Option<Duration> {
        let (min, max) = self.options.copy_delay?;
        let mut x = self.rng.load(Ordering::Relaxed);
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng.store(x, Ordering::Relaxed);
        let span = max.saturating_sub(min).as_nanos() as u64;
        Some(min + Duration::from_nanos(if span == 0 { 0 } else { x % (span + 1) }))
    }

    /// Like `ready_sync`, which cannot fail on this backend.
    pub(crate) fn ready_sync_infallible(&self, d: usize) {
        self.ready[d].synchronize();
    }
}

impl Drop for Cpu {
    fn drop(&mut self) {
        // Every copy must be done before the ring and the device memory go.
        self.copy_stream.synchronize();
    }
}

impl Backend for Cpu {
    type Options = CpuOptions;
    type Stream = CpuStream;
    type Event = CpuEvent;
    type DevicePtr = CpuDevicePtr;
    type Captured = CpuFence;
    const NOTIFIES_COPY_DONE: bool = true;

    fn open(
        options: &CpuOptions,
        ring: Arc<HostRing>,
        layout: Layout,
        waker: CopyWaker,
    ) -> Result<Self> {
        let mut memory = vec![0u8; layout.batch_bytes * layout.device_slots];
        let device = memory.as_mut_ptr();
        let copy_stream = CpuStream::spawn(Some(waker)).map_err(|e| Error::Spawn {
            thread: "cpu copy stream",
            source: Box::new(e),
        })?;
        let events = |n: usize| (0..n).map(|_| CpuEvent::new()).collect::<Box<[_]>>();
        Ok(Cpu {
            ring,
            _memory: memory,
            device,
            batch_bytes: layout.batch_bytes,
            copy_stream,
            ready: events(layout.device_slots),
            copied: events(layout.host_slots),
            fences: events(layout.device_slots),
            options: options.clone(),
            rng: AtomicU64::new(options.seed | 1),
        })
    }

    fn wait_fence(&self, _d: usize, fence: CpuFence) -> Result<()> {
        if let Some((event, epoch)) = fence.0 {
            self.copy_stream.push(Op::Wait { event, epoch });
        }
        Ok(())
    }

    fn copy(&self, seq: u64, h: usize, d: usize, bytes: usize) -> Result<()> {
        if self.options.fail_copy_at == Some(seq) {
            return Err(Error::Backend {
                call: "cpu copy",
                code: -1,
                message: format!("injected copy failure at batch {seq}"),
            });
        }
        if let Some(delay) = self.delay() {
            self.copy_stream.push(Op::Sleep(delay));
        }
        self.copy_stream.push(Op::Copy {
            src: self.ring.slot_ptr(h),
            dst: self.slot_ptr(d),
            len: bytes,
        });
        self.copy_stream.record(&self.ready[d]);
        self.copy_stream.record(&self.copied[h]);
        Ok(())
    }

    fn copied(&self, h: usize) -> Result<bool> {
        Ok(self.copied[h].query())
    }

    fn ready_on(&self, d: usize, stream: &CpuStream) -> Result<()> {
        stream.wait_event(&self.ready[d]);
        Ok(())
    }

    fn ready_sync(&self, d: usize) -> Result<()> {
        self.ready_sync_infallible(d);
        Ok(())
    }

    fn capture(&self, d: usize, fence: Fence<'_, Self>) -> Result<Self::Captured> {
        Ok(CpuFence(match fence {
            Fence::Sync => None,
            Fence::Event(event) => Some((event.0.clone(), event.0.target())),
            Fence::Stream(stream) => {
                let event = &self.fences[d];
                let epoch = stream.record_epoch(event);
                Some((event.0.clone(), epoch))
            }
        }))
    }

    /// Waits until every live [`CpuStream`] has drained what it had queued (a host block,
    /// like a device synchronize), then releases with no fence.
    fn capture_conservative(&self, _d: usize) -> CpuFence {
        let streams: Vec<_> = {
            let streams = lock(&USER_STREAMS);
            streams.iter().filter_map(Weak::upgrade).collect()
        };
        for handle in streams {
            CpuStream { handle }.synchronize();
        }
        CpuFence(None)
    }

    fn device_ptr(&self, d: usize) -> CpuDevicePtr {
        CpuDevicePtr(self.slot_ptr(d))
    }
}
