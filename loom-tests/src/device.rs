//! The model device: a [`Backend`] for loom models whose events mean what CUDA's mean, and
//! which checks the slot protocol's invariants itself.
//!
//! Like the cpu backend, a stream is an ordered op queue and an event is recorded on a
//! stream; but *recorded* and *completed* are separate steps. A host call records (takes
//! the event's next epoch and queues its signal); a device [`step`](Device::step) runs the
//! first runnable op of any stream (a wait holds its stream until the record it waits for
//! has completed). Each record completes on its own: a later record that completes first
//! does not complete an earlier one, and a wait waits for the record that was the event's
//! latest when the wait was queued, exactly as `cuStreamWaitEvent`. The device has no
//! thread: it moves when a thread waits on it, when the model steps it, and (with
//! `step_on_poll`) when the copy thread polls it, so loom explores every point at which a
//! copy or a fence may complete relative to the host threads, including "not yet".
//!
//! Release fences are captured as the cuda backend captures them: per slot, FENCE(d)
//! recorded on the caller's stream (`Fence::Stream`), or on the slot's fence stream after
//! it waits on the caller's event (`Fence::Event`); `Fence::Sync` records nothing. A batch
//! bound to streams the fence does not name links each of them into the slot's fence
//! stream (LINK(d) recorded there, waited on), which then records FENCE(d). In poison mode
//! a release enqueues the slot's fill on its fence stream after FENCE(d), then records
//! FENCE(d) again; a fill that runs while a kernel reading the slot is queued fails the
//! model ("invariant 2").
//!
//! READY points serve stream-side waits (`wait_on`); a host wait (`Batch::synchronize`)
//! waits on the copy count instead, the crate's own [`CopyCount`], which the device
//! publishes when a run of copies has run (a Release store under its lock, the waiters'
//! wake-up after it), as the cuda backend's completion thread does when a run's COPIED
//! record completes. With `synchronize_parks` the wait parks until another thread moves
//! the device; otherwise it moves the device itself first.
//!
//! The device guarantees these checks, each failing the model with a message that names
//! the invariant:
//! - "invariant 1": a decode writes a host slot whose last copy has not completed;
//! - "invariant 2": the copy stream waits on a release fence not yet recorded; a copy into
//!   a slot is enqueued before that slot's previous lease was released; a copy into a slot
//!   runs while a kernel reading the slot's previous batch is still queued;
//! - "invariant 3": a lease is released twice;
//! - a kernel that finds another batch in its slot, a host read before the copy completed,
//!   and a device that cannot make progress ("device stuck").
//!
//! Its state lives under one loom mutex (a driver's lock) and the checks are semantic: they
//! add no happens-before edge between the pipeline's threads beyond what the driver would,
//! and a seeded protocol bug fails with its invariant's message, not with a generic race.

use std::collections::VecDeque;
use std::fmt;
use std::sync::Arc;

use loom::sync::{Mutex, MutexGuard};
// What implementing the crate's private backend trait takes (the trait changes with the
// crate: `Ops`'s methods below follow its declaration in src/backend/contract.rs).
use pinring::model_hooks::{
    device_index, host_index, Backend, BoundStreams, CopyCount, CopyFailed, CopyRole, CopyRun,
    CopyWaker, DeviceIdx, HostRing, Layout, Ops, POISON_BYTE,
};
use pinring::{Error, Result};

use crate::mutation::{mutation, Mutation};

