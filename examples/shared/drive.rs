//! The tools' stand-in for a training loop: pop, step, release.

use std::time::{Duration, Instant};

use pinring::{Backend, Batch, Fence, Pipeline};

/// What [`pop_each`] did.
#[derive(Debug, Clone, Copy)]
pub struct Popped {
    /// Batches popped.
    pub batches: u64,
    /// From the first pop to the last release.
    pub elapsed: Duration,
}

/// Pops `limit` batches (fewer if the source ends first), hands each to `step` and
/// releases it.
pub fn pop_each<B: Backend>(
    pipeline: &mut Pipeline<B>,
    limit: u64,
    mut step: impl FnMut(&Batch<B>) -> pinring::Result<()>,
) -> pinring::Result<Popped> {
    let start = Instant::now();
    let mut batches = 0u64;
    while batches < limit {
        let Some(batch) = pipeline.pop()? else {
            break;
        };
        step(&batch)?;
        batches += 1;
        // The step is finished with the batch (it synchronised), so no fence is needed.
        batch.release(Fence::Sync).map_err(|e| e.error)?;
    }
    Ok(Popped {
        batches,
        elapsed: start.elapsed(),
    })
}
