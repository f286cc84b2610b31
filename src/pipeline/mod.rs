//! The pipeline: hands batches to the consumer in sequence order, says what holds it up,
//! and stops cleanly. `start.rs` wires the parts and starts the threads.

pub(crate) mod start;

use std::fmt;
use std::marker::PhantomData;
use std::time::Duration;

use crate::backend::contract::Backend;
use crate::backend::cpu::Cpu;
use crate::batch::Batch;
use crate::config::NodeShare;
use crate::control::Control;
use crate::device_side::DeviceSide;
use crate::error::{Error, Result, Stage};
use crate::host_ring::HugePages;
use crate::park::Waited;
use crate::ready_ring::{Receiver, Token};
use crate::slot::host::HostSlots;
use crate::slot::stamp::{DeviceState, HostState};
use crate::source_tally::SourceTally;
use crate::stats::{nanos, Stats};
use crate::sync::{native, Arc, Instant};
use crate::trace::cycle::SlotTimeline;
use crate::trace::{Kind, Track};

/// What [`Pipeline::try_pop`] found.
#[derive(Debug)]
pub enum TryPop<B: Backend = Cpu> {
    /// The next batch.
    Batch(Batch<B>),
    /// No batch is ready yet.
    NotReady,
    /// The source has ended: every batch was delivered.
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finished {
    /// The End token was popped.
    End,
    /// A failure was reported, or the pipeline was stopped.
    Stopped,
}

/// Streams batches from a source through decode, the pinned host ring and the copy
/// thread into device slots. See the crate docs for an example.
///
/// Dropping the pipeline stops it: every thread ends in bounded time (threads inside
/// user code — a decode, the source's `next` — are given [`Config::shutdown_timeout`](crate::Config::shutdown_timeout)
/// and then left to end on their own; a source blocked in `next` holds no device or
/// pinned memory). Batches still leased stay valid.
pub struct Pipeline<B: Backend = Cpu> {
    pub(crate) control: Arc<Control>,
    pub(crate) host: Arc<HostSlots>,
    pub(crate) device: Arc<DeviceSide<B>>,
    pub(crate) ring: native::Arc<crate::host_ring::HostRing>,
    pub(crate) ready: Receiver,
    next: u64,
    finished: Option<Finished>,
    pop_timeout: Option<Duration>,
    lease_timeout: Duration,
    /// The declared consumer stream ([`ConfigBuilder::consumer_stream`](crate::ConfigBuilder::consumer_stream)):
    /// every batch popped waits on it and is bound to it.
    consumer_stream: Option<B::Stream>,
    /// The lease clock: since when pops have waited for batch `.0` (the first pop that
    /// found it not ready). It runs across calls (a loop of short `pop_for`s, the Python
    /// binding's waits in slices) and restarts only when another batch is awaited or a
    /// lease check finds the wait not held up by a lease.
    lease_clock: Option<(u64, Instant)>,
    shutdown_timeout: Duration,
    /// Decode workers in the pool (for [`Stats`]).
    decode_threads: usize,
    /// The node's share the pipeline took (for [`Stats`]).
    node_share: NodeShare,
    /// The decoder's per-source counters, if it keeps them (for [`Stats::sources`]).
    source_tally: Option<std::sync::Arc<SourceTally>>,
    copy_thread: Option<native::JoinHandle<()>>,
    feeder: Option<native::JoinHandle<()>>,
    pool: Option<rayon::ThreadPool>,
}

/// Stops a pipeline from any thread: pending and later `pop`s return
/// [`Error::Stopped`], and the pipeline's threads wind down. Get one with
/// [`Pipeline::stop_handle`].
pub struct StopHandle<B: Backend = Cpu> {
    control: Arc<Control>,
    backend: PhantomData<fn() -> B>,
}

impl<B: Backend> Clone for StopHandle<B> {
    fn clone(&self) -> Self {
        StopHandle {
            control: self.control.clone(),
            backend: PhantomData,
        }
    }
}

impl<B: Backend> StopHandle<B> {
    /// Stops the pipeline. Idempotent.
    pub fn stop(&self) {
        self.control.stop();
    }
}

impl<B: Backend> fmt::Debug for StopHandle<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StopHandle")
    }
}