/// Options of the model backend.
#[derive(Debug, Clone, Default)]
pub(crate) struct ModelOptions {
    /// The device wakes the copy thread when a copy completes (as the cpu backend does);
    /// otherwise the copy thread polls (as the cuda backend's does without a completion
    /// thread).
    pub(crate) notifies: bool,
    /// Each completion poll of the copy thread takes one device step first: the device
    /// then moves with the copy thread's polls, for models where nothing else steps it.
    pub(crate) step_on_poll: bool,
    /// `Batch::synchronize` parks on the copy count without moving the device itself (as
    /// on cuda, where the GPU moves on its own and the completion thread publishes the
    /// count): another thread must run the copies (the copy thread does at the end of the
    /// stream, in `finish_copies`). Otherwise it steps the device until the count passes
    /// the batch, then waits on the count (which has passed it).
    pub(crate) synchronize_parks: bool,
    /// At the end of the stream the device is lost instead of finishing its copies: the
    /// copy count fails (waking every `synchronize`) and `completed` reports the failure.
    pub(crate) lost_at_end: bool,
    /// A step runs the first runnable op of the user streams before those of the
    /// pipeline's own (fence streams, then the copy stream): a GPU runs any op whose waits
    /// are met, in any order across streams, and this order runs a kernel enqueued with no
    /// wait for its batch's copy before that copy.
    pub(crate) user_streams_first: bool,
}

/// Fails the model through [`Device::violated`] unless `cond` holds.
macro_rules! ensure {
    ($device:expr, $cond:expr, $($message:tt)+) => {
        if !$cond {
            $device.violated(format!($($message)+));
        }
    };
}

/// One event's records.
#[derive(Debug, Default)]
struct Records {
    /// The latest record's epoch; 0 when never recorded (a wait on it passes at once).
    latest: u64,
    /// Records not yet completed.
    pending: Vec<u64>,
}

impl Records {
    fn record(&mut self) -> u64 {
        self.latest += 1;
        self.pending.push(self.latest);
        self.latest
    }

    fn done(&self, epoch: u64) -> bool {
        epoch <= self.latest && !self.pending.contains(&epoch)
    }

    fn complete(&mut self, epoch: u64) {
        self.pending.retain(|&e| e != epoch);
    }

    fn idle(&self) -> bool {
        self.pending.is_empty()
    }
}

#[derive(Debug)]
enum Op {
    /// Hold the stream until record `epoch` of `event` has completed.
    Wait { event: usize, epoch: u64 },
    /// Complete record `epoch` of `event`.
    Signal { event: usize, epoch: u64 },
    /// The copy of batch `seq`: host slot `h` → device slot `d`, then READY(d) record
    /// `ready`, COPIED(h) record `copied`, and for a run's last batch the run's completion
    /// point (batches before `complete` are copied).
    Copy {
        seq: u64,
        h: usize,
        d: usize,
        bytes: usize,
        ready: u64,
        copied: u64,
        complete: Option<u64>,
    },
    /// A kernel reading device slot `d`, which must hold batch `seq`.
    Read { d: usize, seq: u64 },
    /// The poison mode's fill of device slot `d`.
    Poison { d: usize },
}

#[derive(Debug)]
struct State {
    /// Stream 0 is the copy stream, streams 1..=D the per-slot fence streams; user
    /// streams follow.
    streams: Vec<VecDeque<Op>>,
    /// READY(d) at `d`, COPIED(h) at `D + h`, FENCE(d) at `D + H + d`, LINK(d) at
    /// `2D + H + d`; user events after.
    events: Vec<Records>,
    /// The batch each device slot holds, as far as the device has run.
    holds: Vec<Option<u64>>,
    /// Each device slot's bytes.
    memory: Vec<Vec<u8>>,
    /// Copies enqueued into each device slot (leases started).
    leases: Vec<u64>,
    /// Releases of each device slot.
    releases: Vec<u64>,
    /// Releases of each slot that captured a recorded fence (so far).
    fences_captured: Vec<u64>,
    /// Records of each slot's FENCE event made (so far).
    fences_recorded: Vec<u64>,
    /// Batches whose copies the device has run (a prefix count).
    completed: u64,
    /// Batches whose copies are enqueued.
    enqueued: u64,
    /// Records a seeded [`Mutation::PublishBeforeRecord`] put off: the releasing thread
    /// makes them at its next device call.
    deferred: Vec<(loom::thread::ThreadId, usize, usize)>,
}

