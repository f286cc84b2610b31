//! The model backend (`cfg(pinring_loom)` only): a device for loom models.
//!
//! Like the cpu backend, a stream is an ordered op queue and an event is an epoch counter,
//! but *recorded* and *completed* are separate steps: a host call records (takes the next
//! epoch and queues its signal), and a device [`step`](Device::step) completes it when the
//! signal reaches the head of its stream. Each step runs the first runnable op (a `Wait`
//! holds its stream until the awaited epoch has completed). The device has no thread: it is
//! stepped by whoever waits on it (`Batch::synchronize`, a conservative release) and by the
//! models themselves, so loom explores every point at which a copy or a fence may complete
//! relative to the host threads, including "not yet" (the device arbitrarily slow).
//!
//! The device checks the invariants as it goes, and panics (which loom reports) when one
//! breaks:
//! - no H2D into a device slot is enqueued before the release fence of the slot's previous
//!   lease was captured (recorded), and no wait is queued on an epoch not yet recorded
//!   (invariant 2);
//! - when an H2D runs, no kernel of an earlier lease of that slot is still queued, and a
//!   kernel finds in its slot the batch it was given;
//! - no decode writes a host slot whose last H2D has not completed (invariant 1);
//! - no lease is released twice (invariant 3).
//!
//! The checks add no happens-before edge of their own: the bookkeeping they read is kept
//! in loom cells (loom rejects a read not ordered after the write it needs) or loaded
//! `Relaxed`. Host bytes and device bytes are shadowed by loom cells too, so loom itself
//! flags an unordered access.

use std::collections::VecDeque;
use std::fmt;

use crate::backend::{Backend, CopyWaker, Layout, Sealed};
use crate::error::Result;
use crate::host_ring::HostRing;
use crate::sync::native;
use crate::sync::{Arc, AtomicU64, Mutex, Ordering, UnsafeCell};
use crate::Fence;

/// The copy stream's index among the device's streams.
const COPY_STREAM: usize = 0;
/// User events a model may create with [`Device::event`].
const USER_EVENTS: usize = 2;

/// Fails the model through [`Device::violated`] unless `cond` holds.
macro_rules! ensure {
    ($device:expr, $cond:expr, $($message:tt)+) => {
        if !$cond {
            $device.violated(format!($($message)+));
        }
    };
}

/// Options of the model backend.
#[derive(Debug, Clone, Default)]
pub struct ModelOptions {
    /// Each completion poll of the copy thread takes one device step first: the device
    /// then moves with the copy thread's polls, for models where no other thread steps it
    /// while the copy thread waits.
    pub step_on_poll: bool,
}

/// One event: epochs recorded by host calls, completed by device steps.
struct Event {
    /// Last epoch handed out by a record. A loom cell, not an atomic: recording and
    /// reading an event's state from two threads with nothing ordering them is a race in
    /// CUDA too, so loom checks that every read is ordered after the records it relies on.
    recorded: UnsafeCell<u64>,
    /// Highest epoch completed. Stored (Release) by the device step that runs the signal;
    /// loaded with Acquire by queries that then rely on the work before it (pairs with that
    /// store), with Relaxed by the checks.
    completed: AtomicU64,
}

impl Event {
    fn new() -> Self {
        Event {
            recorded: UnsafeCell::new(0),
            completed: AtomicU64::new(0),
        }
    }

    fn recorded(&self) -> u64 {
        // SAFETY: a read of a Copy value; loom checks it is ordered after every record.
        self.recorded.with(|p| unsafe { *p })
    }

    fn done(&self, epoch: u64) -> bool {
        self.completed.load(Ordering::Acquire) >= epoch
    }
}

enum Op {
    /// Hold the stream until `event` reaches `epoch`.
    Wait { event: usize, epoch: u64 },
    /// Complete `event`'s `epoch`.
    Signal { event: usize, epoch: u64 },
    /// H2D of batch `seq`: host slot `h` → device slot `d`, then READY(d) and COPIED(h).
    Copy {
        seq: u64,
        h: usize,
        d: usize,
        bytes: usize,
        ready: u64,
        copied: u64,
    },
    /// A kernel reading device slot `d`, which must hold batch `seq`.
    Read { d: usize, seq: u64 },
}

