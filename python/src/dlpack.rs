//! The DLPack export of a batch or of one of its fields (through `dlpark`): the capsule
//! viewing the slot (or a field's bytes in it), and the stream-side wait
//! `__dlpack__(stream=...)` asks for. `Batch.__dlpack__` and `Field.__dlpack__` both call
//! [`export`], so the two have the same stream semantics and share one lease.

use std::ffi::c_void;
use std::sync::Arc;

use dlpark::allocation::fixed;
use dlpark::ffi::{
    DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion,
};
use dlpark::metadata::Fixed;
use dlpark::python::{export_dlpack, CudaStreamRequest, DlpackExporter, ExportRequest};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use pyo3::exceptions::PyBufferError;
use pyo3::prelude::*;

use pinring::{CuStream, Dtype};

use crate::device::Device;
use crate::dispatch::AnyBatch;
use crate::errors::from_core::to_py_with;
use crate::holder::PipelineHolder;
use crate::lease::{BatchCell, Leased};
use crate::source::dtype;

/// The shape of what an export views.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Shape {
    /// A batch of samples: `(samples, cols)`, row-major.
    Rows {
        /// Rows.
        samples: usize,
        /// Elements per row.
        cols: usize,
    },
    /// One field of a batch: `(len,)`.
    Flat {
        /// Elements.
        len: usize,
    },
}

/// What an export describes: the leased slot's (or a field's) address, shape and type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SlotView {
    /// The batch's sequence number, for messages.
    pub(crate) seq: u64,
    /// The first element's address (a host pointer on cpu, a `CUdeviceptr` on cuda): the
    /// slot's, or a field's inside it.
    pub(crate) ptr: u64,
    /// Its shape.
    pub(crate) shape: Shape,
    /// Its element type.
    pub(crate) dtype: Dtype,
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

// The DLPack contract of the `finish` calls in `Export`: `data` is the address of the view's
// first element inside the slot, and the slot holds the elements the shape and strides
// describe from there, of `dtype` (the batch's bytes: `samples × cols` row-major, or a
// field's `len` contiguous elements, which the field's layout keeps inside the slot; a fixed
// view's `batch_size × cols`, or a field's longest, which the slot is sized for). The
// managed tensor's context is an `Arc` of the cell, which keeps the pipeline (and so the
// slot's memory) alive until the consumer calls the deleter, and keeps the slot leased
// unless the caller releases it explicitly (then the caller's fence orders reuse after its
// reads); or, for a fixed view, an `Arc` of the pipeline's holder, which keeps the slot's
// memory alive (what the view shows is then the batch of the slot's current lease, by the
// lease and fence rules the docs of `Batch.view` state). No flag is asserted.

/// What an export's capsule holds on to, and so what it waits for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Owner<'a> {
    /// A batch's lease: every capsule shares it (the slot stays leased while one lives),
    /// and the export waits for the batch's copy as the request asks.
    Lease(&'a Arc<BatchCell>),
    /// A fixed view of a device slot (`Loader(fixed_views=...)`): the capsule keeps the
    /// slot's memory alive but holds no lease, and the export waits for nothing (it is
    /// made once per slot; each `pop` orders its batch on the declared stream).
    Slot(&'a Arc<PipelineHolder>),
    /// A batch's kept host bytes (`Batch.host`): the capsule shares the lease; nothing to
    /// wait for (the copy thread kept them before the batch was handed out).
    Host(&'a Arc<BatchCell>),
}

/// One `__dlpack__` call.
#[derive(Debug)]
pub(crate) struct Export<'a> {
    /// What the capsule holds on to.
    pub(crate) owner: Owner<'a>,
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
        let cell = match self.owner {
            // A fixed view: nothing to wait for now, whatever stream the consumer names.
            Owner::Slot(_) => return Ok(()),
            Owner::Host(cell) => {
                return if cell.lock_attached(py).is_some() {
                    Ok(())
                } else {
                    Err(released_error(seq))
                };
            }
            Owner::Lease(cell) => cell,
        };
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
                let cell = cell.clone();
                // A host wait on READY (the cpu backend's copy runs on its own thread):
                // without the GIL, since it may take as long as the copy.
                let ready = py.detach(move || match cell.lock().as_ref().map(|l| &l.batch) {
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
                    let leased = cell.lock_attached(py).is_some();
                    return if leased {
                        Ok(())
                    } else {
                        Err(released_error(seq))
                    };
                };
                let mut lease = cell.lock_attached(py);
                let Some(Leased {
                    batch: AnyBatch::Cuda(batch),
                    streams,
                }) = lease.as_mut()
                else {
                    return Err(released_error(seq));
                };
                // Stream-side: cuStreamWaitEvent(stream, READY(slot)); no host block. The
                // batch is bound to every stream declared this way: its release (or drop)
                // fences the slot on all of them.
                batch
                    .wait_on(&stream)
                    .map_err(|e| to_py_with(py, e, &format!("__dlpack__ of batch {seq}")))?;
                streams.bind(stream.raw() as usize);
                Ok(())
            }
        }
    }

    /// A fresh, unfinished managed tensor of ABI `M` and rank `N` viewing the slot with
    /// `shape` and `strides` (in elements), owning a reference to the cell (or, for a
    /// fixed view, to the pipeline).
    fn initialized<M: ManagedTensorBase, const N: usize>(
        &self,
        shape: [i64; N],
        strides: [i64; N],
    ) -> PyResult<fixed::Initialized<M, N>> {
        let view = self.view;
        let metadata = Fixed::new(shape, strides);
        let mut tensor = match self.owner {
            Owner::Lease(cell) | Owner::Host(cell) => metadata.initialize_as::<M>(cell.clone()),
            Owner::Slot(holder) => metadata.initialize_as::<M>(holder.clone()),
        }
        .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        tensor
            .set_data(view.ptr as usize as *mut c_void)
            .set_dtype(dtype::dlpack(view.dtype))
            .set_device(dl_device(view.device));
        Ok(tensor)
    }

    /// The view's shape and strides (in elements), of rank 2 or 1.
    fn extents(&self) -> PyResult<Extents> {
        let as_i64 = |n: usize| {
            i64::try_from(n).map_err(|_| PyBufferError::new_err("batch dimensions overflow i64"))
        };
        Ok(match self.view.shape {
            Shape::Rows { samples, cols } => {
                let (rows, cols) = (as_i64(samples)?, as_i64(cols)?);
                Extents::Two([rows, cols], [cols, 1])
            }
            Shape::Flat { len } => Extents::One([as_i64(len)?], [1]),
        })
    }
}