/// The modelled device, shared by the backend and the model's streams.
pub(crate) struct Device {
    ring: Arc<HostRing>,
    layout: Layout,
    waker: CopyWaker,
    options: ModelOptions,
    /// Batches whose copies have run: stored under the device lock as a run completes,
    /// its waiters woken after the lock is let go.
    count: CopyCount,
    state: Mutex<State>,
    /// The first invariant broken, kept so that a check failing inside user code (a
    /// decode, whose panic the pipeline catches) still fails the model at the next device
    /// call. std's mutex: bookkeeping outside the model.
    violation: std::sync::Mutex<Option<String>>,
}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("layout", &self.layout)
            .finish()
    }
}

const COPY_STREAM: usize = 0;

impl Device {
    fn ready(&self, d: usize) -> usize {
        d
    }

    fn copied(&self, h: usize) -> usize {
        self.layout.device_slots + h
    }

    fn fence(&self, d: usize) -> usize {
        self.layout.device_slots + self.layout.host_slots + d
    }

    fn link(&self, d: usize) -> usize {
        2 * self.layout.device_slots + self.layout.host_slots + d
    }

    fn fence_stream(&self, d: usize) -> usize {
        1 + d
    }

    fn first_user_stream(&self) -> usize {
        1 + self.layout.device_slots
    }

    /// Fails the model: records the broken invariant and panics, unless the thread is
    /// already unwinding (a release in a `Batch`'s drop): a second panic would abort the
    /// test binary, and the first one already fails the model.
    fn violated(&self, message: String) {
        let mut first = self.violation.lock().unwrap_or_else(|e| e.into_inner());
        let message = first.get_or_insert(message).clone();
        drop(first);
        if !std::thread::panicking() {
            panic!("{message}");
        }
    }

    /// Panics again with a violation recorded earlier, if any.
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