struct Queues {
    /// Stream 0 is the copy stream; user streams follow.
    streams: Vec<VecDeque<Op>>,
    /// The batch each device slot holds, as far as the device has run.
    holds: Vec<Option<u64>>,
    /// User events handed out.
    user_events: usize,
}

/// The modelled device, shared by the backend and the model's streams.
pub struct Device {
    ring: native::Arc<HostRing>,
    layout: Layout,
    waker: CopyWaker,
    /// The streams' queues; ops are pushed and run under this lock (like a driver's).
    queues: Mutex<Queues>,
    /// READY(d) at `d`, COPIED(h) at `D + h`, the release fence of slot d at `D + H + d`,
    /// user events after.
    events: Box<[Event]>,
    /// Stands for each host slot's bytes: decodes write it, H2Ds read it.
    host_bytes: Box<[UnsafeCell<()>]>,
    /// Each device slot's bytes: H2Ds write them, host reads after READY read them.
    memory: Box<[UnsafeCell<Vec<u8>>]>,
    /// Leases started per device slot (H2Ds enqueued): written by the copy thread, read by
    /// lease holders. A loom cell, so every read must be ordered after the writes.
    leases: Box<[UnsafeCell<u64>]>,
    /// Whether a completion poll (`copied`) first takes one device step: the device then
    /// moves with the copy thread's polls, for models with no other thread to step it.
    step_on_poll: bool,
    /// The first invariant broken, kept so that a check that fails inside user code (a
    /// decode, whose panic the pipeline catches) still fails the model at the next device
    /// call. std's mutex: bookkeeping outside the model.
    violation: native::Mutex<Option<String>>,
    /// Leases released per device slot (fences captured): written by lease holders, read
    /// by the copy thread before it enqueues the next H2D into the slot. A loom cell, as
    /// `leases`: an H2D not ordered after the previous release is a loom error.
    releases: Box<[UnsafeCell<u64>]>,
}

// SAFETY: the loom cells are accessed only through loom's `with`/`with_mut`, which check
// every access for ordering; everything else is loom atomics, a loom mutex or `Sync`.
unsafe impl Sync for Device {}
// SAFETY: as above.
unsafe impl Send for Device {}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("layout", &self.layout)
            .finish()
    }
}

fn read(cell: &UnsafeCell<u64>) -> u64 {
    // SAFETY: a read of a Copy value; loom checks it against every write.
    cell.with(|p| unsafe { *p })
}

fn bump(cell: &UnsafeCell<u64>) -> u64 {
    // SAFETY: loom checks this write against every other access.
    cell.with_mut(|p| unsafe {
        *p += 1;
        *p
    })
}

impl Device {
    /// Fails the model: records the broken invariant (see `violation`) and panics, unless
    /// the thread is already unwinding (a release in a `Batch`'s drop): a second panic
    /// would abort the test binary, and the first one already fails the model.
    fn violated(&self, message: String) {
        let mut first = self.violation.lock().unwrap_or_else(|e| e.into_inner());
        let message = first.get_or_insert(message).clone();
        drop(first);
        if !std::thread::panicking() {
            panic!("{message}");
        }
    }

    /// Panics again with a violation recorded earlier, if any (unless already unwinding).
    fn check(&self) {
        let first = self
            .violation
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(message) = first {
            self.violated(message);
        }
    }

    fn ready(&self, d: usize) -> usize {
        d
    }

    fn copied(&self, h: usize) -> usize {
        self.layout.device_slots + h
    }

    fn fence(&self, d: usize) -> usize {
        self.layout.device_slots + self.layout.host_slots + d
    }

    fn lock(&self) -> loom::sync::MutexGuard<'_, Queues> {
        self.queues.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records `event` on `stream` (under the lock): the next epoch, and its signal queued.
    fn record(&self, queues: &mut Queues, stream: usize, event: usize) -> u64 {
        let epoch = bump(&self.events[event].recorded);
        queues.streams[stream].push_back(Op::Signal { event, epoch });
        epoch
    }

    /// A new, never-recorded user event (a model may make two).
    pub fn event(&self) -> ModelEvent {
        let mut queues = self.lock();
        let i = queues.user_events;
        assert!(
            i < USER_EVENTS,
            "a model may create at most {USER_EVENTS} events"
        );
        queues.user_events += 1;
        ModelEvent(self.events.len() - USER_EVENTS + i)
    }

