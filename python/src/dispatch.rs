//! The two backends behind one type each: a pipeline, a batch and a stop handle of either
//! the cpu or the cuda backend, chosen at run time from `device=`.

use std::time::Duration;

use pinring::{Backend, Batch, Cpu, Cuda, Pipeline, Stats, StopHandle, TryPop, MAX_DIMS};

/// A pipeline of either backend.
#[derive(Debug)]
pub(crate) enum AnyPipeline {
    /// The cpu backend.
    Cpu(Pipeline<Cpu>),
    /// The cuda backend.
    Cuda(Pipeline<Cuda>),
}

impl AnyPipeline {
    /// [`Pipeline::pop_for`]: `Duration::ZERO` never waits.
    pub(crate) fn pop_for(&mut self, timeout: Duration) -> pinring::Result<Option<AnyBatch>> {
        Ok(match self {
            AnyPipeline::Cpu(p) => p.pop_for(timeout)?.map(AnyBatch::Cpu),
            AnyPipeline::Cuda(p) => p.pop_for(timeout)?.map(AnyBatch::Cuda),
        })
    }

    /// [`Pipeline::try_pop`]: the next batch if it is ready (`Ok(Some(Some(_)))`), the end
    /// (`Ok(Some(None))`), or `Ok(None)` when the caller must wait; never blocks.
    pub(crate) fn try_pop(&mut self) -> pinring::Result<Option<Option<AnyBatch>>> {
        fn taken<B: Backend>(
            popped: TryPop<B>,
            wrap: fn(Batch<B>) -> AnyBatch,
        ) -> Option<Option<AnyBatch>> {
            match popped {
                TryPop::Batch(b) => Some(Some(wrap(b))),
                TryPop::End => Some(None),
                TryPop::NotReady => None,
            }
        }
        Ok(match self {
            AnyPipeline::Cpu(p) => taken(p.try_pop()?, AnyBatch::Cpu),
            AnyPipeline::Cuda(p) => taken(p.try_pop()?, AnyBatch::Cuda),
        })
    }

    /// [`Pipeline::stats`].
    pub(crate) fn stats(&self) -> Stats {
        match self {
            AnyPipeline::Cpu(p) => p.stats(),
            AnyPipeline::Cuda(p) => p.stats(),
        }
    }

    /// [`Pipeline::stop_handle`].
    pub(crate) fn stop_handle(&self) -> AnyStop {
        match self {
            AnyPipeline::Cpu(p) => AnyStop::Cpu(p.stop_handle()),
            AnyPipeline::Cuda(p) => AnyStop::Cuda(p.stop_handle()),
        }
    }

    /// [`Pipeline::write_trace`].
    pub(crate) fn write_trace(&self, out: impl std::io::Write) -> std::io::Result<usize> {
        match self {
            AnyPipeline::Cpu(p) => p.write_trace(out),
            AnyPipeline::Cuda(p) => p.write_trace(out),
        }
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
    /// Samples in the batch.
    pub(crate) fn samples(&self) -> usize {
        match self {
            AnyBatch::Cpu(b) => b.samples(),
            AnyBatch::Cuda(b) => b.samples(),
        }
    }

    /// The epoch of the batch's samples ([`Batch::epoch`]).
    pub(crate) fn epoch(&self) -> u64 {
        match self {
            AnyBatch::Cpu(b) => b.epoch(),
            AnyBatch::Cuda(b) => b.epoch(),
        }
    }

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