    /// Takes the device lock, after the earlier violation check; makes the records a
    /// seeded bug put off on this thread.
    fn lock(&self) -> MutexGuard<'_, State> {
        self.check();
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let me = loom::thread::current().id();
        while let Some(i) = state.deferred.iter().position(|&(t, _, _)| t == me) {
            let (_, stream, event) = state.deferred.swap_remove(i);
            Self::record(&mut state, stream, event);
            if let Some(d) = event.checked_sub(self.fence(0)) {
                if d < self.layout.device_slots {
                    state.fences_recorded[d] += 1;
                }
            }
        }
        state
    }

    fn record(state: &mut State, stream: usize, event: usize) -> u64 {
        let epoch = state.events[event].record();
        state.streams[stream].push_back(Op::Signal { event, epoch });
        epoch
    }

    /// A new user stream.
    pub(crate) fn stream(self: &Arc<Self>) -> ModelStream {
        let mut state = self.lock();
        state.streams.push(VecDeque::new());
        ModelStream {
            device: self.clone(),
            id: state.streams.len() - 1,
        }
    }

    /// A new, never-recorded user event.
    pub(crate) fn event(self: &Arc<Self>) -> ModelEvent {
        let mut state = self.lock();
        state.events.push(Records::default());
        ModelEvent(state.events.len() - 1)
    }

    /// Leases started (copies enqueued) and released, over all device slots.
    pub(crate) fn leases(&self) -> (u64, u64) {
        let state = self.lock();
        (state.leases.iter().sum(), state.releases.iter().sum())
    }

    /// The batch device slot `d` holds as far as the device has run, and its bytes.
    pub(crate) fn slot(&self, d: usize) -> (Option<u64>, Vec<u8>) {
        let state = self.lock();
        (state.holds[d], state.memory[d].clone())
    }

    /// Invariant 1, checked by the model's decoder before it writes `out`, a sample's
    /// range in a host slot: the slot's last copy has completed.
    pub(crate) fn decode_write(&self, out: &[u8]) {
        let h = (out.as_ptr() as usize - self.ring.base() as usize) / self.ring.stride();
        let state = self.lock();
        let copied = &state.events[self.copied(h)];
        let idle = copied.idle();
        let latest = copied.latest;
        drop(state);
        ensure!(
            self,
            idle,
            "invariant 1: a decode writes host slot {h} while its copy may run (COPIED \
             record {latest} not completed)"
        );
    }

    /// Host read of batch `seq` in device slot `d` (`len` bytes): its copy must have run.
    pub(crate) fn host_read(&self, d: usize, seq: u64, len: usize) -> Vec<u8> {
        let state = self.lock();
        let (holds, bytes) = (state.holds[d], state.memory[d][..len].to_vec());
        drop(state);
        ensure!(
            self,
            holds == Some(seq),
            "host read of batch {seq} in slot {d} before its copy ran (slot holds {holds:?})"
        );
        bytes
    }

    fn runnable(state: &State, op: &Op) -> bool {
        match *op {
            Op::Wait { event, epoch } => state.events[event].done(epoch),
            _ => true,
        }
    }

    /// Runs one op (under the lock); true if a run of copies completed.
    fn execute(&self, state: &mut State, op: Op) -> bool {
        match op {
            Op::Wait { .. } => false,
            Op::Signal { event, epoch } => {
                state.events[event].complete(epoch);
                false
            }
            Op::Copy {
                seq,
                h,
                d,
                bytes,
                ready,
                copied,
                complete,
            } => {
                let stale = state.streams[self.first_user_stream()..]
                    .iter()
                    .flatten()
                    .find_map(|op| match *op {
                        Op::Read { d: rd, seq: rseq } if rd == d && rseq < seq => Some(rseq),
                        _ => None,
                    });
                if let Some(rseq) = stale {
                    self.violated(format!(
                        "invariant 2: the copy of batch {seq} into device slot {d} runs while \
                         a kernel reading batch {rseq} there is still queued"
                    ));
                    return false;
                }
                let src = self.ring.slot_ptr(h);
                // SAFETY: `src` is host slot h of the ring, `bytes` ≤ one batch ≤ the
                // slot's stride; the model's decoder writes the slot only after the copy
                // completed (checked: invariant 1).
                let src = unsafe { std::slice::from_raw_parts(src, bytes) };
                state.memory[d][..bytes].copy_from_slice(src);
                state.holds[d] = Some(seq);
                state.events[self.ready(d)].complete(ready);
                state.events[self.copied(h)].complete(copied);
                match complete {
                    Some(upto) => {
                        state.completed = upto;
                        // Under the lock, so that the count never goes back; the wake-up
                        // follows once the lock is let go (`copies_completed`).
                        self.count.store(upto);
                        true
                    }
                    None => false,
                }
            }
            Op::Poison { d } => {
                if let Some(rseq) = Self::queued_read(state, self.first_user_stream(), d) {
                    self.violated(format!(
                        "invariant 2: the poison of device slot {d} runs while a kernel \
                         reading batch {rseq} there is still queued"
                    ));
                    return false;
                }
                state.memory[d].fill(POISON_BYTE);
                state.holds[d] = None;
                false
            }
            Op::Read { d, seq } => {
                let holds = state.holds[d];
                if holds != Some(seq) {
                    self.violated(format!(
                        "a kernel reading batch {seq} finds device slot {d} holding {holds:?}"
                    ));
                }
                false
            }
        }
    }

    /// A kernel queued on a user stream (from `first_user`) that reads device slot `d`: the
    /// batch it reads.
    fn queued_read(state: &State, first_user: usize, d: usize) -> Option<u64> {
        state.streams[first_user..]
            .iter()
            .flatten()
            .find_map(|op| match *op {
                Op::Read { d: rd, seq } if rd == d => Some(seq),
                _ => None,
            })
    }

    /// Runs the first runnable op under the lock: `None` if none is, else whether a copy
    /// completed.
    fn step_locked(&self, state: &mut State) -> Option<bool> {
        let ready = |s: &usize| {
            state.streams[*s]
                .front()
                .is_some_and(|op| Self::runnable(state, op))
        };
        let streams = 0..state.streams.len();
        let s = if self.options.user_streams_first {
            streams.rev().find(ready)
        } else {
            streams.clone().find(ready)
        }?;
        let op = state.streams[s].pop_front().expect("a runnable op");
        Some(self.execute(state, op))
    }

    /// One device step: runs the first runnable op (streams in order, or user streams
    /// first). False if none is.
    pub(crate) fn step(&self) -> bool {
        let mut state = self.lock();
        let Some(copied) = self.step_locked(&mut state) else {
            return false;
        };
        drop(state);
        if copied {
            self.copies_completed();
        }
        true
    }

    /// After a run of copies completed (and the count was stored), outside the lock: wakes
    /// the `synchronize` waiters and, if the device notifies, the copy thread.
    fn copies_completed(&self) {
        if mutation() != Mutation::CountWithoutWake {
            self.count.wake();
        }
        if self.options.notifies {
            self.waker.wake();
        }
    }

    /// Steps until no op is runnable; then every queue must be empty.
    pub(crate) fn drain(&self) {
        while self.step() {}
        let stuck = self.lock().streams.iter().any(|s| !s.is_empty());
        ensure!(
            self,
            !stuck,
            "device stuck: a stream waits on a record that never completes"
        );
    }

    /// Steps until `done()`, in one burst under the lock (a host thread blocked on the
    /// device sees it move only when it returns).
    fn step_until(&self, mut done: impl FnMut(&Device, &State) -> bool) {
        let mut state = self.lock();
        let mut copied = false;
        while !done(self, &state) {
            match self.step_locked(&mut state) {
                Some(c) => copied |= c,
                None => {
                    drop(state);
                    return self.violated("device stuck: nothing left to run".into());
                }
            }
        }
        drop(state);
        if copied {
            self.copies_completed();
        }
    }

    /// Makes slot `d`'s fence stream wait for everything queued so far on each stream in
    /// `streams` (LINK(d) recorded there, its record waited on).
    fn link_streams(&self, state: &mut State, d: usize, streams: impl Iterator<Item = usize>) {
        let (link, fence_stream) = (self.link(d), self.fence_stream(d));
        for stream in streams {
            let epoch = Self::record(state, stream, link);
            state.streams[fence_stream].push_back(Op::Wait { event: link, epoch });
        }
    }

    /// Records FENCE(d) on `stream` (or, under the seeded [`Mutation::PublishBeforeRecord`],
    /// puts the record off past the publish).
    fn record_fence(&self, state: &mut State, d: usize, stream: usize) {
        if mutation() == Mutation::PublishBeforeRecord {
            // Seeded bug: the fence is published first and recorded later.
            state
                .deferred
                .push((loom::thread::current().id(), stream, self.fence(d)));
        } else {
            Self::record(state, stream, self.fence(d));
            state.fences_recorded[d] += 1;
        }
    }

    /// Steps the device until every stream but the copy stream has drained (as the cuda
    /// backend's context synchronize).
    fn drain_user_streams(&self) {
        self.step_until(|_, state| {
            state.streams[COPY_STREAM + 1..]
                .iter()
                .all(VecDeque::is_empty)
        });
    }

    /// Counts a release of slot `d` (invariant 3: once per lease).
    fn released(&self, state: &mut State, d: usize, recorded: bool) {
        let (leases, releases) = (state.leases[d], state.releases[d]);
        if releases >= leases {
            self.violated(format!(
                "invariant 3: device slot {d} released twice (leases {leases}, releases \
                 {releases})"
            ));
        }
        state.releases[d] += 1;
        if recorded {
            state.fences_captured[d] += 1;
        }
    }

    /// A release of slot `d` that records its fence: past a binding that overflowed, every
    /// user stream drains first (the conservative fence); then, under the device lock,
    /// `record` records FENCE(d) where the release form puts it, and the release counts.
    fn capture_recorded(
        &self,
        d: DeviceIdx,
        bound: &BoundStreams<ModelStream>,
        record: impl FnOnce(&mut State, usize),
    ) -> ModelFence {
        if bound.overflowed() {
            self.drain_user_streams();
        }
        let d = device_index(d);
        let mut state = self.lock();
        record(&mut state, d);
        self.released(&mut state, d, true);
        ModelFence { recorded: true }
    }
}

