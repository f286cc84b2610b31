//! The cpu backend: device slots in ordinary memory, asynchronous on purpose. Its behaviour
//! is documented on [`Cpu`](crate::Cpu), the public face of this module; `stream.rs`,
//! `event.rs`, `fence.rs` and `failure.rs` hold its streams, events, captured fences and
//! stream failures.

pub(crate) mod event;
mod failure;
mod fence;
pub(crate) mod stream;

use std::fmt;
use std::time::Duration;

use self::event::{CpuEvent, Mark};
use self::fence::{CpuBinding, CpuFence};
use self::stream::{CpuStream, Op};
use crate::backend::bound::BoundStreams;
use crate::backend::contract::{
    Backend, CopyFailed, CopyRole, CopyRun, CopyWaker, Layout, Ops, POISON_BYTE,
};
use crate::backend::copy_count::CopyCount;
use crate::error::{Error, Result};
use crate::host_ring::HostRing;
use crate::slot::index::DeviceIdx;
use crate::sync::native::{Arc, AtomicU64, Instant, Ordering};

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

/// The cpu backend: device slots in ordinary memory, asynchronous on purpose.
///
/// A [`CpuStream`](crate::CpuStream) is a thread executing an ordered queue of operations;
/// a [`CpuEvent`](crate::CpuEvent) is recorded on a stream and completes when the stream
/// reaches the record, with CUDA's meaning (a wait waits for the record that was latest
/// when the wait was made). Copies run on the backend's own copy stream, so ordering bugs
/// in the protocol show up as wrong bytes in CI. Delays and failures can be injected
/// through [`CpuOptions`]. It also serves CPU-only training: a batch's
/// [`bytes`](crate::Batch::bytes) are its device slot.
///
/// Release fences: `Fence::Stream(s)` records the slot's fence event on `s`;
/// `Fence::Event(e)` captures `e`'s latest record; `Fence::Sync` captures nothing. A batch
/// bound with `wait_on` is also fenced on each bound stream the fence does not name (one
/// record of the slot's fence event there). A batch dropped unbound (or bound to more
/// streams than it keeps) is fenced conservatively but without blocking: the fence records
/// a marker on every live [`CpuStream`](crate::CpuStream), and the slot's next copy waits
/// for all of them (stream-side), so it is safe even inside a stream's own closure.
///
/// A closure that panics on a stream is an error on that stream: the stream goes on, its
/// later records carry the failure, and a slot fenced on one of them fails the pipeline
/// when its next copy waits for it ([`CpuStream::synchronize`](crate::CpuStream::synchronize)
/// returns it). A conservative fence marks a failed stream too, while it lives.
///
/// Poison mode ([`ConfigBuilder::poison_released`](crate::ConfigBuilder::poison_released)):
/// a slot released with `Fence::Sync` is filled with 0xFF at once, by the releasing thread
/// (the caller promised the device is done); any other release hands the fill to the slot's
/// own poison stream (a thread per device slot, started only in this mode), which waits
/// for the captured fence, fills the slot and records the fence the next copy waits for.
/// So a late fence delays only its own slot's fill and reuse. The cost: one memset of the
/// slot per release, a hop to the poison stream's thread, and D more threads.
///
/// The backend's teardown waits, up to the pipeline's shutdown timeout, for its copy stream
/// and every release fence still pending; past it, it leaks the device memory and the
/// host ring (a stream still running may touch them) rather than free them under it.
pub struct Cpu {
    ring: Arc<HostRing>,
    /// Device slots, `device_slots × device_stride` bytes; touched only through `device`.
    memory: Vec<u8>,
    device: *mut u8,
    layout: Layout,
    copy_stream: CpuStream,
    /// READY(d): recorded on the copy stream after each copy into slot d.
    ready: Box<[CpuEvent]>,
    /// Batches copied so far (a prefix count): published by the copy stream after each
    /// run's copies; read by the copy thread, waited on by `Batch::synchronize` and
    /// `Batch::bytes`.
    completed: Arc<CopyCount>,
    /// Per-slot events a release records on the caller's stream and on bound streams.
    fences: Box<[CpuEvent]>,
    /// Poison mode only (else empty): per slot, the stream that fills it once its release
    /// fence completes, and the event recorded after the fill.
    poison: Box<[(CpuStream, CpuEvent)]>,
    options: CpuOptions,
    /// xorshift state for injected delays; Relaxed (copy thread only, orders nothing).
    rng: AtomicU64,
}

// SAFETY: `device` points into `memory`, which the struct owns; which thread may touch
// which slot is decided by the slot protocol. Everything else is Send + Sync.
unsafe impl Send for Cpu {}
// SAFETY: as above.
unsafe impl Sync for Cpu {}

impl fmt::Debug for Cpu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cpu")
            .field("layout", &self.layout)
            .field("options", &self.options)
            .finish()
    }
}