    /// Leases started (H2Ds enqueued) and released, over all device slots. Call once the
    /// threads that lease and release are joined.
    pub fn leases(&self) -> (u64, u64) {
        self.check();
        let sum = |v: &[UnsafeCell<u64>]| v.iter().map(read).sum();
        (sum(&self.leases), sum(&self.releases))
    }

    /// The batch device slot `d` holds as far as the device has run, and its bytes. Call
    /// after [`drain`](Self::drain), from the thread that drained.
    pub fn slot(&self, d: usize) -> (Option<u64>, Vec<u8>) {
        let holds = self.lock().holds[d];
        // SAFETY: loom checks this read against every H2D into the slot.
        (holds, self.memory[d].with(|m| unsafe { (*m).clone() }))
    }

    /// Invariant 1, checked by the model's decoder before it writes host slot `h`: the
    /// slot's last H2D has completed, and the write is ordered after it (loom cell).
    pub(crate) fn decode_write(&self, h: usize) {
        let e = &self.events[self.copied(h)];
        let (recorded, completed) = (e.recorded(), e.completed.load(Ordering::Relaxed));
        ensure!(
            self,
            completed >= recorded,
            "invariant 1: decode writes host slot {h} while its H2D may run \
             (COPIED recorded {recorded}, completed {completed})"
        );
        self.host_bytes[h].with_mut(|_| ());
    }

    /// Host read of batch `seq` in device slot `d` (`len` bytes): READY must have completed.
    pub(crate) fn host_read(&self, d: usize, seq: u64, len: usize) -> Vec<u8> {
        let lease = seq / self.layout.device_slots as u64 + 1;
        let completed = self.events[self.ready(d)].completed.load(Ordering::Relaxed);
        ensure!(
            self,
            completed >= lease,
            "host read of batch {seq} in slot {d} before its H2D completed"
        );
        self.memory[d].with(|m| {
            // SAFETY: loom checks that no H2D into slot d is unordered with this read; the
            // protocol keeps slot d's bytes unwritten while batch `seq` is leased.
            unsafe { (&*m)[..len].to_vec() }
        })
    }

    /// A lease holder captured slot `d`'s release fence (invariant 3: once per lease).
    fn release(&self, d: usize) {
        let (leases, releases) = (read(&self.leases[d]), read(&self.releases[d]));
        ensure!(
            self,
            releases < leases,
            "invariant 3: device slot {d} released twice (leases {leases}, releases {releases})"
        );
        bump(&self.releases[d]);
    }

    fn runnable(&self, op: &Op) -> bool {
        match *op {
            Op::Wait { event, epoch } => self.events[event].done(epoch),
            _ => true,
        }
    }

    /// Runs one op (under the lock); true if the copy thread should be woken.
    fn execute(&self, queues: &mut Queues, op: Op) -> bool {
        match op {
            Op::Wait { .. } => false,
            Op::Signal { event, epoch } => {
                self.events[event]
                    .completed
                    .fetch_max(epoch, Ordering::Release);
                false
            }
            Op::Copy {
                seq,
                h,
                d,
                bytes,
                ready,
                copied,
            } => {
                for stream in &queues.streams[COPY_STREAM + 1..] {
                    for op in stream {
                        if let Op::Read { d: rd, seq: rseq } = *op {
                            ensure!(
                                self,
                                rd != d || rseq >= seq,
                                "invariant 2: H2D of batch {seq} into device slot {d} runs \
                                 while a kernel reading batch {rseq} there is still queued"
                            );
                        }
                    }
                }
                let src = self.ring.slot_ptr(h);
                self.host_bytes[h].with(|_| ());
                self.memory[d].with_mut(|m| {
                    // SAFETY: loom checks this write against every other access to slot d's
                    // bytes; `src` is host slot h, `bytes` ≤ one batch ≤ the slot's stride and
                    // the device slot's length, and the two buffers do not overlap.
                    unsafe { std::ptr::copy_nonoverlapping(src, (*m).as_mut_ptr(), bytes) }
                });
                queues.holds[d] = Some(seq);
                self.events[self.ready(d)]
                    .completed
                    .fetch_max(ready, Ordering::Release);
                self.events[self.copied(h)]
                    .completed
                    .fetch_max(copied, Ordering::Release);
                true
            }
            Op::Read { d, seq } => {
                ensure!(
                    self,
                    queues.holds[d] == Some(seq),
                    "a kernel reading batch {seq} finds device slot {d} holding another batch"
                );
                self.memory[d].with(|_| ());
                false
            }
        }
    }

