//! `Batch.release()`: a batch's lease given back with the fence asked for (read by
//! [`crate::release_forms`]), recording events only with the GIL held, and with it
//! released where the release may block.

use pinring::Fence;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;

use crate::batch::PyBatch;
use crate::device::Device;
use crate::dispatch::AnyBatch;
use crate::errors::from_core::to_py_with;
use crate::lease::Leased;
use crate::release_forms::{inspect, resolve, FenceArg, Form};
use crate::stub_attrs::gen_stub_pymethods;

/// A release that failed: the batch, to lease again, and why.
type Refused = (Leased, pinring::Error);

/// Releases `leased` with `fence`: on cpu with `Fence::Sync` (the Python layer binds no
/// cpu stream, and every read through numpy is done when its call returns); on cuda
/// fenced on the bound streams (no fence named) or on the fence named, and on the bound
/// streams with it. A cuda batch bound to no stream and released with no fence is dropped:
/// fenced conservatively (a context synchronize: call this without the GIL then).
fn release_leased(leased: Leased, fence: FenceArg) -> Result<(), Box<Refused>> {
    let streams = leased.streams;
    let refused = |batch: AnyBatch, error| Box::new((Leased { batch, streams }, error));
    match (leased.batch, fence) {
        (AnyBatch::Cpu(batch), _) => batch
            .release(Fence::Sync)
            .map_err(|e| refused(AnyBatch::Cpu(e.batch), e.error)),
        (AnyBatch::Cuda(batch), FenceArg::Default) if streams.release_may_block(false) => {
            drop(batch);
            Ok(())
        }
        (AnyBatch::Cuda(batch), FenceArg::Default) => batch
            .release(Fence::Bound)
            .map_err(|e| refused(AnyBatch::Cuda(e.batch), e.error)),
        (AnyBatch::Cuda(batch), fence) => fence.release(batch).map_err(|e| {
            let e = *e;
            refused(AnyBatch::Cuda(e.batch), e.error)
        }),
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl PyBatch {
    /// Gives the slot back; its reuse waits for the fence, stream-side.
    ///
    /// Args:
    ///     event: None: the slot is fenced on every stream the batch is bound to: the
    ///         Loader's `stream=` (every pop binds its batch to it) and every stream
    ///         declared to `__dlpack__` (what `torch.from_dlpack` and `cupy.from_dlpack`
    ///         pass), each from the thread that declared it; bound to none,
    ///         conservatively (cuda: a context synchronize, with the GIL released). Or an
    ///         int (a raw CUevent), a torch.cuda.Event, a torch.cuda.Stream, a
    ///         cupy.cuda.Stream or a cupy.cuda.Event: reuse waits for it as it stands now
    ///         (and for the bound streams). On the cpu backend only None (the slot is
    ///         free at once: every read through numpy is done when its call returns).
    ///
    /// Records events only (no host wait) with the GIL held, when the batch is bound to
    /// streams of their own (the Loader's `stream=` a stream object, not 0, 1 or 2);
    /// otherwise a release that may block is done with the GIL released.
    ///
    /// Idempotent; works from any thread and after the loader is closed.
    ///
    /// Raises:
    ///     TypeError: `event` is none of the forms above, or a CUDA fence on a cpu batch.
    ///     ValueError: an event that was never recorded.
    ///     CudaError: the fence was rejected (a stream of another device); the batch stays
    ///         leased.
    #[pyo3(signature = (event = None))]
    pub(crate) fn release(
        &self,
        py: Python<'_>,
        #[gen_stub(override_type(type_repr = "typing.Any | None", imports = ("typing",)))]
        event: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let form = inspect(event)?;
        if self.device == Device::Cpu && !matches!(form, Form::Default) {
            return Err(PyTypeError::new_err(format!(
                "batch {} is on the cpu backend, which has no CUDA streams or events: \
                 release it with event=None (got a {})",
                self.facts.seq,
                form.name()
            )));
        }
        let mut keep = Vec::new();
        let fence = resolve(&form, &mut keep)?;
        let named = !matches!(fence, FenceArg::Default);
        let cell = &self.cell;
        let refused = {
            // The common case, with the GIL held: under one hold of the lease, a release
            // that records events only (or, on cpu, none).
            let mut lease = cell.lock_attached(py);
            let taken = lease.take();
            if let Some(leased) = &taken {
                // The rows, kept past the release (`sample_ids`, `sources`, `locate()` after
                // a step: what a loss spike's trace asks for), unless already read.
                if self.rows.get().is_none() {
                    let _ = self.rows.set(leased.batch.rows());
                }
            }
            match taken {
                // Idempotent: nothing to fence, and nothing is recorded on the caller's
                // stream.
                None => return Ok(()),
                Some(leased)
                    if self.device == Device::Cpu || !leased.streams.release_may_block(named) =>
                {
                    release_leased(leased, fence).err().map(|refused| {
                        let (leased, error) = *refused;
                        *lease = Some(leased);
                        error
                    })
                }
                Some(leased) => {
                    // It may block (a context synchronize): again, without the GIL.
                    *lease = Some(leased);
                    drop(lease);
                    py.detach(|| {
                        let mut lease = cell.lock();
                        let leased = lease.take()?;
                        release_leased(leased, fence).err().map(|refused| {
                            let (leased, error) = *refused;
                            *lease = Some(leased);
                            error
                        })
                    })
                }
            }
        };
        drop(keep);
        match refused {
            None => Ok(()),
            Some(error) => {
                let context = format!(
                    "release of batch {} (fence: {})",
                    self.facts.seq,
                    fence.form()
                );
                Err(to_py_with(py, error, &context))
            }
        }
    }
}
