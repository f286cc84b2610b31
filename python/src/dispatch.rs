//! The two backends behind one type each: a loader, a batch and a stop handle of either
//! the cpu or the cuda backend, chosen at run time from `device=`.

use std::time::Duration;

use pinring::source::{AnySource, Run, State};
use pinring::{Backend, Batch, Config, Cpu, Cuda, Loader, Stats, StopHandle, TryPop, MAX_DIMS};

/// A loader of either backend.
#[derive(Debug)]
pub(crate) enum AnyLoader {
    /// The cpu backend.
    Cpu(Loader<AnySource, Cpu>),
    /// The cuda backend.
    Cuda(Loader<AnySource, Cuda>),
}

/// Runs `$body` with `$l` bound to the loader, whichever backend it runs on.
macro_rules! on_backend {
    ($loader:expr, $l:ident => $body:expr) => {
        match $loader {
            AnyLoader::Cpu($l) => $body,
            AnyLoader::Cuda($l) => $body,
        }
    };
}

/// What a pop that may not wait found.
pub(crate) enum Popped {
    /// The next batch.
    Batch(AnyBatch),
    /// The end: of the run, or of the epoch asked for.
    End,
    /// Nothing ready (only a pop that does not wait).
    NotReady,
}

fn popped<B: Backend>(p: TryPop<B>, wrap: fn(Batch<B>) -> AnyBatch) -> Popped {
    match p {
        TryPop::Batch(b) => Popped::Batch(wrap(b)),
        TryPop::End => Popped::End,
        TryPop::NotReady => Popped::NotReady,
    }
}

fn waited<B: Backend>(p: Option<Batch<B>>, wrap: fn(Batch<B>) -> AnyBatch) -> Popped {
    p.map_or(Popped::End, |b| Popped::Batch(wrap(b)))
}

impl AnyLoader {
    /// The next batch (of epoch `epoch`, when given) if it is ready; never waits.
    pub(crate) fn try_pop(&mut self, epoch: Option<u64>) -> pinring::Result<Popped> {
        Ok(match (self, epoch) {
            (AnyLoader::Cpu(l), None) => popped(l.try_pop()?, AnyBatch::Cpu),
            (AnyLoader::Cpu(l), Some(e)) => popped(l.try_pop_in_epoch(e)?, AnyBatch::Cpu),
            (AnyLoader::Cuda(l), None) => popped(l.try_pop()?, AnyBatch::Cuda),
            (AnyLoader::Cuda(l), Some(e)) => popped(l.try_pop_in_epoch(e)?, AnyBatch::Cuda),
        })
    }

    /// The next batch (of epoch `epoch`, when given), waiting at most `timeout`.
    pub(crate) fn pop_for(
        &mut self,
        epoch: Option<u64>,
        timeout: Duration,
    ) -> pinring::Result<Popped> {
        Ok(match (self, epoch) {
            (AnyLoader::Cpu(l), None) => waited(l.pop_for(timeout)?, AnyBatch::Cpu),
            (AnyLoader::Cpu(l), Some(e)) => waited(l.pop_in_epoch_for(e, timeout)?, AnyBatch::Cpu),
            (AnyLoader::Cuda(l), None) => waited(l.pop_for(timeout)?, AnyBatch::Cuda),
            (AnyLoader::Cuda(l), Some(e)) => {
                waited(l.pop_in_epoch_for(e, timeout)?, AnyBatch::Cuda)
            }
        })
    }

    /// [`Loader::state_at`] the next step: the state once every batch popped was consumed.
    pub(crate) fn state(&self) -> pinring::Result<State> {
        on_backend!(self, l => l.state_at(l.next_step()))
    }

    /// [`Loader::resume`].
    pub(crate) fn resume(&mut self, state: &State, weights: Option<&[f64]>) -> pinring::Result<()> {
        on_backend!(self, l => l.resume(state, weights))
    }

    /// [`Loader::reshard`].
    pub(crate) fn reshard(&mut self, rank: u64, world_size: u64) -> pinring::Result<()> {
        on_backend!(self, l => l.reshard(rank, world_size))
    }