/// A user stream of the model device.
#[derive(Clone)]
pub(crate) struct ModelStream {
    device: Arc<Device>,
    id: usize,
}

impl PartialEq for ModelStream {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl ModelStream {
    /// Enqueues a kernel that reads slot `d`, which must then hold batch `seq`.
    pub(crate) fn read(&self, d: usize, seq: u64) {
        self.device.lock().streams[self.id].push_back(Op::Read { d, seq });
    }

    /// Records `event` here.
    pub(crate) fn record(&self, event: &ModelEvent) {
        let mut state = self.device.lock();
        Device::record(&mut state, self.id, event.0);
    }
}

impl fmt::Debug for ModelStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModelStream({})", self.id)
    }
}

/// A user event of the model device.
#[derive(Debug)]
pub(crate) struct ModelEvent(usize);

/// A captured release fence: whether FENCE(d) was recorded (as the cuda backend's).
#[derive(Debug)]
pub(crate) struct ModelFence {
    recorded: bool,
}

/// A device slot, by index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ModelDevicePtr(pub(crate) usize);

/// The model backend.
pub(crate) struct Model {
    pub(crate) device: Arc<Device>,
}

impl fmt::Debug for Model {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Model")
    }
}

impl Backend for Model {
    type Options = ModelOptions;
    type Stream = ModelStream;
    type Event = ModelEvent;
    type DevicePtr = ModelDevicePtr;
}