    /// One device step: runs the first runnable op (streams in order). False if none is.
    ///
    /// The device has no thread of its own: it moves when a thread that waits on it steps
    /// it (`synchronize`, a conservative release) or when a model does. Recording (a host
    /// call) and completing (a step) are thus separate, and loom explores every point at
    /// which a step may come.
    pub fn step(&self) -> bool {
        self.check();
        let mut queues = self.lock();
        let Some(wake) = self.step_locked(&mut queues) else {
            return false;
        };
        drop(queues);
        if wake {
            self.waker.wake();
        }
        true
    }

    /// Runs the first runnable op under the lock: `None` if none is, else whether the copy
    /// thread should be woken.
    fn step_locked(&self, queues: &mut Queues) -> Option<bool> {
        let s = (0..queues.streams.len()).find(|&s| {
            queues.streams[s]
                .front()
                .is_some_and(|op| self.runnable(op))
        })?;
        let op = queues.streams[s].pop_front().expect("a runnable op");
        Some(self.execute(queues, op))
    }

    /// Steps until no op is runnable; then every queue must be empty (no stream waits on an
    /// epoch that never completes).
    pub fn drain(&self) {
        while self.step() {}
        ensure!(
            self,
            self.lock().streams.iter().all(VecDeque::is_empty),
            "device stuck: a stream waits on an epoch that never completes"
        );
    }

    /// Steps until `done()`, in one burst under the lock (a host thread blocked on the
    /// device sees it move only when it returns), then wakes the copy thread if a copy
    /// completed.
    fn step_until(&self, mut done: impl FnMut(&Queues) -> bool) {
        self.check();
        let mut queues = self.lock();
        let mut wake = false;
        while !done(&queues) {
            match self.step_locked(&mut queues) {
                Some(w) => wake |= w,
                None => {
                    drop(queues);
                    return self.violated("device stuck: nothing left to run".into());
                }
            }
        }
        drop(queues);
        if wake {
            self.waker.wake();
        }
    }
}

/// A user stream of the model device.
#[derive(Clone)]
pub struct ModelStream {
    device: Arc<Device>,
    id: usize,
}

impl ModelStream {
    /// A new user stream of `device`.
    pub fn new(device: &Arc<Device>) -> Self {
        let mut queues = device.lock();
        queues.streams.push(VecDeque::new());
        ModelStream {
            device: device.clone(),
            id: queues.streams.len() - 1,
        }
    }

    /// Enqueues a kernel that reads `slot`, which must then hold batch `seq`.
    pub(crate) fn read(&self, slot: usize, seq: u64) {
        self.device.lock().streams[self.id].push_back(Op::Read { d: slot, seq });
    }

    /// Records `event` here.
    pub fn record(&self, event: &ModelEvent) {
        let mut queues = self.device.lock();
        self.device.record(&mut queues, self.id, event.0);
    }
}

impl fmt::Debug for ModelStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModelStream({})", self.id)
    }
}

/// A user event of the model device.
#[derive(Debug)]
pub struct ModelEvent(usize);

/// A captured release fence: an event and the epoch to wait for (`None`: no wait).
#[derive(Debug)]
pub struct ModelFence(Option<(usize, u64)>);

/// A device slot, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelDevicePtr(pub usize);

/// The model backend.
pub struct Model {
    device: Arc<Device>,
}

impl Model {
    /// The modelled device (for the model's streams, events, steps and checks).
    pub fn device(&self) -> Arc<Device> {
        self.device.clone()
    }
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Model")
    }
}

impl Sealed for Model {}

impl Backend for Model {
    type Options = ModelOptions;
    type Stream = ModelStream;
    type Event = ModelEvent;
    type DevicePtr = ModelDevicePtr;
    type Captured = ModelFence;
    const NOTIFIES_COPY_DONE: bool = true;

