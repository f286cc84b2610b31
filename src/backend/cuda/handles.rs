//! The caller's CUDA handles: the streams and events a consumer passes to
//! [`Batch::wait_on`](crate::Batch::wait_on) and [`Fence`](crate::Fence).

use std::fmt;

use cudarc::driver::sys::{CUevent, CUstream};
use cudarc::driver::{CudaEvent, CudaStream};

use crate::sync::native::Arc;

/// `CU_STREAM_LEGACY`: the legacy default stream, valid in every context.
const STREAM_LEGACY: CUstream = 0x1 as CUstream;
/// `CU_STREAM_PER_THREAD`: the calling thread's default stream, valid in every context.
const STREAM_PER_THREAD: CUstream = 0x2 as CUstream;

/// A driver handle and, when it came from cudarc, the cudarc object that keeps it alive.
struct Handle<Raw, Owner> {
    raw: Raw,
    owner: Option<Arc<Owner>>,
}

impl<Raw: Copy, Owner> Clone for Handle<Raw, Owner> {
    fn clone(&self) -> Self {
        Handle {
            raw: self.raw,
            owner: self.owner.clone(),
        }
    }
}

// SAFETY: a CUstream or CUevent is a driver handle, usable from any thread (the driver API
// is thread-safe); it is only passed to the driver, never dereferenced. The owner is an
// `Arc` of a cudarc type that is itself Send + Sync.
unsafe impl<Raw, Owner: Send + Sync> Send for Handle<Raw, Owner> {}
// SAFETY: as above.
unsafe impl<Raw, Owner: Send + Sync> Sync for Handle<Raw, Owner> {}

/// A caller's CUDA stream, for [`Batch::wait_on`](crate::Batch::wait_on) and
/// [`Fence::Stream`](crate::Fence::Stream).
///
/// Made from a cudarc stream (`CuStream::from(&stream)`, which keeps it alive), from a raw
/// `CUstream` ([`from_raw`](CuStream::from_raw)), or one of the default streams. The
/// stream must belong to the pipeline's context: a stream of another context is refused
/// (release such a batch with an event instead).
#[derive(Clone)]
pub struct CuStream(Handle<CUstream, CudaStream>);

impl CuStream {
    /// Wraps a raw stream handle (PyTorch's `torch.cuda.current_stream().cuda_stream`, a
    /// handle from another library, or null for the current context's default stream).
    ///
    /// # Safety
    /// - `raw` is a live stream (or null / `CU_STREAM_LEGACY` / `CU_STREAM_PER_THREAD`)
    ///   and stays live while this value, any clone of it, or a batch bound to it with
    ///   [`wait_on`](crate::Batch::wait_on) exists.
    pub unsafe fn from_raw(raw: CUstream) -> Self {
        CuStream(Handle { raw, owner: None })
    }

    /// The legacy default stream (`CU_STREAM_LEGACY`) of whichever context is current on
    /// the thread that uses it.
    pub fn legacy() -> Self {
        CuStream(Handle {
            raw: STREAM_LEGACY,
            owner: None,
        })
    }

    /// The per-thread default stream (`CU_STREAM_PER_THREAD`) of the thread that uses it.
    /// A batch bound to it on one thread and dropped on another is fenced conservatively
    /// (the other thread's per-thread stream is not the one the kernels ran on).
    pub fn per_thread() -> Self {
        CuStream(Handle {
            raw: STREAM_PER_THREAD,
            owner: None,
        })
    }

    /// The raw handle.
    pub fn raw(&self) -> CUstream {
        self.0.raw
    }

    /// Whether the handle names a stream relative to the calling thread (null, legacy or
    /// per-thread) rather than one stream.
    pub(super) fn is_relative(&self) -> bool {
        self.0.raw.is_null() || self.0.raw == STREAM_LEGACY || self.0.raw == STREAM_PER_THREAD
    }

    /// Whether the handle is the calling thread's per-thread default stream.
    pub(super) fn is_per_thread(&self) -> bool {
        self.0.raw == STREAM_PER_THREAD
    }
}

impl From<&Arc<CudaStream>> for CuStream {
    fn from(stream: &Arc<CudaStream>) -> Self {
        stream.clone().into()
    }
}

impl From<Arc<CudaStream>> for CuStream {
    fn from(stream: Arc<CudaStream>) -> Self {
        CuStream(Handle {
            raw: stream.cu_stream(),
            owner: Some(stream),
        })
    }
}

impl fmt::Debug for CuStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CuStream").field(&self.0.raw).finish()
    }
}

/// A caller's CUDA event, for [`Fence::Event`](crate::Fence::Event): reuse waits for its
/// latest record as of the release.
///
/// Made from a cudarc event (`CuEvent::from(event)` or from an `Arc` of one, which keeps
/// it alive) or from a raw `CUevent` ([`from_raw`](CuEvent::from_raw)). It may belong to
/// any context or device.
pub struct CuEvent(Handle<CUevent, CudaEvent>);

impl CuEvent {
    /// Wraps a raw event handle (`torch.cuda.Event().cuda_event`, CuPy's `.ptr`, ...).
    ///
    /// # Safety
    /// - `raw` is a live event and stays live while this value exists.
    pub unsafe fn from_raw(raw: CUevent) -> Self {
        CuEvent(Handle { raw, owner: None })
    }

    /// The raw handle.
    pub fn raw(&self) -> CUevent {
        self.0.raw
    }

    /// The cudarc event this was made from, if any.
    pub fn cudarc(&self) -> Option<&CudaEvent> {
        self.0.owner.as_deref()
    }
}

impl From<CudaEvent> for CuEvent {
    fn from(event: CudaEvent) -> Self {
        Arc::new(event).into()
    }
}

impl From<Arc<CudaEvent>> for CuEvent {
    fn from(event: Arc<CudaEvent>) -> Self {
        CuEvent(Handle {
            raw: event.cu_event(),
            owner: Some(event),
        })
    }
}

impl From<&Arc<CudaEvent>> for CuEvent {
    fn from(event: &Arc<CudaEvent>) -> Self {
        event.clone().into()
    }
}

impl fmt::Debug for CuEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("CuEvent").field(&self.0.raw).finish()
    }
}
