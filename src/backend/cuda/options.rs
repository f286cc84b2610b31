//! How a cuda pipeline chooses its device, and how it enqueues its copies.

/// Which device a CUDA pipeline binds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CudaDevice {
    /// The primary context of the device with this ordinal (as `CUDA_VISIBLE_DEVICES`
    /// numbers them). The primary context is the one the CUDA runtime and PyTorch use.
    Ordinal(usize),
    /// The context current on the thread that calls [`Pipeline::new`](crate::Pipeline::new).
    /// A primary context is retained for the pipeline's lifetime; a context the caller
    /// created itself (`cuCtxCreate`) is borrowed and never destroyed by pinring: the
    /// caller must keep it alive until the pipeline and every batch from it are dropped.
    Current,
    /// The context current on the calling thread, as [`Current`](Self::Current), or the
    /// primary context of device `N` when the thread has none (what a bare `"cuda"` means
    /// to the Python package: PyTorch's device once it made one current, else device 0).
    CurrentOr(usize),
}

impl Default for CudaDevice {
    fn default() -> Self {
        CudaDevice::Ordinal(0)
    }
}

/// How the copy thread enqueues a run of batches' bytes. A run is one piece where the host
/// ring and the device slots lie alike (the usual case: then one `cuMemcpyHtoDAsync` moves
/// it), and one piece per batch where they do not (a ring with huge pages: its slots are 2
/// MiB apart, the device slots a page apart). What the benchmark's `copies` section
/// compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum CopyCalls {
    /// A run of several pieces as one `cuMemcpyBatchAsync` where the driver has it (CUDA
    /// 12.8 and later, looked up when the pipeline starts), else one `cuMemcpyHtoDAsync`
    /// per piece; a run of one piece as one `cuMemcpyHtoDAsync`. The default.
    #[default]
    Auto,
    /// One `cuMemcpyHtoDAsync` per piece, always: the path of drivers without batched
    /// copies.
    PerPiece,
    /// Every run as one `cuMemcpyBatchAsync`, a run of one piece too, where the driver has
    /// it; per piece otherwise. For measurements.
    Batched,
}

/// How to open the cuda backend. The default binds device 0.
///
/// ```no_run
/// use pinring::{Config, CudaOptions};
/// let config = Config::builder()
///     .batch_size(16)
///     .bytes_per_sample(4 * 4097)
///     .cuda(CudaOptions::ordinal(1)) // same as .backend::<pinring::Cuda>(..)
///     .build()?;
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CudaOptions {
    /// The device (context) the pipeline binds.
    pub device: CudaDevice,
    /// How copies are enqueued (default [`CopyCalls::Auto`]).
    pub copies: CopyCalls,
}

impl CudaOptions {
    /// Binds the primary context of device `ordinal`.
    pub fn ordinal(ordinal: usize) -> Self {
        CudaOptions {
            device: CudaDevice::Ordinal(ordinal),
            ..CudaOptions::default()
        }
    }

    /// Adopts the context current on the thread that creates the pipeline (for example
    /// the one PyTorch made current with `torch.cuda.set_device`).
    pub fn current() -> Self {
        CudaOptions {
            device: CudaDevice::Current,
            ..CudaOptions::default()
        }
    }

    /// Adopts the context current on the thread that creates the pipeline, or binds the
    /// primary context of device `ordinal` when that thread has none.
    pub fn current_or(ordinal: usize) -> Self {
        CudaOptions {
            device: CudaDevice::CurrentOr(ordinal),
            ..CudaOptions::default()
        }
    }

    /// How the copy thread enqueues copies (see [`CopyCalls`]); [`Cuda::copy_calls`]
    /// says what a pipeline ended up with.
    ///
    /// [`Cuda::copy_calls`]: crate::Cuda::copy_calls
    pub fn copies(mut self, calls: CopyCalls) -> Self {
        self.copies = calls;
        self
    }
}
