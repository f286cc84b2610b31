//! How the copy thread enqueues a run's bytes: its pieces (one where the host ring and the
//! device slots lie alike, one per batch where they do not: huge pages) go as one
//! `cuMemcpyBatchAsync` where the driver has it (CUDA 12.8 and later) and [`CopyCalls`]
//! allows it, otherwise as one `cuMemcpyHtoDAsync` each.
//!
//! A batched call that the driver refuses (an error other than a dead context would give
//! the per-piece calls too) is not fatal: the run's pieces go again one call each, and
//! every later run goes per piece ([`Copies::in_use`] says so). Enqueueing a piece twice
//! is harmless: both copies write the same bytes into the same slot, in stream order,
//! before the run's READY points.

use std::ffi::c_void;

use cudarc::driver::sys::{
    self, CUdeviceptr, CUmemLocation, CUmemLocationType, CUmemcpyAttributes,
    CUmemcpySrcAccessOrder, CUstream,
};

use super::driver::{self, Call, MemcpyBatchAsync};
use super::options::CopyCalls;
use crate::error::Result;
use crate::sync::native::{AtomicBool, Ordering};

/// Most pieces one call takes (a run is at most 16 batches: `MAX_RUN` in the copy thread).
pub(super) const MAX_PIECES: usize = 16;

/// Up to [`MAX_PIECES`] pieces of a run: where each starts in the registered ring, where it
/// goes in the device slots, and its bytes. Fixed arrays: nothing is allocated per run.
pub(super) struct Pieces {
    src: [CUdeviceptr; MAX_PIECES],
    dst: [CUdeviceptr; MAX_PIECES],
    bytes: [usize; MAX_PIECES],
    len: usize,
}

impl Pieces {
    pub(super) fn new() -> Self {
        Pieces {
            src: [0; MAX_PIECES],
            dst: [0; MAX_PIECES],
            bytes: [0; MAX_PIECES],
            len: 0,
        }
    }

    /// Whether no more piece fits.
    pub(super) fn is_full(&self) -> bool {
        self.len == MAX_PIECES
    }

    /// Adds `bytes` from host address `src` to device address `dst` (room: `!is_full()`).
    pub(super) fn push(&mut self, src: *const u8, dst: CUdeviceptr, bytes: usize) {
        let i = self.len;
        self.src[i] = src as CUdeviceptr;
        self.dst[i] = dst;
        self.bytes[i] = bytes;
        self.len += 1;
    }

    /// Empties the list (after its pieces were enqueued).
    pub(super) fn clear(&mut self) {
        self.len = 0;
    }
}

/// The copy thread's way of enqueueing pieces.
pub(super) struct Copies {
    /// What the options asked for.
    asked: CopyCalls,
    /// The driver's `cuMemcpyBatchAsync`, when it has one and `asked` is not `PerPiece`.
    batch: Option<MemcpyBatchAsync>,
    /// Set (Relaxed: read only to report it) once the driver refused a batched call: per
    /// piece from then on.
    refused: AtomicBool,
}

impl Copies {
    /// After [`driver::load`]: looks the batched entry point up unless `asked` is
    /// `PerPiece`.
    pub(super) fn new(asked: CopyCalls) -> Self {
        let batch = match asked {
            CopyCalls::PerPiece => None,
            CopyCalls::Auto | CopyCalls::Batched => driver::memcpy_batch_async(),
        };
        Copies {
            asked,
            batch,
            refused: AtomicBool::new(false),
        }
    }

    /// What the copy thread does now: `PerPiece` when asked, when the driver lacks batched
    /// copies or once it refused one; otherwise what was asked.
    pub(super) fn in_use(&self) -> CopyCalls {
        if self.batch.is_none() || self.refused.load(Ordering::Relaxed) {
            CopyCalls::PerPiece
        } else {
            self.asked
        }
    }

    /// Enqueues every piece on `stream`, as one batched call where [`in_use`](Self::in_use)
    /// says so (`Auto`: for two pieces or more), else one call per piece.
    ///
    /// # Safety
    /// - Each piece's source lies in host memory registered with the driver (the pinned
    ///   ring), which nothing writes until the copy has completed and which stays
    ///   registered until `stream` has drained.
    /// - Each piece's destination lies in device memory of `stream`'s context that nothing
    ///   reads before the run's READY points and that lives until `stream` has drained.
    /// - `stream` is a live stream of the context current on this thread.
    pub(super) unsafe fn enqueue(&self, pieces: &mut Pieces, stream: CUstream) -> Result<()> {
        let n = pieces.len;
        if n == 0 {
            return Ok(());
        }
        let batched = match (self.in_use(), self.batch) {
            (CopyCalls::Batched, Some(f)) => Some(f),
            (CopyCalls::Auto, Some(f)) if n > 1 => Some(f),
            _ => None,
        };
        if let Some(batch) = batched {
            let location = CUmemLocation {
                type_: CUmemLocationType::CU_MEM_LOCATION_TYPE_INVALID,
                id: 0,
            };
            // Sources are read in stream order, after the fence waits enqueued before the
            // run (what `cuMemcpyHtoDAsync` does); the location hints are for managed
            // memory only, left unset.
            let mut attributes = CUmemcpyAttributes {
                srcAccessOrder: CUmemcpySrcAccessOrder::CU_MEMCPY_SRC_ACCESS_ORDER_STREAM,
                srcLocHint: location,
                dstLocHint: location,
                flags: 0,
            };
            let mut first = [0usize];
            let mut failed_at = usize::MAX;
            // SAFETY: the arrays hold `n` entries each and one attribute entry applying
            // from piece 0, as the call's contract asks; the function is the driver's
            // (`MemcpyBatchAsync` is its C signature); the pieces' memory: the caller's
            // contract.
            let status = unsafe {
                batch(
                    pieces.dst.as_mut_ptr(),
                    pieces.src.as_mut_ptr(),
                    pieces.bytes.as_mut_ptr(),
                    n,
                    &mut attributes,
                    first.as_mut_ptr(),
                    1,
                    &mut failed_at,
                    stream,
                )
            };
            if status == sys::CUresult::CUDA_SUCCESS {
                return Ok(());
            }
            // Refused: the pieces go again one call each, and so does every later run.
            self.refused.store(true, Ordering::Relaxed);
        }
        for i in 0..n {
            // SAFETY: the caller's contract, piece by piece.
            unsafe {
                sys::cuMemcpyHtoDAsync_v2(
                    pieces.dst[i],
                    pieces.src[i] as *const c_void,
                    pieces.bytes[i],
                    stream,
                )
            }
            .result()
            .call("cuMemcpyHtoDAsync")?;
        }
        Ok(())
    }
}