impl Ops for Model {
    type Captured = ModelFence;
    type Binding = ModelStream;

    fn open(
        options: &ModelOptions,
        ring: Arc<HostRing>,
        layout: Layout,
        waker: CopyWaker,
    ) -> Result<Self> {
        let (d, h) = (layout.device_slots, layout.host_slots);
        let state = State {
            streams: (0..1 + d).map(|_| VecDeque::new()).collect(),
            events: (0..3 * d + h).map(|_| Records::default()).collect(),
            holds: vec![None; d],
            memory: vec![vec![0; layout.batch_bytes]; d],
            leases: vec![0; d],
            releases: vec![0; d],
            fences_captured: vec![0; d],
            fences_recorded: vec![0; d],
            completed: 0,
            enqueued: 0,
            deferred: Vec::new(),
        };
        Ok(Model {
            device: Arc::new(Device {
                ring,
                layout,
                waker,
                options: options.clone(),
                count: CopyCount::new(),
                state: Mutex::new(state),
                violation: std::sync::Mutex::new(None),
            }),
        })
    }

    fn notifies_copy_done(&self, _: &CopyRole) -> bool {
        self.device.options.notifies
    }

    fn wait_fence(&self, _: &CopyRole, d: DeviceIdx, fence: ModelFence) -> Result<()> {
        if !fence.recorded {
            return Ok(());
        }
        let dev = &*self.device;
        let mut state = dev.lock();
        let (captured, recorded) = (
            state.fences_captured[device_index(d)],
            state.fences_recorded[device_index(d)],
        );
        if recorded < captured {
            drop(state);
            dev.violated(format!(
                "invariant 2: the copy stream waits on slot {}'s release fence before it was \
                 recorded ({recorded} of {captured} records made)",
                device_index(d)
            ));
            return Ok(());
        }
        let event = dev.fence(device_index(d));
        let epoch = state.events[event].latest;
        state.streams[COPY_STREAM].push_back(Op::Wait { event, epoch });
        Ok(())
    }