    /// [`Loader::popped`].
    pub(crate) fn popped(&self) -> u64 {
        on_backend!(self, l => l.popped())
    }

    /// [`RankGuard::record`](pinring::RankGuard::record) of this loader, and its pops.
    pub(crate) fn guard_record(
        &self,
        guard: &mut pinring::RankGuard,
    ) -> pinring::Result<(pinring::RankRecord, u64)> {
        on_backend!(self, l => Ok((guard.record(l)?, l.popped())))
    }

    /// [`Loader::epoch`].
    pub(crate) fn epoch(&mut self) -> u64 {
        on_backend!(self, l => l.epoch())
    }

    /// [`Loader::epoch_batches`].
    pub(crate) fn epoch_batches(&self) -> Option<u64> {
        on_backend!(self, l => l.epoch_batches())
    }

    /// [`Loader::epoch_len`].
    pub(crate) fn epoch_len(&self) -> Option<u64> {
        on_backend!(self, l => l.epoch_len())
    }

    /// [`Loader::total_batches`].
    pub(crate) fn total_batches(&self) -> pinring::Result<Option<u64>> {
        on_backend!(self, l => l.total_batches())
    }

    /// [`Loader::epochs`].
    pub(crate) fn epochs(&self) -> Option<u64> {
        on_backend!(self, l => l.epochs())
    }

    /// [`Loader::ended`].
    pub(crate) fn ended(&self) -> bool {
        on_backend!(self, l => l.ended())
    }

    /// [`Loader::run`].
    pub(crate) fn run(&self) -> &Run {
        on_backend!(self, l => l.run())
    }

    /// [`Loader::source`].
    pub(crate) fn source(&self) -> &AnySource {
        on_backend!(self, l => l.source())
    }

    /// The host and device slots of its pipeline ([`Config`]).
    pub(crate) fn slots(&self) -> (usize, usize) {
        fn of<B: Backend>(c: &Config<B>) -> (usize, usize) {
            (c.host_slots(), c.device_slots())
        }
        on_backend!(self, l => of(l.config()))
    }

    /// [`Loader::stats`].
    pub(crate) fn stats(&self) -> Stats {
        on_backend!(self, l => l.stats())
    }

    /// [`Loader::write_trace`].
    pub(crate) fn write_trace(&self, out: impl std::io::Write) -> std::io::Result<usize> {
        on_backend!(self, l => l.write_trace(out))
    }

    /// [`Loader::stop_handle`].
    pub(crate) fn stop_handle(&self) -> Option<AnyStop> {
        match self {
            AnyLoader::Cpu(l) => l.stop_handle().map(AnyStop::Cpu),
            AnyLoader::Cuda(l) => l.stop_handle().map(AnyStop::Cuda),
        }
    }

    /// [`Loader::close`]: the pipeline's threads joined, its memory freed.
    pub(crate) fn close(&mut self) {
        on_backend!(self, l => l.close())
    }

    /// [`Loader::is_closed`].
    pub(crate) fn is_closed(&self) -> bool {
        on_backend!(self, l => l.is_closed())
    }
}

/// Stops a pipeline of either backend from any thread.
#[derive(Debug, Clone)]
pub(crate) enum AnyStop {
    /// The cpu backend's.
    Cpu(StopHandle<Cpu>),
    /// The cuda backend's.
    Cuda(StopHandle<Cuda>),
}

impl AnyStop {
    /// [`StopHandle::stop`].
    pub(crate) fn stop(&self) {
        match self {
            AnyStop::Cpu(s) => s.stop(),
            AnyStop::Cuda(s) => s.stop(),
        }
    }
}

/// A batch of either backend.
#[derive(Debug)]
pub(crate) enum AnyBatch {
    /// From a cpu-backend pipeline.
    Cpu(Batch<Cpu>),
    /// From a cuda-backend pipeline.
    Cuda(Batch<Cuda>),
}