impl<B: Backend> Pipeline<B> {
    /// Waits for the next batch, in sequence order. `Ok(None)` once the source has ended
    /// and every batch was delivered.
    ///
    /// With a declared consumer stream
    /// ([`ConfigBuilder::consumer_stream`](crate::ConfigBuilder::consumer_stream)), the
    /// batch comes bound to it: the stream already waits (stream-side) for the batch, as
    /// after [`Batch::wait_on`], and [`Fence::Bound`](crate::Fence::Bound) releases it.
    ///
    /// A failure in the source, a decoder or the backend is returned once, in order (after
    /// every batch before it); later calls return [`Error::Stopped`], as does every call
    /// once the pipeline is stopped (through a [`StopHandle`]). With a
    /// [`pop_timeout`](crate::ConfigBuilder::pop_timeout), a wait that runs out returns
    /// [`Error::PopTimeout`] naming the stage that is behind. A pop that cannot go on
    /// because the consumer holds every device slot returns [`Error::AllSlotsLeased`] after
    /// the [`lease_timeout`](crate::ConfigBuilder::lease_timeout) instead of hanging.
    pub fn pop(&mut self) -> Result<Option<Batch<B>>> {
        self.pop_within(self.pop_timeout)
    }

    /// As [`pop`](Self::pop), waiting at most `timeout` for this call (whatever the
    /// configured pop timeout): then [`Error::PopTimeout`]. A loop of short `pop_for`s is
    /// how a caller that must stay responsive (to signals, say) waits: the lease timeout
    /// counts from the first of them that found no batch, so the loop still ends in
    /// [`Error::AllSlotsLeased`] when every device slot stays held. `pop_for(Duration::ZERO)`
    /// never waits: it returns the next batch if it is ready, else `PopTimeout` naming the
    /// stage that holds it up.
    pub fn pop_for(&mut self, timeout: Duration) -> Result<Option<Batch<B>>> {
        self.pop_within(Some(timeout))
    }

    fn pop_within(&mut self, timeout: Option<Duration>) -> Result<Option<Batch<B>>> {
        let span = self.control.span_start();
        let popped = self.wait_for_batch(timeout);
        self.trace_pop(span, &popped);
        popped
    }

    /// Records a pop span for a pop that returned a batch.
    fn trace_pop(&self, span: Option<u64>, popped: &Result<Option<Batch<B>>>) {
        if let Ok(Some(batch)) = popped {
            (self.control).span(span, Kind::Pop, Track::Consumer, batch.seq(), 0);
        }
    }

    fn wait_for_batch(&mut self, timeout: Option<Duration>) -> Result<Option<Batch<B>>> {
        if let Some(done) = self.take_ready()? {
            return Ok(done);
        }
        let start = Instant::now();
        let since = match self.lease_clock {
            Some((next, since)) if next == self.next => since,
            _ => {
                self.lease_clock = Some((self.next, start));
                start
            }
        };
        if timeout == Some(Duration::ZERO) {
            // Never waits: the stage behind, as it stands.
            return Err(Error::PopTimeout {
                waited: Duration::ZERO,
                behind: self.behind(),
            });
        }
        // A timeout too long to add to now (say `Duration::MAX`) is no deadline at all.
        let deadline = timeout.and_then(|t| start.checked_add(t));
        let mut lease_check = since.checked_add(self.lease_timeout);
        let control = &*self.control;
        let ready = &mut self.ready;
        let mut token = None;
        let outcome = loop {
            let wake_at = match (deadline, lease_check) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            let waited = control.consumer.wait(
                control.spin(),
                wake_at,
                // Stop is checked first, so a stopped pipeline hands out nothing more, even
                // a token that arrived while this pop was parked.
                || {
                    !control.stopped() && {
                        token = ready.pop();
                        token.is_some()
                    }
                },
                || control.stopped(),
            );
            if waited != Waited::TimedOut {
                break waited;
            }
            let now = Instant::now();
            if lease_check.is_some_and(|check| now >= check) {
                if let Some(leased) = leases_blocking(&self.device, self.next) {
                    self.note_stall(now.saturating_duration_since(start));
                    return Err(Error::AllSlotsLeased {
                        waited: now.saturating_duration_since(since),
                        leased,
                        device_slots: self.device.slots.len(),
                    });
                }
                // Not held up by a lease: the clock starts again.
                self.lease_clock = Some((self.next, now));
                lease_check = now.checked_add(self.lease_timeout);
            }
            if deadline.is_some_and(|d| now >= d) {
                break Waited::TimedOut;
            }
        };
        self.note_stall(start.elapsed());
        match outcome {
            Waited::Ready => Ok(self.accept(token.expect("ready means a token was taken"))?),
            Waited::Stopped => {
                self.finished = Some(Finished::Stopped);
                Err(Error::Stopped)
            }
            Waited::TimedOut => Err(Error::PopTimeout {
                waited: start.elapsed(),
                behind: self.behind(),
            }),
        }
    }

