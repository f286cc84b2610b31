//! What a batch of the cuda backend offers beside the generic ones, for cudarc code: the
//! batch seen as a cudarc slice on the caller's stream, its READY event, and release on a
//! cudarc stream.

use std::fmt;
use std::ops::Deref;

use cudarc::driver::sys::CUevent;
use cudarc::driver::{CudaSlice, CudaStream};

use super::{Batch, ReleaseError};
use crate::backend::cuda::backend::Cuda;
use crate::backend::cuda::handles::CuStream;
use crate::backend::fence::Fence;
use crate::error::Result;
use crate::sync::native::Arc;

/// A leased batch's bytes as a cudarc slice on the caller's stream, for kernels launched
/// through cudarc (candle-style code). Made by [`Batch::view_on`]; derefs to the slice.
///
/// The slice borrows the device slot: it is never freed through cudarc (dropping the view
/// lets go of it), and the batch stays leased while the view lives. Its stream is the one
/// the caller gave, never the pipeline's copy stream.
pub struct BatchView<'a> {
    /// `Some` until the drop lets go of it.
    slice: Option<CudaSlice<u8>>,
    batch: std::marker::PhantomData<&'a mut Batch<Cuda>>,
}

impl Deref for BatchView<'_> {
    type Target = CudaSlice<u8>;

    fn deref(&self) -> &CudaSlice<u8> {
        self.slice.as_ref().expect("present until dropped")
    }
}

impl Drop for BatchView<'_> {
    fn drop(&mut self) {
        if let Some(slice) = self.slice.take() {
            // The memory is the device slot's: give up cudarc's claim without freeing.
            let _ = slice.leak();
        }
    }
}

impl fmt::Debug for BatchView<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BatchView")
            .field("len", &self.slice.as_ref().map(CudaSlice::len))
            .finish()
    }
}

impl Batch<Cuda> {
    /// The batch's bytes as a cudarc slice on `stream`: makes `stream` wait for the batch
    /// (stream-side, as [`wait_on`](Batch::wait_on), which also binds the batch to it) and
    /// returns a view whose kernels cudarc launches on `stream`.
    pub fn view_on(&mut self, stream: &Arc<CudaStream>) -> Result<BatchView<'_>> {
        self.wait_on(&CuStream::from(stream))?;
        let (ptr, len) = (self.device_ptr(), self.len());
        // SAFETY: `ptr..ptr + len` lies in the batch's device slot, valid while the batch
        // is leased, which the view's borrow of the batch guarantees; the slice is never
        // freed through cudarc (leaked in the view's drop); `u8` is valid for any bytes.
        let slice = unsafe { stream.upgrade_device_ptr::<u8>(ptr, len) };
        Ok(BatchView {
            slice: Some(slice),
            batch: std::marker::PhantomData,
        })
    }

    /// READY(slot): recorded on the copy stream after this batch's copy. For DLPack-style
    /// consumers that wait on it themselves (`cuStreamWaitEvent`). The handle is reused for
    /// later batches in the same slot: wait on it before releasing the batch. It is created
    /// without `CU_EVENT_BLOCKING_SYNC` (cheap to record and to wait on stream-side), so a
    /// host `cuEventSynchronize` on it busy-waits: block the host with
    /// [`synchronize`](Batch::synchronize), which parks.
    pub fn ready_event(&self) -> CUevent {
        self.backend().ready_event(self.device_idx())
    }

    /// Releases the batch fenced on `stream` (see [`Fence::Stream`]); on failure the batch
    /// comes back inside the error.
    #[allow(clippy::result_large_err)] // the error hands the batch back
    pub fn release_on(self, stream: impl Into<CuStream>) -> Result<(), ReleaseError<Cuda>> {
        let stream = stream.into();
        self.release(Fence::Stream(&stream))
    }
}
