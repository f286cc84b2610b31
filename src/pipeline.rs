//! The pipeline: starts the threads, hands batches to the consumer, stops cleanly.

use std::time::{Duration, Instant};

use crate::backend::{Backend, CopyWaker, Cpu, Layout};
use crate::batch::Batch;
use crate::config::Config;
use crate::decode::Decode;
use crate::error::{Error, Result, Stage};
use crate::host_ring::{HostRing, HugePages};
use crate::park::{ParkSlot, Waited};
use crate::shared::{SampleBuffers, Shared, Token};
use crate::slot::{DeviceSlot, DeviceState, HostSlot, HostState};
use crate::stats::{nanos, Stats};
use crate::sync::{native, spsc, Arc, Builder, JoinHandle, Ordering};
use crate::{copy_thread, decode_pool, feeder};

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
/// user code — a decode, the source's `next` — are given [`Config::shutdown_timeout`]
/// and then left to end on their own). Batches still leased stay valid.
pub struct Pipeline<B: Backend = Cpu> {
    shared: Arc<Shared<B>>,
    ready: spsc::Consumer<Token>,
    next: u64,
    finished: Option<Finished>,
    pop_timeout: Option<Duration>,
    shutdown_timeout: Duration,
    copy_thread: Option<JoinHandle<()>>,
    feeder: Option<JoinHandle<()>>,
    pool: Option<rayon::ThreadPool>,
}

/// Stops a pipeline from any thread: pending and later `pop`s return
/// [`Error::Stopped`], and the pipeline's threads wind down. Get one with
/// [`Pipeline::stop_handle`].
#[derive(Clone)]
pub struct StopHandle<B: Backend = Cpu> {
    shared: Arc<Shared<B>>,
}

impl<B: Backend> StopHandle<B> {
    /// Stops the pipeline. Idempotent.
    pub fn stop(&self) {
        self.shared.stop();
    }
}

impl<B: Backend> std::fmt::Debug for StopHandle<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopHandle")
    }
}

impl<B: Backend> Pipeline<B> {
    /// Maps the host ring, opens the backend and starts the feeder, the decode pool and
    /// the copy thread. `samples` is pulled lazily, one batch ahead per free host slot;
    /// it may be infinite.
    pub fn new<D, I>(config: Config<B>, decoder: D, samples: I) -> Result<Self>
    where
        D: Decode,
        I: IntoIterator<Item = D::Sample>,
        I::IntoIter: Send + 'static,
    {
        let (host_slots, device_slots) = (config.host_slots, config.device_slots);
        let ring = native::Arc::new(HostRing::new(
            host_slots,
            config.host_stride,
            config.huge_pages,
        )?);
        let copier = native::Arc::new(ParkSlot::new());
        let layout = Layout {
            batch_bytes: config.batch_bytes,
            host_slots,
            device_slots,
        };
        let backend = B::open(
            &config.backend,
            ring.clone(),
            layout,
            CopyWaker(copier.clone()),
        )?;
        let shared = Arc::new(Shared::new(
            backend,
            ring,
            copier,
            device_slots,
            config.samples_per_batch,
            config.sample_bytes,
            config.spin,
        ));
        let (producer, consumer) = spsc::channel(device_slots + 1);
        let buffers = Arc::new(SampleBuffers::new(host_slots, config.samples_per_batch));
        let mut pipeline = Pipeline {
            shared: shared.clone(),
            ready: consumer,
            next: 0,
            finished: None,
            pop_timeout: config.pop_timeout,
            shutdown_timeout: config.shutdown_timeout,
            copy_thread: None,
            feeder: None,
            pool: None,
        };
        // From here on, an early return drops `pipeline`, which stops what was started.

        shared
            .live
            .fetch_add(config.decode_threads, Ordering::Relaxed);
        let on_exit = {
            let shared = shared.clone();
            move || shared.thread_exited()
        };
        let pool =
            match decode_pool::build_pool(config.decode_threads, &config.decode_cores, on_exit) {
                Ok(pool) => pool,
                Err(e) => {
                    shared
                        .live
                        .fetch_sub(config.decode_threads, Ordering::Relaxed);
                    return Err(e);
                }
            };
        {
            let shared = shared.clone();
            let buffers = buffers.clone();
            pool.spawn(move || decode_pool::run(&shared, &buffers, &decoder));
        }
        pipeline.pool = Some(pool);

        let copy_core = config.copy_core;
        pipeline.copy_thread = Some(spawn(&shared, "pinring-copy", move |shared| {
            if let Some(id) = copy_core {
                core_affinity::set_for_current(core_affinity::CoreId { id });
            }
            copy_thread::run(shared, producer);
        })?);

        let samples = samples.into_iter();
        let last_batch = config.last_batch;
        pipeline.feeder = Some(spawn(&shared, "pinring-feeder", move |shared| {
            feeder::run(shared, &buffers, samples, last_batch);
        })?);
        Ok(pipeline)
    }

