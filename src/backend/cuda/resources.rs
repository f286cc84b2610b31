//! RAII for the driver resources the backend owns. Each holds its context (so the context
//! outlives it) and binds it in its own `Drop` without disturbing the dropping thread's
//! current context, as cudarc's own types hold theirs.

use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::driver::sys::{self, CUdeviceptr, CUevent, CUstream};
use cudarc::driver::{result, CudaContext, DriverError};

use super::context::Bound;
use super::driver::{self, Call};
use crate::error::Result;
use crate::host_ring::HostRing;
use crate::sync::native::{Arc, AtomicBool, Ordering};

/// Whether the backend's teardown gave up waiting for the device: then no resource is
/// freed (device work that never finished may still touch it), a documented leak.
#[derive(Debug, Default)]
pub(super) struct Teardown {
    /// Set (Release) by the backend's `Drop` before its resources drop; read (Acquire) by
    /// each resource's `Drop`.
    leak: AtomicBool,
}

impl Teardown {
    pub(super) fn leak(&self) {
        self.leak.store(true, Ordering::Release);
    }

    fn leaking(&self) -> bool {
        self.leak.load(Ordering::Acquire)
    }
}

/// A kind of driver resource: its handle type and how it is freed.
pub(super) trait Kind {
    type Raw: Copy;
    /// Frees `raw` (the resource's context is current).
    ///
    /// # Safety
    /// `raw` was made for this kind and is freed once.
    unsafe fn free(raw: Self::Raw) -> std::result::Result<(), DriverError>;
}

/// An event, created with timing off.
#[derive(Debug)]
pub(super) struct Event;
/// A non-blocking stream.
#[derive(Debug)]
pub(super) struct Stream;
/// A device allocation.
#[derive(Debug)]
pub(super) struct Memory;
/// A host range registered (pinned) with the driver.
#[derive(Debug)]
pub(super) struct Pinned;

impl Kind for Event {
    type Raw = CUevent;
    unsafe fn free(raw: CUevent) -> std::result::Result<(), DriverError> {
        // SAFETY: the caller's contract; the driver defers the release if a stream still
        // waits on the event.
        unsafe { result::event::destroy(raw) }
    }
}

impl Kind for Stream {
    type Raw = CUstream;
    unsafe fn free(raw: CUstream) -> std::result::Result<(), DriverError> {
        // SAFETY: the caller's contract; work still queued completes first, per the driver.
        unsafe { result::stream::destroy(raw) }
    }
}

impl Kind for Memory {
    type Raw = CUdeviceptr;
    unsafe fn free(raw: CUdeviceptr) -> std::result::Result<(), DriverError> {
        // SAFETY: the caller's contract; the backend's teardown waited for every copy and
        // release fence first (or leaks instead).
        unsafe { result::free_sync(raw) }
    }
}

impl Kind for Pinned {
    type Raw = *mut c_void;
    unsafe fn free(raw: *mut c_void) -> std::result::Result<(), DriverError> {
        // SAFETY: the caller's contract; no copy out of the range runs any more (the
        // teardown waited for the copy stream, or leaks instead).
        unsafe { sys::cuMemHostUnregister(raw) }.result()
    }
}

/// One resource of kind `K`, freed in its context when dropped (unless the teardown
/// leaks).
pub(super) struct Owned<K: Kind> {
    raw: K::Raw,
    ctx: Arc<CudaContext>,
    teardown: Arc<Teardown>,
    kind: PhantomData<K>,
}

// SAFETY: the handles are driver handles (or addresses), usable from any thread: the
// driver API is thread-safe. Which thread calls what is fixed by the backend's threading
// contract.
unsafe impl<K: Kind> Send for Owned<K> {}
// SAFETY: as above; `&Owned` only reads the handle.
unsafe impl<K: Kind> Sync for Owned<K> {}

impl<K: Kind> Owned<K> {
    /// The handle.
    #[inline]
    pub(super) fn raw(&self) -> K::Raw {
        self.raw
    }
}

impl<K: Kind> Drop for Owned<K> {
    fn drop(&mut self) {
        if self.teardown.leaking() {
            return;
        }
        // A context that cannot be bound is dead: nothing runs in it, and its resources
        // went with it.
        if let Ok(_bound) = Bound::new(self.ctx.cu_ctx()) {
            // SAFETY: made for this kind by the constructor below, freed once, here.
            let _ = unsafe { K::free(self.raw) };
        }
    }
}

/// Makes resources in one context, for one backend.
pub(super) struct Maker<'a> {
    pub(super) ctx: &'a Arc<CudaContext>,
    pub(super) teardown: &'a Arc<Teardown>,
}

