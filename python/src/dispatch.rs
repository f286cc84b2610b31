//! The two backends behind one type each: a pipeline, a batch and a stop handle of either
//! the cpu or the cuda backend, chosen at run time from `device=`.

use std::time::Duration;

use pinring::{Backend, Batch, Cpu, Cuda, FieldAt, Pipeline, Stats, StopHandle};

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

/// What a batch says about itself, read once when it is popped.
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
    /// [`Batch::sample_ids`]: one per row (a sample, or a packed document).
    pub(crate) ids: Box<[u64]>,
    /// [`Batch::row_lens`]: each row's length where the source says it (a packed
    /// document's tokens in the batch), else 0.
    pub(crate) row_lens: Box<[u32]>,
    /// [`Batch::row_sources`]: each row's source in a mixture, else 0.
    pub(crate) sources: Box<[u16]>,
    /// [`Batch::step`].
    pub(crate) step: Option<u64>,
    /// Each field of the batch ([`Batch::field`]), in layout order; empty without fields.
    pub(crate) fields: Box<[(String, FieldAt)]>,
}

/// What `batch` says about itself, with its slot's address as a number.
fn facts<B: Backend>(b: &Batch<B>, ptr: u64) -> BatchFacts {
    let fields = b.fields().map_or_else(Vec::new, |layout| {
        layout
            .iter()
            .filter_map(|f| Some((f.name.clone(), b.field(&f.name)?)))
            .collect()
    });
    BatchFacts {
        seq: b.seq(),
        samples: b.samples(),
        slot: b.slot(),
        ptr,
        epoch: b.epoch(),
        ids: b.sample_ids().into(),
        row_lens: b.row_lens().into(),
        sources: b.row_sources().into(),
        step: b.step(),
        fields: fields.into(),
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

    /// Everything the Python object shows without touching the lease again.
    pub(crate) fn facts(&self) -> BatchFacts {
        match self {
            AnyBatch::Cpu(b) => facts(b, b.device_ptr().as_ptr() as usize as u64),
            AnyBatch::Cuda(b) => facts(b, b.device_ptr()),
        }
    }
}
