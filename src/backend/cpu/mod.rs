//! The cpu backend: device slots in ordinary memory, asynchronous on purpose.
//!
//! A [`CpuStream`] is a thread executing an ordered queue of operations; a [`CpuEvent`]
//! is recorded on a stream and completes when the stream reaches the record, with CUDA's
//! meaning (a wait waits for the record that was latest when the wait was made; see
//! `event.rs`). Copies run on the backend's own copy stream, so ordering bugs in the
//! protocol show up as wrong bytes in CI. Delays and failures can be injected through
//! [`CpuOptions`]. It also serves CPU-only training: a batch's [`bytes`](crate::Batch::bytes)
//! are its device slot.
//!
//! Release fences: `Fence::Stream(s)` records the slot's fence event on `s`;
//! `Fence::Event(e)` captures `e`'s latest record; `Fence::Sync` captures nothing. A batch
//! dropped unbound is fenced conservatively but without blocking: the fence records a
//! marker on every live [`CpuStream`], and the slot's next copy waits for all of them
//! (stream-side), so it is safe even inside a stream's own closure.
//!
//! The backend's teardown waits, up to the pipeline's shutdown timeout, for its copy stream
//! and every release fence still pending; past it, it leaks the device memory and the
//! host ring (a stream still running may touch them) rather than free them under it.

mod event;
mod fence;
mod stream;

use std::fmt;
use std::time::Duration;

pub use event::CpuEvent;
pub use stream::CpuStream;

use self::fence::CpuFence;
use self::stream::Op;
use crate::backend::private::{CopyFailed, CopyRole, CopyRun, CopyWaker, Layout, Ops};
use crate::backend::Backend;
use crate::error::{Error, Result};
use crate::host_ring::HostRing;
use crate::slot::DeviceIdx;
use crate::sync::native::{Arc, AtomicU64, Instant, Ordering};
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

/// The cpu backend's device side of one pipeline.
pub struct Cpu {
    ring: Arc<HostRing>,
    /// Device slots, `device_slots × device_stride` bytes; touched only through `device`.
    memory: Vec<u8>,
    device: *mut u8,
    layout: Layout,
    copy_stream: CpuStream,
    /// READY(d): recorded on the copy stream after each copy into slot d.
    ready: Box<[CpuEvent]>,
    /// Batches copied so far (a prefix count): stored (Release) by the copy stream after
    /// each run's copies, loaded (Acquire) by the copy thread.
    completed: Arc<AtomicU64>,
    /// Per-slot events a `Fence::Stream` release records on the caller's stream.
    fences: Box<[CpuEvent]>,
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

    /// Blocks until READY(d) has completed (it cannot fail on this backend).
    pub(crate) fn wait_ready(&self, d: DeviceIdx) {
        self.ready[d.0].synchronize();
    }

    fn wait_op(fence: CpuFence, push: impl Fn(Op)) {
        match fence {
            CpuFence::Nothing => {}
            CpuFence::One(event, epoch) => push(Op::Wait { event, epoch }),
            CpuFence::All(marks) => {
                for (event, epoch) in marks {
                    push(Op::Wait { event, epoch });
                }
            }
        }
    }
}

impl Drop for Cpu {
    fn drop(&mut self) {
        // Every copy and every release fence handed to the copy stream (the pipeline hands
        // it the fences still pending before this) must be done before the memory goes.
        let deadline = Instant::now().checked_add(self.layout.shutdown_timeout);
        let drained = match deadline {
            Some(deadline) => self.copy_stream.synchronize_until(deadline),
            None => {
                self.copy_stream.synchronize();
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
    type Binding = CpuStream;

    fn open(
        options: &CpuOptions,
        ring: Arc<HostRing>,
        layout: Layout,
        waker: CopyWaker,
    ) -> Result<Self> {
        let mut memory = vec![0u8; layout.device_stride * layout.device_slots];
        let device = memory.as_mut_ptr();
        let copy_stream =
            CpuStream::spawn("pinring-cpucopy", Some(waker)).map_err(|e| Error::Spawn {
                thread: "cpu copy stream",
                source: Box::new(e),
            })?;
        let events = |n: usize| (0..n).map(|_| CpuEvent::new()).collect::<Box<[_]>>();
        Ok(Cpu {
            ring,
            memory,
            device,
            layout,
            copy_stream,
            ready: events(layout.device_slots),
            completed: Arc::new(AtomicU64::new(0)),
            fences: events(layout.device_slots),
            options: options.clone(),
            rng: AtomicU64::new(options.seed | 1),
        })
    }

    fn notifies_copy_done(&self, _: &CopyRole) -> bool {
        true
    }

    fn wait_fence(&self, _: &CopyRole, _d: DeviceIdx, fence: CpuFence) -> Result<()> {
        Self::wait_op(fence, |op| self.copy_stream.push(op));
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
            let len = if seq + 1 == run.end() {
                run.last_bytes
            } else {
                self.layout.batch_bytes
            };
            self.copy_stream.push(Op::Copy {
                src: self.ring.slot_ptr(h.0),
                dst: self.slot_ptr(d.0),
                len,
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

    fn completed(&self, _: &CopyRole) -> Result<u64> {
        // Acquire: pairs with the copy stream's Release store after the copies.
        Ok(self.completed.load(Ordering::Acquire))
    }

    fn ready_on(&self, d: DeviceIdx, stream: &CpuStream) -> Result<CpuStream> {
        stream.wait_event(&self.ready[d.0]);
        Ok(stream.clone())
    }

    fn ready_sync(&self, d: DeviceIdx) -> Result<()> {
        self.wait_ready(d);
        Ok(())
    }

    fn capture(&self, d: DeviceIdx, fence: Fence<'_, Self>) -> Result<CpuFence> {
        Ok(match fence {
            Fence::Sync => CpuFence::Nothing,
            Fence::Event(event) => CpuFence::One(event.0.clone(), event.0.latest()),
            Fence::Stream(stream) => {
                let event = &self.fences[d.0].0;
                CpuFence::One(event.clone(), stream.record_state(event))
            }
        })
    }

    fn capture_binding(&self, d: DeviceIdx, stream: CpuStream) -> CpuFence {
        let event = &self.fences[d.0].0;
        CpuFence::One(event.clone(), stream.record_state(event))
    }

    /// A marker recorded on every live [`CpuStream`]: the slot's next copy waits for all of
    /// them (stream-side; the host never blocks).
    fn capture_conservative(&self, _d: DeviceIdx) -> CpuFence {
        CpuFence::All(CpuStream::mark_all_user_streams())
    }

    fn device_ptr(&self, d: DeviceIdx) -> CpuDevicePtr {
        CpuDevicePtr(self.slot_ptr(d.0))
    }
}