    fn copy(&self, _: &CopyRole, run: &CopyRun) -> Result<(), CopyFailed> {
        let dev = &*self.device;
        let mut state = dev.lock();
        for (seq, h, d) in run.each() {
            let (h, d) = (host_index(h), device_index(d));
            let (leases, releases) = (state.leases[d], state.releases[d]);
            if leases != releases {
                drop(state);
                dev.violated(format!(
                    "invariant 2: the copy of batch {seq} into device slot {d} is enqueued \
                     before its previous lease was released"
                ));
                return Ok(());
            }
            state.leases[d] += 1;
            let bytes = run.bytes_of(seq, dev.layout.batch_bytes);
            let ready = state.events[dev.ready(d)].record();
            let copied = state.events[dev.copied(h)].record();
            state.streams[COPY_STREAM].push_back(Op::Copy {
                seq,
                h,
                d,
                bytes,
                ready,
                copied,
                complete: (seq + 1 == run.end()).then_some(run.end()),
            });
        }
        state.enqueued = run.end();
        Ok(())
    }

    fn completed(&self, _: &CopyRole) -> Result<u64> {
        let dev = &*self.device;
        match mutation() {
            // Seeded bug: every copy is reported complete as soon as it is enqueued.
            Mutation::FreeBeforeCopied => return Ok(dev.lock().enqueued),
            // Seeded bug: the completion one batch ahead is consulted (the next slot's).
            Mutation::WrongSlotRetire => {
                let state = dev.lock();
                return Ok((state.completed + 1).min(state.enqueued));
            }
            _ => {}
        }
        if dev.count.failed() {
            return Err(Error::Internal("the model device was lost"));
        }
        if dev.options.step_on_poll {
            dev.step();
        }
        Ok(dev.lock().completed)
    }

    /// Steps the device until every copy enqueued has run (the copy thread waits for them
    /// at the end of the stream; this device moves only when a thread waits on it). With
    /// `lost_at_end`, the device is lost here instead: the copy count fails.
    fn finish_copies(&self, _: &CopyRole) {
        if self.device.options.lost_at_end {
            self.device.count.fail();
            return;
        }
        self.device
            .step_until(|_, state| state.completed == state.enqueued);
    }

    /// Every model stream can be bound and fenced on.
    fn check_stream(&self, _stream: &ModelStream) -> Result<()> {
        Ok(())
    }

    /// As the cuda backend: no wait once the copy count passed `seq` (batch `seq`'s copy
    /// ran), else a wait for READY(d) as it stands.
    fn ready_on(
        &self,
        d: DeviceIdx,
        seq: u64,
        stream: &ModelStream,
        _declared: bool,
    ) -> Result<ModelStream> {
        let dev = &*self.device;
        let mut state = dev.lock();
        let copied = match mutation() {
            // Seeded bug: the wait is skipped once the count reaches the batch, that is
            // once the batch before it was copied.
            Mutation::ReadyWaitOneEarly => dev.count.done() >= seq,
            _ => dev.count.done() > seq,
        };
        if copied {
            return Ok(stream.clone());
        }
        let event = dev.ready(device_index(d));
        let epoch = state.events[event].latest;
        state.streams[stream.id].push_back(Op::Wait { event, epoch });
        Ok(stream.clone())
    }

    /// Waits until the copy count passes `seq` (as the cuda backend does), parked when
    /// `synchronize_parks`, else after stepping the device until it has. READY(d) is not
    /// consulted: a count past `seq` means batch `seq`'s copy ran (and READY(d) with it).
    fn ready_sync(&self, _d: DeviceIdx, seq: u64) -> Result<()> {
        let dev = &*self.device;
        let past = match mutation() {
            // Seeded bug: the wait ends when the count reaches the batch instead of passing
            // it (once the batch before it was copied).
            Mutation::SyncOneEarly => match seq.checked_sub(1) {
                Some(before) => before,
                None => return Ok(()),
            },
            _ => seq,
        };
        if !dev.options.synchronize_parks && !dev.options.lost_at_end {
            dev.step_until(|_, state| state.completed > past);
        }
        if dev.count.wait_past(past) {
            Ok(())
        } else {
            Err(Error::Internal("the model device was lost"))
        }
    }