/// What a batch says about itself, read once when it is popped: plain numbers, no
/// allocation (its ids are read from the lease when asked, see `Batch.sample_ids`).
#[derive(Debug)]
pub(crate) struct BatchFacts {
    /// [`Batch::seq`].
    pub(crate) seq: u64,
    /// [`Batch::samples`].
    pub(crate) samples: usize,
    /// [`Batch::slot`].
    pub(crate) slot: usize,
    /// The slot's address: a host pointer on cpu, a `CUdeviceptr` on cuda.
    pub(crate) ptr: u64,
    /// [`Batch::epoch`].
    pub(crate) epoch: u64,
    /// Rows the batch describes: its [`Batch::sample_ids`] (a sample, or a packed
    /// document, each).
    pub(crate) rows: usize,
    /// The longest of [`Batch::row_lens`] where the source gives lengths (a packed
    /// document's tokens in the batch); `None` where it gives none.
    pub(crate) max_row_len: Option<u32>,
    /// [`Batch::step`].
    pub(crate) step: Option<u64>,
    /// [`Batch::dims`]: the extents its fields' lengths come from.
    pub(crate) dims: [u64; MAX_DIMS],
}

/// What `batch` says about itself, with its slot's address as a number.
fn facts<B: Backend>(b: &Batch<B>, ptr: u64) -> BatchFacts {
    BatchFacts {
        seq: b.seq(),
        samples: b.samples(),
        slot: b.slot(),
        ptr,
        epoch: b.epoch(),
        rows: b.sample_ids().len(),
        max_row_len: b.row_lens().iter().copied().max().filter(|&m| m > 0),
        step: b.step(),
        dims: b.dims(),
    }
}

impl AnyBatch {
    /// The device slot and its address (a host pointer on cpu, a `CUdeviceptr` on cuda).
    pub(crate) fn slot_and_ptr(&self) -> (usize, u64) {
        match self {
            AnyBatch::Cpu(b) => (b.slot(), b.device_ptr().as_ptr() as usize as u64),
            AnyBatch::Cuda(b) => (b.slot(), b.device_ptr()),
        }
    }

    /// The batch's rows, copied: [`Batch::sample_ids`], [`Batch::row_lens`],
    /// [`Batch::row_sources`].
    pub(crate) fn rows(&self) -> RowColumns {
        fn of<B: Backend>(b: &Batch<B>) -> RowColumns {
            RowColumns {
                ids: b.sample_ids().into(),
                lens: b.row_lens().into(),
                sources: b.row_sources().into(),
            }
        }
        match self {
            AnyBatch::Cpu(b) => of(b),
            AnyBatch::Cuda(b) => of(b),
        }
    }

    /// [`Batch::fields`], copied (once per loader).
    pub(crate) fn fields(&self) -> Option<pinring::Fields> {
        match self {
            AnyBatch::Cpu(b) => b.fields().cloned(),
            AnyBatch::Cuda(b) => b.fields().cloned(),
        }
    }

    /// The kept host bytes of field `name` (`Config::host_fields`), as (address, bytes).
    pub(crate) fn host_field(&self, name: &str) -> Option<(usize, usize)> {
        let bytes = match self {
            AnyBatch::Cpu(b) => b.host_field_bytes(name),
            AnyBatch::Cuda(b) => b.host_field_bytes(name),
        }?;
        Some((bytes.as_ptr() as usize, bytes.len()))
    }

    /// What the Python object shows without touching the lease again.
    pub(crate) fn facts(&self) -> BatchFacts {
        match self {
            AnyBatch::Cpu(b) => facts(b, b.device_ptr().as_ptr() as usize as u64),
            AnyBatch::Cuda(b) => facts(b, b.device_ptr()),
        }
    }
}

/// A batch's rows in three columns, copied out of the leased slot's bookkeeping.
#[derive(Debug, Clone, Default)]
pub(crate) struct RowColumns {
    /// Each row's id within its source.
    pub(crate) ids: Box<[u64]>,
    /// Each row's length where the source says it, else 0.
    pub(crate) lens: Box<[u32]>,
    /// Each row's source in a mixture, else 0.
    pub(crate) sources: Box<[u16]>,
}