    fn note_stall(&self, waited: Duration) {
        let counters = &self.control.counters.consumer;
        counters.stalls.fetch_add(1, native::Ordering::Relaxed);
        counters
            .stall_ns
            .fetch_add(nanos(waited), native::Ordering::Relaxed);
    }

    /// Takes the next batch if it is ready; never blocks.
    pub fn try_pop(&mut self) -> Result<TryPop<B>> {
        let span = self.control.span_start();
        let taken = self.take_ready();
        if let Ok(Some(Some(batch))) = &taken {
            (self.control).span(span, Kind::Pop, Track::Consumer, batch.seq(), 0);
        }
        Ok(match taken? {
            Some(Some(batch)) => TryPop::Batch(batch),
            Some(None) => TryPop::End,
            None => TryPop::NotReady,
        })
    }

    /// `Some(result)` if a token was ready or the pipeline has finished; `None` if the
    /// caller must wait.
    fn take_ready(&mut self) -> Result<Option<Option<Batch<B>>>> {
        match self.finished {
            Some(Finished::End) => return Ok(Some(None)),
            Some(Finished::Stopped) => return Err(Error::Stopped),
            None => {}
        }
        if self.control.stopped() {
            // A stopped pipeline delivers nothing more, even batches already in the ring.
            self.finished = Some(Finished::Stopped);
            return Err(Error::Stopped);
        }
        match self.ready.pop() {
            Some(token) => Ok(Some(self.accept(token)?)),
            None => {
                // Nothing to pop: the copy thread refills what is released now, whatever
                // the release wake's threshold (src/slot/release_wake.rs).
                self.device.slots.ask(&self.device.copier);
                Ok(None)
            }
        }
    }

    fn accept(&mut self, token: Token) -> Result<Option<Batch<B>>> {
        match token {
            Token::Batch { seq, slot, samples } => {
                debug_assert_eq!(seq, self.next);
                self.next = seq + 1;
                let counters = &self.control.counters.consumer;
                counters.batches.fetch_add(1, native::Ordering::Relaxed);
                counters.bytes.fetch_add(
                    (samples * self.device.sample_bytes) as u64,
                    native::Ordering::Relaxed,
                );
                let mut batch = Batch::new(self.device.clone(), seq, slot, samples);
                if let Some(stream) = &self.consumer_stream {
                    // On failure (a dead context) the batch is dropped, fenced as an unbound
                    // drop is, and the error returned.
                    batch.wait_on_declared(stream)?;
                }
                Ok(Some(batch))
            }
            Token::End => {
                self.finished = Some(Finished::End);
                Ok(None)
            }
            Token::Failed => {
                self.finished = Some(Finished::Stopped);
                Err(self.control.take_failure().unwrap_or(Error::Stopped))
            }
        }
    }

    /// The stage that holds up batch `self.next`.
    fn behind(&self) -> Stage {
        let k = self.next;
        let d = self.device.slots.idx(k);
        if let (seq, DeviceState::Leased | DeviceState::Copying) = self.device.slots.state(d)
            && seq < k
        {
            return Stage::Consumer;
        }
        match self.host.state(k) {
            (seq, HostState::Decoding) if seq == k => Stage::Decode,
            (seq, HostState::Filled | HostState::InFlight) if seq == k => Stage::Copy,
            _ => Stage::Source,
        }
    }

    /// A handle that stops this pipeline from another thread.
    pub fn stop_handle(&self) -> StopHandle<B> {
        StopHandle {
            control: self.control.clone(),
            backend: PhantomData,
        }
    }

    /// Writes the timeline recorded so far as Chrome trace JSON (open it in Perfetto's UI,
    /// <https://ui.perfetto.dev>, or `chrome://tracing`); returns how many spans it holds.
    /// Tracing is off unless [`ConfigBuilder::trace`](crate::ConfigBuilder::trace) turned
    /// it on: then this fails with [`std::io::ErrorKind::Unsupported`]. Call it while the
    /// pipeline runs or after the last batch; spans still being recorded are left out.
    ///
    /// ```
    /// use pinring::{Config, Fence, Pipeline};
    ///
    /// let config = Config::builder().batch_size(2).bytes_per_sample(4).trace(1024).build()?;
    /// let copy = |s: u32, out: &mut [u8]| -> Result<(), pinring::DecodeError> {
    ///     out.copy_from_slice(&s.to_le_bytes());
    ///     Ok(())
    /// };
    /// let mut pipeline = Pipeline::new(config, pinring::decode_fn(copy), 0..8u32)?;
    /// while let Some(batch) = pipeline.pop()? {
    ///     batch.release(Fence::Sync)?;
    /// }
    /// let mut json = Vec::new();
    /// let spans = pipeline.write_trace(&mut json)?;
    /// assert!(spans >= 4 * 5); // source, decode, copy enqueue, H2D, pop, release per batch
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn write_trace(&self, out: impl std::io::Write) -> std::io::Result<usize> {
        match &self.control.trace {
            Some(trace) => trace.write_json(out),
            None => Err(std::io::Error::new(
                std::io::ErrorKind::Unsupported,
                "tracing is off: turn it on with ConfigBuilder::trace(spans)",
            )),
        }
    }