    fn capture_sync(&self, d: DeviceIdx) -> ModelFence {
        let dev = &*self.device;
        let mut state = dev.lock();
        dev.released(&mut state, device_index(d), false);
        ModelFence { recorded: false }
    }

    /// FENCE(d) on `stream`, or, with other bound streams, on slot d's fence stream after
    /// it is linked to `stream` and to each of them.
    fn capture_stream(
        &self,
        d: DeviceIdx,
        stream: &ModelStream,
        bound: &BoundStreams<ModelStream>,
    ) -> Result<ModelFence> {
        let dev = &*self.device;
        Ok(dev.capture_recorded(d, bound, |state, d| {
            let others: Vec<usize> = bound
                .iter()
                .filter(|b| !bound.overflowed() && b.id != stream.id)
                .map(|b| b.id)
                .collect();
            if others.is_empty() {
                dev.record_fence(state, d, stream.id);
            } else {
                dev.link_streams(state, d, std::iter::once(stream.id).chain(others));
                dev.record_fence(state, d, dev.fence_stream(d));
            }
        }))
    }

    /// Slot d's fence stream waits on `event`'s latest record and on every bound stream,
    /// then records FENCE(d).
    fn capture_event(
        &self,
        d: DeviceIdx,
        event: &ModelEvent,
        bound: &BoundStreams<ModelStream>,
    ) -> Result<ModelFence> {
        let dev = &*self.device;
        Ok(dev.capture_recorded(d, bound, |state, d| {
            if !bound.overflowed() {
                dev.link_streams(state, d, bound.iter().map(|b| b.id));
            }
            let epoch = state.events[event.0].latest;
            let fence_stream = dev.fence_stream(d);
            state.streams[fence_stream].push_back(Op::Wait {
                event: event.0,
                epoch,
            });
            dev.record_fence(state, d, fence_stream);
        }))
    }

    fn capture_bound(&self, d: DeviceIdx, bound: &BoundStreams<ModelStream>) -> ModelFence {
        if bound.overflowed() {
            return self.capture_conservative(d);
        }
        let first = bound
            .iter()
            .next()
            .expect("a bound batch has a stream")
            .clone();
        self.capture_stream(d, &first, bound)
            .expect("the model's capture never fails")
    }

    /// Steps the device until every stream but the copy stream has drained, then releases
    /// with no fence (as the cuda backend's context synchronize).
    fn capture_conservative(&self, d: DeviceIdx) -> ModelFence {
        let dev = &*self.device;
        dev.drain_user_streams();
        let mut state = dev.lock();
        dev.released(&mut state, device_index(d), false);
        ModelFence { recorded: false }
    }

    /// On slot d's fence stream: waits for FENCE(d) (when recorded), fills the slot,
    /// records FENCE(d) again (as the cuda backend does).
    fn poison(&self, d: DeviceIdx, fence: ModelFence) -> ModelFence {
        let dev = &*self.device;
        let d = device_index(d);
        let mut state = dev.lock();
        let fence_stream = dev.fence_stream(d);
        if fence.recorded {
            let event = dev.fence(d);
            let epoch = state.events[event].latest;
            state.streams[fence_stream].push_back(Op::Wait { event, epoch });
        } else {
            // The release captured nothing; the fill's record is what the copy now waits
            // for (counted as captured, for the invariant-2 check in `wait_fence`).
            state.fences_captured[d] += 1;
        }
        state.streams[fence_stream].push_back(Op::Poison { d });
        dev.record_fence(&mut state, d, fence_stream);
        ModelFence { recorded: true }
    }

    fn device_ptr(&self, d: DeviceIdx) -> ModelDevicePtr {
        ModelDevicePtr(device_index(d))
    }
}