impl Cpu {
    fn slot_ptr(&self, d: usize) -> *mut u8 {
        assert!(d < self.ready.len(), "device slot {d} out of range");
        // SAFETY: d < device_slots, so the offset stays inside `memory`.
        unsafe { self.device.add(d * self.layout.device_stride) }
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

    /// Blocks, parked, until the copy of batch `seq` has completed (the copy count passes
    /// it). The count cannot fail on this backend: the copy stream goes on past a failed
    /// wait, so its `Complete` ops always run.
    pub(crate) fn wait_copied(&self, seq: u64) {
        self.completed.wait_past(seq);
    }

    /// A record of slot `d`'s fence event on `stream`.
    fn mark_on(&self, d: DeviceIdx, stream: &CpuStream) -> Mark {
        stream.record_mark(&self.fences[d.0].0)
    }

    /// Adds to `fence` a record on every bound stream but `skip`, or, when the batch was
    /// bound to more streams than it kept, the conservative fence.
    fn fence_bound(
        &self,
        d: DeviceIdx,
        fence: &mut CpuFence,
        bound: &BoundStreams<CpuBinding>,
        skip: Option<&CpuStream>,
    ) {
        if bound.overflowed() {
            CpuStream::mark_all_user_streams()
                .into_iter()
                .for_each(|mark| fence.push(mark));
            return;
        }
        for CpuBinding(stream) in bound.iter() {
            if !skip.is_some_and(|s| s.same_stream(stream)) {
                fence.push(self.mark_on(d, stream));
            }
        }
    }
}

impl Drop for Cpu {
    fn drop(&mut self) {
        // Every copy and every release fence handed to the copy stream (the pipeline hands
        // it the fences still pending before this, poison fills included) must be done
        // before the memory goes.
        let deadline = Instant::now().checked_add(self.layout.shutdown_timeout);
        let drained = match deadline {
            Some(deadline) => self.copy_stream.synchronize_until(deadline),
            None => {
                // A failed stream is drained all the same: its error is the pipeline's.
                let _ = self.copy_stream.synchronize();
                true
            }
        };
        if !drained {
            // A stream still runs past the shutdown timeout and may touch the device
            // slots or the ring: leak both rather than free them under it (documented).
            std::mem::forget(std::mem::take(&mut self.memory));
            std::mem::forget(self.ring.clone());
        }
    }
}

impl Backend for Cpu {
    type Options = CpuOptions;
    type Stream = CpuStream;
    type Event = CpuEvent;
    type DevicePtr = CpuDevicePtr;
}

impl Ops for Cpu {
    type Captured = CpuFence;
    type Binding = CpuBinding;

    fn open(
        options: &CpuOptions,
        ring: Arc<HostRing>,
        layout: Layout,
        waker: CopyWaker,
    ) -> Result<Self> {
        let mut memory = vec![0u8; layout.device_stride * layout.device_slots];
        let device = memory.as_mut_ptr();
        let spawn = |name, waker| {
            CpuStream::spawn(name, waker, layout.batch_scheduling).map_err(|e| Error::Spawn {
                thread: "cpu stream",
                source: Box::new(e),
            })
        };
        let copy_stream = spawn("pinring-cpucopy", Some(waker))?;
        let events = |n: usize| (0..n).map(|_| CpuEvent::new()).collect::<Box<[_]>>();
        let poison = if layout.poison_released {
            (0..layout.device_slots)
                .map(|_| Ok((spawn("pinring-poison", None)?, CpuEvent::new())))
                .collect::<Result<Box<[_]>>>()?
        } else {
            Box::new([])
        };
        Ok(Cpu {
            ring,
            memory,
            device,
            layout,
            copy_stream,
            ready: events(layout.device_slots),
            completed: Arc::new(CopyCount::new()),
            fences: events(layout.device_slots),
            poison,
            options: options.clone(),
            rng: AtomicU64::new(options.seed | 1),
        })
    }

    fn notifies_copy_done(&self, _: &CopyRole) -> bool {
        true
    }

    fn wait_fence(&self, _: &CopyRole, _d: DeviceIdx, fence: CpuFence) -> Result<()> {
        fence
            .into_marks()
            .for_each(|mark| self.copy_stream.wait_mark(mark));
        Ok(())
    }

    fn copy(&self, _: &CopyRole, run: &CopyRun) -> Result<(), CopyFailed> {
        assert!(
            run.last_bytes <= self.layout.batch_bytes,
            "copy larger than a slot"
        );
        if let Some(delay) = self.delay() {
            self.copy_stream.push(Op::Sleep(delay));
        }
        for (enqueued, (seq, h, d)) in run.each().enumerate() {
            if self.options.fail_copy_at == Some(seq) {
                if enqueued > 0 {
                    self.copy_stream.push(Op::Complete {
                        counter: self.completed.clone(),
                        upto: seq,
                    });
                }
                return Err(CopyFailed {
                    enqueued,
                    error: Error::Backend {
                        call: "cpu copy",
                        message: format!("injected copy failure at batch {seq}"),
                        source: None,
                    },
                });
            }
            self.copy_stream.push(Op::Copy {
                src: self.ring.slot_ptr(h.0),
                dst: self.slot_ptr(d.0),
                len: run.bytes_of(seq, self.layout.batch_bytes),
            });
            self.copy_stream.record(&self.ready[d.0]);
        }
        self.copy_stream.push(Op::Complete {
            counter: self.completed.clone(),
            upto: run.end(),
        });
        Ok(())
    }