    /// Each batch's cycle through its host and device slots, read from the trace, and the
    /// hand-offs of the cycle (which one waits, and how long): `None` with tracing off
    /// ([`ConfigBuilder::trace`](crate::ConfigBuilder::trace) turns it on). Its `Display`
    /// is a table of the hand-offs' p50, p90 and max.
    pub fn slot_timeline(&self) -> Option<SlotTimeline> {
        let trace = self.control.trace.as_ref()?;
        Some(SlotTimeline::from_trace(
            trace,
            self.host.len(),
            self.device.slots.len(),
        ))
    }

    /// A snapshot of the counters and slot states.
    pub fn stats(&self) -> Stats {
        let c = &self.control.counters;
        let relaxed = native::Ordering::Relaxed;
        Stats {
            elapsed: c.started.elapsed(),
            batches: c.consumer.batches.load(relaxed),
            bytes: c.consumer.bytes.load(relaxed),
            source: c.source.snapshot(),
            decode: c.decode.snapshot(),
            decode_threads: self.decode_threads,
            node_share: self.node_share,
            copy: c.copy.snapshot(),
            copy_waited_for_device_slot: Duration::from_nanos(c.copy_device_wait.load(relaxed)),
            transfer: self.device.backend.transfer_time(),
            copies: c.copies.load(relaxed),
            consumer_stalls: c.consumer.stalls.load(relaxed),
            consumer_stall_time: Duration::from_nanos(c.consumer.stall_ns.load(relaxed)),
            host_slots: self.host.states(),
            device_slots: self.device.slots.states(),
            sources: self
                .source_tally
                .as_ref()
                .map_or_else(Vec::new, |t| t.snapshot()),
        }
    }

    /// Whether the host ring got the huge pages asked for, and if not, why.
    pub fn huge_pages(&self) -> &HugePages {
        self.ring.huge_pages()
    }

    /// The backend, for what it offers callers (for example
    /// [`Cuda::ordinal`](crate::Cuda::ordinal)); the operations the pipeline drives are
    /// not callable from outside the crate.
    pub fn backend(&self) -> &B {
        &self.device.backend
    }
}

/// When batch `next` waits for its device slot and that slot holds a batch already handed
/// out (LEASED(next - D)), every slot it could use is leased: the leased slots and their
/// batches. `None` when the next batch is not held up by a lease.
fn leases_blocking<B: Backend>(device: &DeviceSide<B>, next: u64) -> Option<Vec<(usize, u64)>> {
    let slots = &device.slots;
    let d = slots.idx(next);
    match slots.state(d) {
        (seq, DeviceState::Leased) if seq + slots.len() as u64 == next => Some(
            slots
                .states()
                .into_iter()
                .enumerate()
                .filter(|&(_, (seq, state))| state == DeviceState::Leased && seq < next)
                .map(|(d, (seq, _))| (d, seq))
                .collect(),
        ),
        _ => None,
    }
}

impl<B: Backend> Drop for Pipeline<B> {
    fn drop(&mut self) {
        self.control.stop();
        // Workers end after their current item; their jobs return at the stop.
        drop(self.pool.take());
        if let Some(copy) = self.copy_thread.take() {
            // The copy thread runs no user code and never blocks past a stop: bounded.
            let _ = copy.join();
        }
        // As in `pop`: a timeout past what an `Instant` can hold waits without a deadline.
        let deadline = Instant::now().checked_add(self.shutdown_timeout);
        if self.control.wait_for_exits(deadline)
            && let Some(feeder) = self.feeder.take()
        {
            let _ = feeder.join();
        }
        // Otherwise a thread is still inside user code (a decode or the source's `next`):
        // it ends when that returns, and its handle is detached here.
    }
}

impl<B: Backend> fmt::Debug for Pipeline<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pipeline")
            .field("next", &self.next)
            .field("finished", &self.finished)
            .finish()
    }
}