/// Shape and strides of a view, by rank.
enum Extents {
    /// A batch of rows.
    Two([i64; 2], [i64; 2]),
    /// A field.
    One([i64; 1], [i64; 1]),
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
        Ok(match self.extents()? {
            Extents::Two(shape, strides) => {
                let tensor = self.initialized::<DLManagedTensor, 2>(shape, strides)?;
                // SAFETY: see the note above `Export`: the descriptor views the slot (leased,
                // or a fixed view), and its context keeps the slot's memory alive until the
                // deleter runs.
                unsafe { tensor.finish() }
            }
            Extents::One(shape, strides) => {
                let tensor = self.initialized::<DLManagedTensor, 1>(shape, strides)?;
                // SAFETY: as above; a field's elements lie inside the slot.
                unsafe { tensor.finish() }
            }
        })
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        let versioned = |e: dlpark::IncompatibleVersionError| PyBufferError::new_err(e.to_string());
        Ok(match self.extents()? {
            Extents::Two(shape, strides) => {
                let mut tensor = self.initialized::<DLManagedTensorVersioned, 2>(shape, strides)?;
                tensor.set_version(self.version).map_err(versioned)?;
                // SAFETY: as in `export_legacy`.
                unsafe { tensor.finish() }
            }
            Extents::One(shape, strides) => {
                let mut tensor = self.initialized::<DLManagedTensorVersioned, 1>(shape, strides)?;
                tensor.set_version(self.version).map_err(versioned)?;
                // SAFETY: as in `export_legacy`; a field's elements lie inside the slot.
                unsafe { tensor.finish() }
            }
        })
    }
}

/// `__dlpack__` of a batch or a field (a capsule viewing `view`, sharing the lease of
/// `owner`, after the stream-side wait, or on cpu the host wait, the request asks for), or
/// of a fixed view (a capsule keeping the slot's memory alive, no wait).
#[allow(clippy::too_many_arguments)]
pub(crate) fn export<'py>(
    py: Python<'py>,
    owner: Owner<'_>,
    view: SlotView,
    stream: Option<Bound<'py, PyAny>>,
    max_version: Option<(u32, u32)>,
    dl_device: Option<(u32, i32)>,
    copy: Option<bool>,
) -> PyResult<Py<PyAny>> {
    let current = DLPackVersion::CURRENT;
    let minor = match max_version {
        Some((major, minor)) if major == current.major => minor.min(current.minor),
        _ => current.minor,
    };
    let request = ExportRequest::parse(stream.as_ref(), max_version, dl_device, copy)?;
    let export = Export {
        owner,
        view,
        version: DLPackVersion {
            major: current.major,
            minor,
        },
    };
    export_dlpack(&export, py, request)
}