    fn open(
        options: &ModelOptions,
        ring: native::Arc<HostRing>,
        layout: Layout,
        waker: CopyWaker,
    ) -> Result<Self> {
        let (d, h) = (layout.device_slots, layout.host_slots);
        let counters = |n: usize| (0..n).map(|_| UnsafeCell::new(0)).collect();
        let device = Device {
            ring,
            layout,
            waker,
            queues: Mutex::new(Queues {
                streams: vec![VecDeque::new()],
                holds: vec![None; d],
                user_events: 0,
            }),
            events: (0..2 * d + h + USER_EVENTS).map(|_| Event::new()).collect(),
            host_bytes: (0..h).map(|_| UnsafeCell::new(())).collect(),
            memory: (0..d)
                .map(|_| UnsafeCell::new(vec![0; layout.batch_bytes]))
                .collect(),
            step_on_poll: options.step_on_poll,
            violation: native::Mutex::new(None),
            leases: counters(d),
            releases: counters(d),
        };
        Ok(Model {
            device: Arc::new(device),
        })
    }

    fn wait_fence(&self, d: usize, fence: ModelFence) -> Result<()> {
        let Some((event, epoch)) = fence.0 else {
            return Ok(());
        };
        let dev = &*self.device;
        let recorded = dev.events[event].recorded();
        ensure!(
            dev,
            epoch <= recorded,
            "invariant 2: the copy stream waits on epoch {epoch} of slot {d}'s release fence, \
             not yet recorded (recorded: {recorded})"
        );
        dev.lock().streams[COPY_STREAM].push_back(Op::Wait { event, epoch });
        Ok(())
    }

    fn copy(&self, seq: u64, h: usize, d: usize, bytes: usize) -> Result<()> {
        let dev = &*self.device;
        let (leases, releases) = (read(&dev.leases[d]), read(&dev.releases[d]));
        ensure!(
            dev,
            leases == releases,
            "invariant 2: H2D of batch {seq} into device slot {d} enqueued before the release \
             fence of its previous lease was recorded"
        );
        ensure!(
            dev,
            leases == seq / dev.layout.device_slots as u64,
            "leases out of order"
        );
        bump(&dev.leases[d]);
        let mut queues = dev.lock();
        let ready = bump(&dev.events[dev.ready(d)].recorded);
        let copied = bump(&dev.events[dev.copied(h)].recorded);
        queues.streams[COPY_STREAM].push_back(Op::Copy {
            seq,
            h,
            d,
            bytes,
            ready,
            copied,
        });
        Ok(())
    }

    fn copied(&self, h: usize) -> Result<bool> {
        if self.device.step_on_poll {
            self.device.step();
        }
        let e = &self.device.events[self.device.copied(h)];
        Ok(e.done(e.recorded()))
    }

    fn ready_on(&self, d: usize, stream: &ModelStream) -> Result<()> {
        let dev = &*self.device;
        let event = dev.ready(d);
        let epoch = dev.events[event].recorded();
        dev.lock().streams[stream.id].push_back(Op::Wait { event, epoch });
        Ok(())
    }

    /// Steps the device until READY(d) has completed.
    fn ready_sync(&self, d: usize) -> Result<()> {
        let dev = &*self.device;
        let e = &dev.events[dev.ready(d)];
        let epoch = e.recorded();
        dev.step_until(|_| e.done(epoch));
        Ok(())
    }

    fn capture(&self, d: usize, fence: Fence<'_, Self>) -> Result<ModelFence> {
        let dev = &*self.device;
        let captured = match fence {
            Fence::Sync => None,
            Fence::Event(event) => Some((event.0, dev.events[event.0].recorded())),
            Fence::Stream(stream) => {
                let mut queues = dev.lock();
                let event = dev.fence(d);
                Some((event, dev.record(&mut queues, stream.id, event)))
            }
        };
        dev.release(d);
        Ok(ModelFence(captured))
    }

    /// Steps the device until every user stream has drained, then releases with no fence.
    fn capture_conservative(&self, d: usize) -> ModelFence {
        let dev = &*self.device;
        dev.step_until(|q| q.streams[COPY_STREAM + 1..].iter().all(VecDeque::is_empty));
        dev.release(d);
        ModelFence(None)
    }

    fn device_ptr(&self, d: usize) -> ModelDevicePtr {
        ModelDevicePtr(d)
    }
}
