//! Loading the CUDA driver, and turning its errors into pinring's.
//!
//! The check does not depend on how cudarc links the driver. With cudarc's
//! `dynamic-loading` (or `fallback-dynamic-loading`, which pinring asks for) libcuda is
//! opened at run time and a missing library or entry point would make cudarc panic at the
//! first call; with `dynamic-linking` (what candle asks for, and what wins when both are in
//! a crate graph) it is linked at build time. Either way pinring opens the library itself
//! first, by its soname, and checks every entry point it (and the cudarc calls it makes)
//! uses, so the caller gets an [`Error::Backend`] saying what to install instead of a
//! panic.

use std::sync::OnceLock;

use cudarc::driver::sys::{CUdeviceptr, CUmemcpyAttributes, CUresult, CUstream};
use cudarc::driver::DriverError;

use crate::error::{Error, Result};

/// The names the driver library goes by (Linux soname first, then the development link;
/// Windows' DLL).
const LIBRARY_NAMES: &[&str] = if cfg!(windows) {
    &["nvcuda.dll"]
} else {
    &["libcuda.so.1", "libcuda.so"]
};

/// Every driver entry point this backend and the cudarc calls it makes use.
const ENTRY_POINTS: &[&str] = &[
    "cuInit",
    "cuGetErrorName",
    "cuGetErrorString",
    "cuDeviceGetCount",
    "cuDeviceGet",
    "cuDeviceGetAttribute",
    "cuDevicePrimaryCtxRetain",
    "cuDevicePrimaryCtxRelease_v2",
    "cuDevicePrimaryCtxGetState",
    "cuCtxGetCurrent",
    "cuCtxSetCurrent",
    "cuCtxPushCurrent_v2",
    "cuCtxPopCurrent_v2",
    "cuCtxGetDevice",
    "cuCtxSynchronize",
    "cuMemAlloc_v2",
    "cuMemFree_v2",
    "cuMemHostRegister_v2",
    "cuMemHostUnregister",
    "cuMemcpyHtoDAsync_v2",
    "cuMemsetD8Async",
    "cuStreamCreate",
    "cuStreamDestroy_v2",
    "cuStreamQuery",
    "cuStreamSynchronize",
    "cuStreamWaitEvent",
    "cuStreamGetCtx",
    "cuStreamGetId",
    "cuEventCreate",
    "cuEventDestroy_v2",
    "cuEventRecord",
    "cuEventQuery",
    "cuEventSynchronize",
];

/// The library, opened once and kept for the process's lifetime (cudarc opens it again by
/// one of the same names, or has it linked).
static DRIVER: OnceLock<std::result::Result<libloading::Library, String>> = OnceLock::new();

/// Checks that the driver library is there with every entry point pinring needs.
pub(super) fn load() -> Result<()> {
    let loaded = DRIVER.get_or_init(|| {
        let mut tried = Vec::new();
        let library = LIBRARY_NAMES.iter().find_map(|name| {
            // SAFETY: loading the NVIDIA driver library runs its initializers, which do not
            // depend on anything of ours; this is what cudarc's own loading does.
            match unsafe { libloading::Library::new(*name) } {
                Ok(library) => Some(library),
                Err(e) => {
                    tried.push(format!("{name}: {e}"));
                    None
                }
            }
        });
        let Some(library) = library else {
            return Err(format!(
                "the CUDA driver library was not found ({}): install the NVIDIA driver, or \
                 add the directory holding it to LD_LIBRARY_PATH; on a machine without a GPU \
                 use the cpu backend",
                tried.join("; ")
            ));
        };
        for name in ENTRY_POINTS {
            // SAFETY: only the symbol's presence is checked; the pointer is never called
            // through this type.
            if let Err(e) = unsafe { library.get::<unsafe extern "C" fn()>(name.as_bytes()) } {
                return Err(format!(
                    "the CUDA driver lacks the entry point {name} ({e}): update the NVIDIA \
                     driver"
                ));
            }
        }
        Ok(library)
    });
    match loaded {
        Ok(_) => Ok(()),
        Err(message) => Err(Error::Backend {
            call: "loading libcuda",
            message: message.clone(),
            source: None,
        }),
    }
}

/// `cuMemcpyBatchAsync` as CUDA 12.8 declares it: `(dsts, srcs, sizes, count, attrs,
/// attrsIdxs, numAttrs, failIdx, hStream)`. Drivers of CUDA 13 still export this ABI under
/// the unsuffixed name (their headers map the name to `cuMemcpyBatchAsync_v2`, which drops
/// `failIdx`), as they keep every older entry point for binaries built against it.
pub(super) type MemcpyBatchAsync = unsafe extern "C" fn(
    *mut CUdeviceptr,
    *mut CUdeviceptr,
    *mut usize,
    usize,
    *mut CUmemcpyAttributes,
    *mut usize,
    usize,
    *mut usize,
    CUstream,
) -> CUresult;

/// The driver's `cuMemcpyBatchAsync` (CUDA 12.8 and later), looked up in the library
/// [`load`] opened; `None` on an older driver (or before `load`). cudarc's own binding
/// would panic on a driver without it (its loader unwraps the symbol), and under
/// `dynamic-linking` would need it at link time: this lookup needs neither.
pub(super) fn memcpy_batch_async() -> Option<MemcpyBatchAsync> {
    let library = DRIVER.get()?.as_ref().ok()?;
    // SAFETY: the symbol, where the driver has it, is the CUDA 12.8 `cuMemcpyBatchAsync`,
    // whose C signature `MemcpyBatchAsync` spells; the library stays loaded for the
    // process's lifetime (a static), so the pointer copied out stays valid.
    let symbol = unsafe { library.get::<MemcpyBatchAsync>(b"cuMemcpyBatchAsync") }.ok()?;
    Some(*symbol)
}

/// The error for a failed driver call: its name, the code's name and description, and
/// `hint` (what to change), if any; the driver's error as the source.
pub(super) fn error(call: &'static str, e: DriverError, hint: &str) -> Error {
    let name = e
        .error_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "CUDA_ERROR".into());
    let mut message = format!("{name} ({})", e.0 as i32);
    if let Ok(text) = e.error_string() {
        message.push_str(": ");
        message.push_str(&text.to_string_lossy());
    }
    if !hint.is_empty() {
        message.push_str(". ");
        message.push_str(hint);
    }
    Error::Backend {
        call,
        message,
        source: Some(Box::new(e)),
    }
}

/// Names the driver call behind a cudarc result.
pub(super) trait Call<T> {
    /// `Err(DriverError)` → [`Error::Backend`] naming `call`.
    fn call(self, call: &'static str) -> Result<T>;
}

impl<T> Call<T> for std::result::Result<T, DriverError> {
    #[inline]
    fn call(self, call: &'static str) -> Result<T> {
        self.map_err(|e| error(call, e, ""))
    }
}