    fn transfer_time(&self) -> Option<Duration> {
        Some(self.copy_stream.copy_time())
    }

    /// The copy count, or the failure of the copy stream: it waited on a release fence
    /// recorded on a stream that had failed (a closure that panicked there).
    fn completed(&self, _: &CopyRole) -> Result<u64> {
        if let Some(why) = self.copy_stream.failure() {
            return Err(Error::Backend {
                call: "cpu copy stream",
                message: format!(
                    "a device slot was released fenced on a stream that failed: {why}"
                ),
                source: None,
            });
        }
        // Acquire: pairs with the copy stream's Release store after the copies.
        Ok(self.completed.done())
    }

    /// Any cpu stream can be bound and fenced on.
    fn check_stream(&self, _stream: &CpuStream) -> Result<()> {
        Ok(())
    }

    /// As cuda's: no wait enqueued once the copy count passed `seq` (the copy stream
    /// published it, Release, after the copy ran; an op enqueued on `stream` after this
    /// Acquire load runs after it).
    fn ready_on(
        &self,
        d: DeviceIdx,
        seq: u64,
        stream: &CpuStream,
        _declared: bool,
    ) -> Result<CpuBinding> {
        if self.completed.done() <= seq {
            stream.wait_event(&self.ready[d.0]);
        }
        Ok(CpuBinding(stream.clone()))
    }

    /// Parks until the copy count passes `seq`: the copy stream publishes it after the
    /// run's copies (READY(d) is for stream-side waits).
    fn ready_sync(&self, _d: DeviceIdx, seq: u64) -> Result<()> {
        self.wait_copied(seq);
        Ok(())
    }

    fn capture_sync(&self, _d: DeviceIdx) -> CpuFence {
        CpuFence::nothing()
    }

    fn capture_stream(
        &self,
        d: DeviceIdx,
        stream: &CpuStream,
        bound: &BoundStreams<CpuBinding>,
    ) -> Result<CpuFence> {
        let mut fence = CpuFence::nothing();
        self.fence_bound(d, &mut fence, bound, Some(stream));
        fence.push(self.mark_on(d, stream));
        Ok(fence)
    }

    fn capture_event(
        &self,
        d: DeviceIdx,
        event: &CpuEvent,
        bound: &BoundStreams<CpuBinding>,
    ) -> Result<CpuFence> {
        let mut fence = CpuFence::nothing();
        self.fence_bound(d, &mut fence, bound, None);
        fence.push(Mark::latest(&event.0));
        Ok(fence)
    }

    fn capture_bound(&self, d: DeviceIdx, bound: &BoundStreams<CpuBinding>) -> CpuFence {
        let mut fence = CpuFence::nothing();
        self.fence_bound(d, &mut fence, bound, None);
        fence
    }

    /// A marker recorded on every live [`CpuStream`]: the slot's next copy waits for all of
    /// them (stream-side; the host never blocks).
    fn capture_conservative(&self, _d: DeviceIdx) -> CpuFence {
        let mut fence = CpuFence::nothing();
        CpuStream::mark_all_user_streams()
            .into_iter()
            .for_each(|mark| fence.push(mark));
        fence
    }

    /// With nothing to wait for (`Fence::Sync`), fills the slot here and now; otherwise
    /// hands the fill to the slot's poison stream, after the fence.
    fn poison(&self, d: DeviceIdx, fence: CpuFence) -> CpuFence {
        let (dst, len) = (self.slot_ptr(d.0), self.layout.device_stride);
        if fence.is_empty() {
            // SAFETY: `dst..dst + len` is device slot d. Its lease is the caller's and not
            // yet given back, so no copy into it can be enqueued; with no fence captured the
            // caller promised no device work reads it.
            unsafe { std::ptr::write_bytes(dst, POISON_BYTE, len) };
            return fence;
        }
        let Some((stream, filled)) = self.poison.get(d.0) else {
            return fence; // not opened in poison mode: leave the slot as it is
        };
        fence.into_marks().for_each(|mark| stream.wait_mark(mark));
        stream.push(Op::Fill {
            dst,
            len,
            byte: POISON_BYTE,
        });
        let mut poisoned = CpuFence::nothing();
        poisoned.push(stream.record_mark(&filled.0));
        poisoned
    }

    fn device_ptr(&self, d: DeviceIdx) -> CpuDevicePtr {
        CpuDevicePtr(self.slot_ptr(d.0))
    }
}