    /// Waits for the next batch, in sequence order. `Ok(None)` once the source has ended
    /// and every batch was delivered. A failure in the source, a decoder or the backend
    /// is returned once, in order (after every batch before it); later calls return
    /// [`Error::Stopped`], as does every call once the pipeline is stopped (through a
    /// [`StopHandle`]). With a [`pop_timeout`](crate::ConfigBuilder::pop_timeout), a
    /// wait that runs out returns [`Error::PopTimeout`] naming the stage that is behind.
    pub fn pop(&mut self) -> Result<Option<Batch<B>>> {
        self.pop_within(self.pop_timeout)
    }

    /// Like [`pop`](Self::pop), but waits at most `timeout` for this call, whatever the
    /// configured pop timeout: a wait that runs out returns [`Error::PopTimeout`] naming
    /// the stage that is behind, and the pipeline goes on (pop again). For callers that
    /// wait in bounded slices, for example to check for signals in between.
    pub fn pop_for(&mut self, timeout: Duration) -> Result<Option<Batch<B>>> {
        self.pop_within(Some(timeout))
    }

    /// `pop` with an explicit bound on this call's wait (`None`: no bound).
    fn pop_within(&mut self, timeout: Option<Duration>) -> Result<Option<Batch<B>>> {
        if let Some(done) = self.take_ready()? {
            return Ok(done);
        }
        let start = Instant::now();
        // A timeout too long to add to now (say `Duration::MAX`) is no deadline at all.
        let deadline = timeout.and_then(|t| start.checked_add(t));
        let shared = &*self.shared;
        let mut token = None;
        let ready = &mut self.ready;
        let waited = shared.consumer.wait(
            shared.spin,
            deadline,
            // Stop is checked first, so a stopped pipeline hands out nothing more, even a
            // token that arrived while this pop was parked.
            || {
                !shared.stopped() && {
                    token = ready.pop();
                    token.is_some()
                }
            },
            || shared.stopped(),
        );
        let counters = &shared.counters;
        counters.stalls.fetch_add(1, Ordering::Relaxed);
        counters
            .stall_ns
            .fetch_add(nanos(start.elapsed()), Ordering::Relaxed);
        match waited {
            Waited::Ready => Ok(self
                .accept(token.expect("ready means a token was taken"))?
                .into_option()),
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

    /// Takes the next batch if it is ready; never blocks.
    pub fn try_pop(&mut self) -> Result<TryPop<B>> {
        match self.take_ready()? {
            Some(Some(batch)) => Ok(TryPop::Batch(batch)),
            Some(None) => Ok(TryPop::End),
            None => Ok(TryPop::NotReady),
        }
    }

    /// `Some(result)` if a token was ready or the pipeline has finished; `None` if the
    /// caller must wait.
    fn take_ready(&mut self) -> Result<Option<Option<Batch<B>>>> {
        match self.finished {
            Some(Finished::End) => return Ok(Some(None)),
            Some(Finished::Stopped) => return Err(Error::Stopped),
            None => {}
        }
        if self.shared.stopped() {
            // A stopped pipeline delivers nothing more, even batches already in the ring.
            self.finished = Some(Finished::Stopped);
            return Err(Error::Stopped);
        }
        match self.ready.pop() {
            Some(token) => Ok(Some(self.accept(token)?.into_option())),
            None => Ok(None),
        }
    }

    fn accept(&mut self, token: Token) -> Result<Popped<B>> {
        match token {
            Token::Batch { seq, slot, samples } => {
                debug_assert_eq!(seq, self.next);
                self.next = seq + 1;
                let counters = &self.shared.counters;
                counters.batches.fetch_add(1, Ordering::Relaxed);
                counters.bytes.fetch_add(
                    (samples * self.shared.sample_bytes) as u64,
                    Ordering::Relaxed,
                );
                Ok(Popped::Batch(Batch::new(
                    self.shared.clone(),
                    seq,
                    slot,
                    samples,
                )))
            }
            Token::End => {
                self.finished = Some(Finished::End);
                Ok(Popped::End)
            }
            Token::Failed => {
                self.finished = Some(Finished::Stopped);
                let failure = self
                    .shared
                    .failure
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take();
                Err(failure.map_or(Error::Stopped, |(_, e)| e))
            }
        }
    }

    /// The stage that holds up batch `self.next`.
    fn behind(&self) -> Stage {
        let k = self.next;
        let shared = &*self.shared;
        let d = (k % shared.device_slots() as u64) as usize;
        if let (seq, DeviceState::Leased | DeviceState::Copying) = shared.device[d].state() {
            if seq < k {
                return Stage::Consumer;
            }
        }
        match shared.host[(k % shared.host_slots() as u64) as usize].state() {
            (seq, HostState::Decoding) if seq == k => Stage::Decode,
            (seq, HostState::Filled | HostState::InFlight) if seq == k => Stage::Copy,
            _ => Stage::Source,
        }
    }

    /// A handle that stops this pipeline from another thread.
    pub fn stop_handle(&self) -> StopHandle<B> {
        StopHandle {
            shared: self.shared.clone(),
        }
    }

    /// A snapshot of the counters and slot states.
    pub fn stats(&self) -> Stats {
        let shared = &*self.shared;
        let c = &shared.counters;
        Stats {
            batches: c.batches.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            source: c.source.snapshot(),
            decode: c.decode.snapshot(),
            copy: c.copy.snapshot(),
            consumer_stalls: c.stalls.load(Ordering::Relaxed),
            consumer_stall_time: Duration::from_nanos(c.stall_ns.load(Ordering::Relaxed)),
            host_slots: shared.host.iter().map(HostSlot::state).collect(),
            device_slots: shared.device.iter().map(DeviceSlot::state).collect(),
        }
    }

    /// Whether the host ring got the huge pages asked for, and if not, why.
    pub fn huge_pages(&self) -> &HugePages {
        self.shared.ring.huge_pages()
    }

    /// The backend, for backend-specific queries.
    pub fn backend(&self) -> &B {
        &self.shared.backend
    }
}

impl<B: Backend> Drop for Pipeline<B> {
    fn drop(&mut self) {
        self.shared.stop();
        // Workers end after their current job; the dispatcher's job ends at the stop.
        drop(self.pool.take());
        if let Some(copy) = self.copy_thread.take() {
            // The copy thread runs no user code and never blocks past a stop: bounded.
            let _ = copy.join();
        }
        // As in `pop`: a timeout past what an `Instant` can hold waits without a deadline.
        let deadline = Instant::now().checked_add(self.shutdown_timeout);
        if self.shared.wait_for_exits(deadline) {
            if let Some(feeder) = self.feeder.take() {
                let _ = feeder.join();
            }
        }
        // Otherwise a thread is still inside user code (a decode or the source's `next`):
        // it ends when that returns, and its handle is detached here.
    }
}

impl<B: Backend> std::fmt::Debug for Pipeline<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline")
            .field("next", &self.next)
            .field("finished", &self.finished)
            .finish()
    }
}

