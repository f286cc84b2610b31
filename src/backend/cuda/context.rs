//! The pipeline's context: opening it, and binding it for a call without disturbing the
//! caller's.

use std::ptr;

use cudarc::driver::sys::{self, CUcontext, CUdevice};
use cudarc::driver::{result, CudaContext};

use super::driver::{self, Call};
use super::options::{CudaDevice, CudaOptions};
use crate::error::{Error, Result};
use crate::sync::native::{Arc, Mutex};

/// The context current on the calling thread (null if none).
pub(super) fn current() -> Result<CUcontext> {
    Ok(result::ctx::get_current()
        .call("cuCtxGetCurrent")?
        .unwrap_or(ptr::null_mut()))
}

/// Keeps a context current on this thread for its lifetime: nothing when it already is,
/// binds it when the thread has none, pushes it (popped on drop) when the thread has
/// another one, so the caller's context is current again afterwards.
pub(super) struct Bound {
    pushed: bool,
}

impl Bound {
    pub(super) fn new(ctx: CUcontext) -> Result<Self> {
        let now = current()?;
        if now == ctx {
            Ok(Bound { pushed: false })
        } else if now.is_null() {
            // SAFETY: `ctx` is a live context (its owner holds it).
            unsafe { result::ctx::set_current(ctx) }.call("cuCtxSetCurrent")?;
            Ok(Bound { pushed: false })
        } else {
            // SAFETY: as above; popped in `drop`.
            unsafe { sys::cuCtxPushCurrent_v2(ctx) }
                .result()
                .call("cuCtxPushCurrent")?;
            Ok(Bound { pushed: true })
        }
    }
}

impl Drop for Bound {
    fn drop(&mut self) {
        if self.pushed {
            let mut popped: CUcontext = ptr::null_mut();
            // SAFETY: pops the context this guard pushed on this thread.
            let _ = unsafe { sys::cuCtxPopCurrent_v2(&mut popped) };
        }
    }
}

/// Opens the context `options` name, leaving the calling thread's current context as it
/// was.
pub(super) fn open(options: &CudaOptions) -> Result<Arc<CudaContext>> {
    result::init().call("cuInit")?;
    let count = result::device::get_count().call("cuDeviceGetCount")?;
    let previous = current()?;
    let device = match options.device {
        CudaDevice::CurrentOr(_) if !previous.is_null() => CudaDevice::Current,
        CudaDevice::CurrentOr(ordinal) => CudaDevice::Ordinal(ordinal),
        other => other,
    };
    let opened = match device {
        CudaDevice::Ordinal(ordinal) => {
            if ordinal >= usize::try_from(count).unwrap_or(0) {
                let visible = std::env::var("CUDA_VISIBLE_DEVICES")
                    .map(|v| format!("CUDA_VISIBLE_DEVICES={v:?}"))
                    .unwrap_or_else(|_| "CUDA_VISIBLE_DEVICES unset".into());
                return Err(driver::error(
                    "cuDeviceGet",
                    cudarc::driver::DriverError(sys::CUresult::CUDA_ERROR_INVALID_DEVICE),
                    &format!(
                        "there is no CUDA device {ordinal}: this process sees {count} ({visible})"
                    ),
                ));
            }
            CudaContext::new(ordinal).call("cuDevicePrimaryCtxRetain")
        }
        CudaDevice::Current | CudaDevice::CurrentOr(_) => adopt(previous, count),
    };
    // cudarc binds the context it opens to this thread: give the caller's back.
    if current()? != previous {
        // SAFETY: `previous` was current on this thread a moment ago (or is null, which
        // unbinds); the caller still owns it.
        unsafe { result::ctx::set_current(previous) }.call("cuCtxSetCurrent")?;
    }
    opened
}

/// The context current on this thread, wrapped for cudarc.
fn adopt(current: CUcontext, count: i32) -> Result<Arc<CudaContext>> {
    if current.is_null() {
        return Err(Error::Backend {
            call: "cuCtxGetCurrent",
            message: "CudaOptions::current(): no CUDA context is current on this thread; make \
                      one current first (PyTorch: torch.cuda.set_device, or any CUDA op) or \
                      choose a device with CudaOptions::ordinal"
                .into(),
            source: None,
        });
    }
    let mut device: CUdevice = 0;
    // SAFETY: writes one value; `current` is the thread's current context.
    unsafe { sys::cuCtxGetDevice(&mut device) }
        .result()
        .call("cuCtxGetDevice")?;
    let ordinal = (0..count)
        .find(|&i| result::device::get(i).is_ok_and(|d| d == device))
        .and_then(|i| usize::try_from(i).ok())
        .ok_or_else(|| Error::Backend {
            call: "cuDeviceGet",
            message: "the current context's device is not among this process's devices".into(),
            source: None,
        })?;
    if is_primary(device, current)? {
        CudaContext::new(ordinal).call("cuDevicePrimaryCtxRetain")
    } else {
        borrow(ordinal, device, current)
    }
}

/// Whether `ctx` is `device`'s primary context (asked without activating it).
fn is_primary(device: CUdevice, ctx: CUcontext) -> Result<bool> {
    let (mut flags, mut active) = (0u32, 0i32);
    // SAFETY: writes two values; `device` is valid.
    unsafe { sys::cuDevicePrimaryCtxGetState(device, &mut flags, &mut active) }
        .result()
        .call("cuDevicePrimaryCtxGetState")?;
    if active == 0 {
        return Ok(false);
    }
    // SAFETY: retains the (active) primary context; released just below.
    let primary =
        unsafe { result::primary_ctx::retain(device) }.call("cuDevicePrimaryCtxRetain")?;
    // SAFETY: releases the retain just taken.
    let _ = unsafe { result::primary_ctx::release(device) };
    Ok(primary == ctx)
}

/// Contexts the caller created that pinring borrowed: one reference to each is kept here
/// for the process's lifetime, because cudarc destroys a non-primary context when the last
/// reference to its wrapper goes, and the caller owns these. (CUDA has no reference count
/// for such contexts.)
static BORROWED: Mutex<Vec<Arc<CudaContext>>> = Mutex::new(Vec::new());

/// Wraps a context the caller created, without ever destroying it.
fn borrow(ordinal: usize, device: CUdevice, ctx: CUcontext) -> Result<Arc<CudaContext>> {
    let mut borrowed = BORROWED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(known) = borrowed.iter().find(|c| c.cu_ctx() == ctx) {
        return Ok(known.clone());
    }
    // SAFETY: `ctx` is a live context of `device` (it is current on this thread). cudarc
    // would destroy it when the last reference goes; the one kept in `BORROWED` never
    // goes, so ownership stays with the caller, whose obligation it is to keep the
    // context alive (documented on `CudaDevice::Current`).
    let wrapped = unsafe { CudaContext::from_raw_context(ordinal, device, ctx) }
        .call("cuDeviceGetAttribute")?;
    borrowed.push(wrapped.clone());
    Ok(wrapped)
}