impl Maker<'_> {
    fn own<K: Kind>(&self, raw: K::Raw) -> Owned<K> {
        Owned {
            raw,
            ctx: self.ctx.clone(),
            teardown: self.teardown.clone(),
            kind: PhantomData,
        }
    }

    /// Timing-disabled events, `n` of them; `blocking` ones park a host thread that
    /// synchronizes on them instead of spinning.
    pub(super) fn events(&self, n: usize, blocking: bool) -> Result<Box<[Owned<Event>]>> {
        let _bound = Bound::new(self.ctx.cu_ctx())?;
        let flags = if blocking {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
                | sys::CUevent_flags::CU_EVENT_BLOCKING_SYNC as u32
        } else {
            sys::CUevent_flags::CU_EVENT_DISABLE_TIMING as u32
        };
        (0..n)
            .map(|_| {
                let mut event: CUevent = std::ptr::null_mut();
                // SAFETY: writes one handle; the context is current.
                unsafe { sys::cuEventCreate(&mut event, flags) }
                    .result()
                    .call("cuEventCreate")?;
                Ok(self.own(event))
            })
            .collect()
    }

    /// Non-blocking streams, `n` of them.
    pub(super) fn streams(&self, n: usize) -> Result<Box<[Owned<Stream>]>> {
        (0..n).map(|_| self.stream()).collect()
    }

    /// One non-blocking stream.
    pub(super) fn stream(&self) -> Result<Owned<Stream>> {
        let _bound = Bound::new(self.ctx.cu_ctx())?;
        let stream = result::stream::create(result::stream::StreamKind::NonBlocking)
            .call("cuStreamCreate")?;
        Ok(self.own(stream))
    }

    /// A device allocation of `bytes`.
    pub(super) fn memory(&self, bytes: usize) -> Result<Owned<Memory>> {
        let _bound = Bound::new(self.ctx.cu_ctx())?;
        // SAFETY: allocates; the context is current.
        let ptr = unsafe { result::malloc_sync(bytes) }.map_err(|e| {
            let hint = format!("the device slots need {bytes} bytes; use fewer device_slots");
            driver::error("cuMemAlloc", e, &hint)
        })?;
        Ok(self.own(ptr))
    }

    /// Pins `ring` for the driver (portable, not write-combined, its exact size); the
    /// registration keeps the ring mapped until it is unregistered.
    pub(super) fn registration(&self, ring: &Arc<HostRing>) -> Result<Registration> {
        let _bound = Bound::new(self.ctx.cu_ctx())?;
        let base = ring.base().cast::<c_void>();
        let bytes = ring.len();
        // Portable: pinned for every context. No WRITECOMBINED flag exists for
        // registration, so the decoders' writes stay cached.
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE;
        // SAFETY: `base..base + bytes` is the ring's live mapping (page aligned, exactly its
        // size), which the registration keeps alive (it holds the ring) until after the
        // unregistration in its drop.
        unsafe { sys::cuMemHostRegister_v2(base, bytes, flags) }
            .result()
            .map_err(|e| driver::error("cuMemHostRegister", e, &register_hint(bytes)))?;
        Ok(Registration {
            _pinned: self.own(base),
            ring: ring.clone(),
        })
    }
}

/// The host ring's registration with the driver; holds the ring, so the mapping outlives
/// the registration (fields drop in order: unregister, then let go of the ring).
pub(super) struct Registration {
    /// Unregistered when dropped (first: fields drop in order).
    _pinned: Owned<Pinned>,
    ring: Arc<HostRing>,
}

impl Registration {
    /// The registered ring (the teardown leaks it when it leaks the registration).
    pub(super) fn ring(&self) -> &Arc<HostRing> {
        &self.ring
    }
}

/// What to change when the system refuses to pin the ring.
pub(super) fn register_hint(bytes: usize) -> String {
    let limit = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            limits
                .lines()
                .find(|l| l.starts_with("Max locked memory"))
                .map(|l| {
                    let fields: Vec<&str> = l.split_whitespace().collect();
                    let n = fields.len();
                    if n >= 6 {
                        format!(
                            "soft {} / hard {} {}",
                            fields[n - 3],
                            fields[n - 2],
                            fields[n - 1]
                        )
                    } else {
                        l.to_owned()
                    }
                })
        })
        .unwrap_or_else(|| "unknown".into());
    format!(
        "The system would not pin the host ring of {bytes} bytes. This process's locked-memory \
         limit (RLIMIT_MEMLOCK, `ulimit -l`) is {limit}: raise it above the ring's size \
         (`ulimit -l unlimited`; `memlock` in /etc/security/limits.conf; \
         `LimitMEMLOCK=infinity` under systemd; `--ulimit memlock=-1` for docker), check that \
         the machine has that much free memory, or make the ring smaller (fewer host_slots \
         or smaller batches)"
    )
}

#[cfg(all(test, not(pinring_loom)))]
mod tests {
    /// The device machine (root, no locked-memory accounting) never refuses the
    /// registration, so the hint's content is checked here.
    #[test]
    fn a_refused_registration_says_what_to_change() {
        let hint = super::register_hint(256 << 20);
        assert!(hint.contains("268435456 bytes"), "{hint}");
        assert!(
            hint.contains("RLIMIT_MEMLOCK") && hint.contains("ulimit -l unlimited"),
            "{hint}"
        );
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap();
        let line = limits
            .lines()
            .find(|l| l.starts_with("Max locked memory"))
            .unwrap();
        let soft = line.split_whitespace().nth(3).unwrap();
        assert!(hint.contains(&format!("soft {soft} / hard")), "{hint}");
    }
}
