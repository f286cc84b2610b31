//! A batch's DLPack export (through `dlpark`): the capsule viewing the slot, and the
//! stream-side wait `__dlpack__(stream=...)` asks for.

use std::ffi::c_void;
use std::sync::Arc;

use dlpark::allocation::fixed;
use dlpark::ffi::{
    DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion,
};
use dlpark::metadata::Fixed;
use dlpark::python::{CudaStreamRequest, DlpackExporter, ExportRequest};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;

use pinring::CuStream;

use crate::device::Device;
use crate::dispatch::AnyBatch;
use crate::errors::from_core::to_py_with;
use crate::lease::BatchCell;
use crate::source::dtype::Row;

/// What an export describes: the leased slot's address, shape and type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlotView {
    /// The batch's sequence number, for messages.
    pub(crate) seq: u64,
    /// The slot's address (a host pointer on cpu, a `CUdeviceptr` on cuda).
    pub(crate) ptr: u64,
    /// Rows.
    pub(crate) samples: usize,
    /// Row shape and element type.
    pub(crate) row: Row,
    /// Where the slot lives.
    pub(crate) device: Device,
}

/// The DLPack device of `device`.
pub(crate) fn dl_device(device: Device) -> DLDevice {
    let (device_type, device_id) = device.dlpack();
    DLDevice {
        device_type: DLDeviceType(device_type),
        device_id,
    }
}

/// The error of exporting a released batch.
pub(crate) fn released_error(seq: u64) -> PyErr {
    PyBufferError::new_err(format!(
        "batch {seq} was released: its slot may hold another batch now"
    ))
}

// The DLPack contract of the `finish` calls in `Export`: `data` is the slot's address, and the
// slot holds `samples × cols` elements of `dtype` (the batch's bytes), row-major as the
// strides say. The managed tensor's context is an `Arc` of the cell, which keeps the
// pipeline (and so the slot's memory) alive until the consumer calls the deleter, and keeps
// the slot leased unless the caller releases it explicitly (then the caller's fence orders
// reuse after its reads). No flag is asserted.

/// One `__dlpack__` call.
#[derive(Debug)]
pub(crate) struct Export<'a> {
    /// The lease every capsule shares.
    pub(crate) cell: &'a Arc<BatchCell>,
    /// What the capsule views.
    pub(crate) view: SlotView,
    /// The version a versioned capsule declares: 1.x with x no higher than the consumer's
    /// `max_version` allows and this build's headers know.
    pub(crate) version: DLPackVersion,
}

impl Export<'_> {
    /// Makes the bytes ready for the consumer of an export, per the request's stream.
    fn prepare(&self, py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        let seq = self.view.seq;
        match self.view.device {
            Device::Cpu => {
                if let Some(stream) = request.stream() {
                    let ok = stream.extract::<i64>().is_ok_and(|s| s == -1);
                    if !ok && !stream.is_none() {
                        return Err(PyBufferError::new_err(format!(
                            "stream={} for a cpu batch: only None (or -1) is accepted",
                            stream.repr()?
                        )));
                    }
                }
                let cell = self.cell.clone();
                // A host wait on READY (the cpu backend's copy runs on its own thread):
                // without the GIL, since it may take as long as the copy.
                let ready = py.detach(move || match &*cell.lock() {
                    Some(AnyBatch::Cpu(b)) => {
                        let _ = b.bytes();
                        true
                    }
                    _ => false,
                });
                if ready {
                    Ok(())
                } else {
                    Err(released_error(seq))
                }
            }
            Device::Cuda(_) => {
                let stream = match request.cuda_stream()? {
                    CudaStreamRequest::NoSync => None,
                    CudaStreamRequest::Omitted | CudaStreamRequest::LegacyDefault => {
                        Some(CuStream::legacy())
                    }
                    CudaStreamRequest::PerThreadDefault => Some(CuStream::per_thread()),
                    CudaStreamRequest::Pointer(raw) => {
                        // SAFETY: the array API contract: `raw` is a live `cudaStream_t` of the
                        // consumer, which keeps it alive while it uses the export; pinring's
                        // docs add that it must stay alive until the batch is released (the
                        // batch is bound to it, and its release records on it).
                        Some(unsafe { CuStream::from_raw(raw as *mut _) })
                    }
                };
                let Some(stream) = stream else {
                    let leased = self.cell.lock_attached(py).is_some();
                    return if leased {
                        Ok(())
                    } else {
                        Err(released_error(seq))
                    };
                };
                let mut lease = self.cell.lock_attached(py);
                let Some(AnyBatch::Cuda(batch)) = lease.as_mut() else {
                    return Err(released_error(seq));
                };
                // Stream-side: cuStreamWaitEvent(stream, READY(slot)); no host block. The
                // batch is bound to every stream declared this way: its release (or drop)
                // fences the slot on all of them.
                batch
                    .wait_on(&stream)
                    .map_err(|e| to_py_with(py, e, &format!("__dlpack__ of batch {seq}")))
            }
        }
    }

    /// A fresh, unfinished managed tensor of ABI `M` viewing the slot, owning a reference
    /// to the cell.
    fn initialized<M: ManagedTensorBase>(&self) -> PyResult<fixed::Initialized<M, 2>> {
        let as_i64 = |n: usize| {
            i64::try_from(n).map_err(|_| PyBufferError::new_err("batch dimensions overflow i64"))
        };
        let view = self.view;
        let (rows, cols) = (as_i64(view.samples)?, as_i64(view.row.cols)?);
        let mut tensor = Fixed::new([rows, cols], [cols, 1])
            .initialize_as::<M>(self.cell.clone())
            .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        tensor
            .set_data(view.ptr as usize as *mut c_void)
            .set_dtype(view.row.dtype.dlpack())
            .set_device(dl_device(view.device));
        Ok(tensor)
    }
}

impl DlpackExporter for Export<'_> {
    fn device(&self) -> DLDevice {
        dl_device(self.view.device)
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        self.prepare(py, request)
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        let tensor = self.initialized::<DLManagedTensor>()?;
        // SAFETY: see the note above `Export`: the descriptor views the leased slot, and its
        // context keeps the slot's memory alive until the deleter runs.
        Ok(unsafe { tensor.finish() })
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        let mut tensor = self.initialized::<DLManagedTensorVersioned>()?;
        tensor
            .set_version(self.version)
            .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        // SAFETY: as in `export_legacy`.
        Ok(unsafe { tensor.finish() })
    }
}