enum Popped<B: Backend> {
    Batch(Batch<B>),
    End,
}

impl<B: Backend> Popped<B> {
    fn into_option(self) -> Option<Batch<B>> {
        match self {
            Popped::Batch(b) => Some(b),
            Popped::End => None,
        }
    }
}

/// Spawns a named pipeline thread that counts itself in `live` until it ends.
fn spawn<B: Backend>(
    shared: &Arc<Shared<B>>,
    name: &'static str,
    body: impl FnOnce(&Shared<B>) + Send + 'static,
) -> Result<JoinHandle<()>> {
    let shared = shared.clone();
    shared.live.fetch_add(1, Ordering::Relaxed);
    let guard_shared = shared.clone();
    Builder::new()
        .name(name.into())
        .spawn(move || {
            // Counted out even if `body` unwinds.
            struct Exit<B: Backend>(Arc<Shared<B>>);
            impl<B: Backend> Drop for Exit<B> {
                fn drop(&mut self) {
                    self.0.thread_exited();
                }
            }
            let exit = Exit(shared);
            body(&exit.0);
        })
        .map_err(|e| {
            guard_shared.live.fetch_sub(1, Ordering::Relaxed);
            Error::Spawn {
                thread: name,
                source: Box::new(e),
            }
        })
}

#[cfg(pinring_loom)]
impl<B: Backend> Pipeline<B> {
    /// Models only: a pipeline over `shared` whose stages the model runs on loom threads
    /// of its own (it joins them after dropping the pipeline).
    pub(crate) fn for_model(shared: Arc<Shared<B>>, ready: spsc::Consumer<Token>) -> Self {
        Pipeline {
            shared,
            ready,
            next: 0,
            finished: None,
            pop_timeout: None,
            shutdown_timeout: Duration::from_secs(3600),
            copy_thread: None,
            feeder: None,
            pool: None,
        }
    }

    /// Models only: takes the batch tokens still in the ready ring (never handed out).
    pub(crate) fn unpopped(&mut self) -> u64 {
        let mut n = 0;
        while let Some(token) = self.ready.pop() {
            n += u64::from(matches!(token, Token::Batch { .. }));
        }
        n
    }
}
