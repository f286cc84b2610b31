//! `pinring.Batch`: a leased device slot, exported through DLPack and released with a
//! fence.
//!
//! The lease lives in a [`BatchCell`] shared (through an `Arc`) by the Python object and by
//! every DLPack capsule or tensor made from it, so the slot stays leased until the last of
//! them goes, unless the caller releases it explicitly first. The cell also holds the
//! loader's pipeline, so the slot's memory outlives every view of it, even after
//! `loader.close()`.

use std::ffi::c_void;
use std::sync::{Arc, Mutex, MutexGuard};

use dlpark::allocation::fixed;
use dlpark::ffi::{
    DLDevice, DLDeviceType, DLManagedTensor, DLManagedTensorVersioned, DLPackVersion,
};
use dlpark::metadata::Fixed;
use dlpark::python::{export_dlpack, CudaStreamRequest, DlpackExporter, ExportRequest};
use dlpark::{DlpackFlags, Managed, ManagedTensorBase};
use pyo3::exceptions::{PyBufferError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt, PyTuple};

use pinring::{Batch, Cpu, CuEvent, CuStream, Cuda, Fence, ReleaseError};

use crate::device::Device;
use crate::errors;
use crate::loader::PipelineHolder;
use crate::source::Row;

/// A batch of either backend.
#[derive(Debug)]
pub(crate) enum AnyBatch {
    /// From a cpu-backend pipeline.
    Cpu(Batch<Cpu>),
    /// From a cuda-backend pipeline.
    Cuda(Batch<Cuda>),
}

impl AnyBatch {
    /// Samples in the batch.
    pub(crate) fn samples(&self) -> usize {
        match self {
            AnyBatch::Cpu(b) => b.samples(),
            AnyBatch::Cuda(b) => b.samples(),
        }
    }
}

/// The lease and what `release(event=None)` needs to know.
#[derive(Debug)]
struct Lease {
    /// The batch while it is leased; `None` once released.
    batch: Option<AnyBatch>,
    /// The stream the consumer declared to `__dlpack__` most recently (cuda only): the
    /// batch is bound to it, and `release()` without an event fences on it.
    declared: Option<CuStream>,
}

/// What the Python object and every DLPack export of it share.
#[derive(Debug)]
pub(crate) struct BatchCell {
    lease: Mutex<Lease>,
    /// Keeps the pipeline, and with it the slot's memory, alive while any view of the slot
    /// exists. Declared after `lease`, so a batch dropped here is released first.
    _pipeline: Arc<PipelineHolder>,
}

impl BatchCell {
    fn lock(&self) -> MutexGuard<'_, Lease> {
        self.lease.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One batch in a device slot, leased to you until released.
///
/// A DLPack producer: `torch.from_dlpack(batch)`, `numpy.from_dlpack(batch)` (cpu) or
/// `cupy.from_dlpack(batch)` give a zero-copy view of shape `(samples, cols)`. Release it
/// with `release(event=...)` once the work reading it is enqueued, leave a `with batch:`
/// block, or drop every reference to it and to the views made from it.
#[pyclass(module = "pinring", name = "Batch", frozen)]
#[derive(Debug)]
pub struct PyBatch {
    cell: Arc<BatchCell>,
    seq: u64,
    samples: usize,
    slot: usize,
    row: Row,
    device: Device,
    /// The slot's address (a host pointer on cpu, a `CUdeviceptr` on cuda).
    ptr: u64,
    /// The epoch the batch's samples belong to.
    epoch: u64,
    /// Each sample's id, in row order.
    ids: Box<[u64]>,
}

impl PyBatch {
    /// Wraps a freshly popped batch.
    pub(crate) fn new(
        batch: AnyBatch,
        row: Row,
        device: Device,
        pipeline: Arc<PipelineHolder>,
    ) -> Self {
        let (seq, samples, slot, ptr) = match &batch {
            AnyBatch::Cpu(b) => (
                b.seq(),
                b.samples(),
                b.slot(),
                b.device_ptr().as_ptr() as usize as u64,
            ),
            AnyBatch::Cuda(b) => (b.seq(), b.samples(), b.slot(), b.device_ptr()),
        };
        let (epoch, ids) = match &batch {
            AnyBatch::Cpu(b) => (b.epoch(), b.sample_ids().into()),
            AnyBatch::Cuda(b) => (b.epoch(), b.sample_ids().into()),
        };
        PyBatch {
            cell: Arc::new(BatchCell {
                lease: Mutex::new(Lease {
                    batch: Some(batch),
                    declared: None,
                }),
                _pipeline: pipeline,
            }),
            seq,
            samples,
            slot,
            row,
            device,
            ptr,
            epoch,
            ids,
        }
    }

    fn released_error(&self) -> PyErr {
        PyBufferError::new_err(format!(
            "batch {} was released: its slot may hold another batch now",
            self.seq
        ))
    }

    /// Makes the bytes ready for the consumer of an export, per the request's stream.
    fn prepare(&self, py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        match self.device {
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
                let ready = py.detach(move || {
                    let lease = cell.lock();
                    match &lease.batch {
                        Some(AnyBatch::Cpu(b)) => {
                            let _ = b.bytes();
                            true
                        }
                        _ => false,
                    }
                });
                if ready {
                    Ok(())
                } else {
                    Err(self.released_error())
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
                        // batch is bound to it, and release() records on it).
                        Some(unsafe { CuStream::from_raw(raw as *mut _) })
                    }
                };
                let mut lease = self.cell.lock();
                let Some(AnyBatch::Cuda(batch)) = lease.batch.as_mut() else {
                    return Err(self.released_error());
                };
                if let Some(stream) = stream {
                    // Stream-side: cuStreamWaitEvent(stream, READY(slot)); no host block.
                    batch.wait_on(&stream).map_err(|e| {
                        errors::to_py_with(py, e, &format!("__dlpack__ of batch {}", self.seq))
                    })?;
                    lease.declared = Some(stream);
                }
                Ok(())
            }
        }
    }

    /// A fresh, unfinished managed tensor of ABI `M` viewing the slot, owning a reference
    /// to the cell.
    fn initialized<M: ManagedTensorBase>(&self) -> PyResult<fixed::Initialized<M, 2>> {
        let as_i64 = |n: usize| {
            i64::try_from(n).map_err(|_| PyBufferError::new_err("batch dimensions overflow i64"))
        };
        let (rows, cols) = (as_i64(self.samples)?, as_i64(self.row.cols)?);
        let mut tensor = Fixed::new([rows, cols], [cols, 1])
            .initialize_as::<M>(self.cell.clone())
            .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        tensor
            .set_data(self.ptr as usize as *mut c_void)
            .set_dtype(self.row.dtype.dlpack())
            .set_device(dl_device(self.device));
        Ok(tensor)
    }
}

/// The DLPack device of `device`.
fn dl_device(device: Device) -> DLDevice {
    let (device_type, device_id) = device.dlpack();
    DLDevice {
        device_type: DLDeviceType(device_type),
        device_id,
    }
}

// The DLPack contract of the `finish` calls in `Export`: `data` is the slot's address, and the
// slot holds `samples × cols` elements of `dtype` (the batch's bytes), row-major as the
// strides say. The managed tensor's context is an `Arc` of the cell, which keeps the
// pipeline (and so the slot's memory) alive until the consumer calls the deleter, and keeps
// the slot leased unless the caller releases it explicitly (then the caller's fence orders
// reuse after its reads). No flag is asserted.

/// One `__dlpack__` call.
struct Export<'a> {
    batch: &'a PyBatch,
    /// The version a versioned capsule declares: 1.x with x no higher than the consumer's
    /// `max_version` allows and this build's headers know.
    version: DLPackVersion,
}

impl DlpackExporter for Export<'_> {
    fn device(&self) -> DLDevice {
        dl_device(self.batch.device)
    }

    fn flags(&self) -> DlpackFlags {
        DlpackFlags::empty()
    }

    fn prepare_export(&self, py: Python<'_>, request: &ExportRequest<'_>) -> PyResult<()> {
        self.batch.prepare(py, request)
    }

    fn export_legacy(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensor>> {
        let tensor = self.batch.initialized::<DLManagedTensor>()?;
        // SAFETY: see the note above `Export`: the descriptor views the leased slot, and its
        // context keeps the slot's memory alive until the deleter runs.
        Ok(unsafe { tensor.finish() })
    }

    fn export_versioned(&self, _py: Python<'_>) -> PyResult<Managed<DLManagedTensorVersioned>> {
        let mut tensor = self.batch.initialized::<DLManagedTensorVersioned>()?;
        tensor
            .set_version(self.version)
            .map_err(|e| PyBufferError::new_err(e.to_string()))?;
        // SAFETY: as in `export_legacy`.
        Ok(unsafe { tensor.finish() })
    }
}

/// A release fence as given to `release(event=...)`, with the raw handle read out.
#[derive(Debug, Clone, Copy)]
enum FenceArg {
    /// `None`.
    Default,
    /// A `CUevent`: reuse waits for it as it stands now.
    Event { raw: usize, form: &'static str },
    /// A `CUstream`: an event is recorded on it now; reuse waits for that.
    Stream { raw: usize, form: &'static str },
}

impl FenceArg {
    /// What the caller passed, for messages.
    fn form(&self) -> &'static str {
        match self {
            FenceArg::Default => "the declared stream",
            FenceArg::Event { form, .. } | FenceArg::Stream { form, .. } => form,
        }
    }
}

const ACCEPTED: &str = "release(event=...) accepts None, an int (a raw CUevent), a \
    torch.cuda.Event (.cuda_event), a torch.cuda.Stream (.cuda_stream / .record_event()), a \
    cupy.cuda.Stream (.record()) or a cupy.cuda.Event (.ptr)";

fn handle(value: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(PyTypeError::new_err(format!(
            "{what} is {}, not an int handle. {ACCEPTED}",
            value.get_type().name()?
        )));
    }
    value.extract::<usize>().map_err(|_| {
        PyValueError::new_err(format!(
            "{what} = {value} is not a valid handle (0 or more)"
        ))
    })
}

fn nonzero_event(raw: usize, what: &str) -> PyResult<usize> {
    if raw == 0 {
        Err(PyValueError::new_err(format!(
            "{what} is 0: the event was never created or recorded; record it on your stream \
             first, or release with the stream itself"
        )))
    } else {
        Ok(raw)
    }
}

/// Whether an object with `.record` and `.ptr` is a stream (cupy.cuda.Stream) rather than
/// an event (cupy.cuda.Event, which has `.record(stream=None)` too).
fn looks_like_stream(obj: &Bound<'_, PyAny>) -> PyResult<bool> {
    if obj.hasattr("wait_event")? || obj.hasattr("__cuda_stream__")? {
        return Ok(true);
    }
    let name = obj.get_type().name()?.to_string();
    if name.contains("Event") {
        return Ok(false);
    }
    // Neither marker: `.record` is taken as the stream form, as documented.
    Ok(true)
}

/// The form of a `release(event=...)` argument, found by inspecting attributes only.
#[derive(Debug)]
enum Form<'py> {
    /// `None`.
    Default,
    /// An int: a raw `CUevent`.
    RawEvent(Bound<'py, PyAny>),
    /// Has `.cuda_event` (torch.cuda.Event).
    TorchEvent(Bound<'py, PyAny>),
    /// Has `.record_event()` (torch.cuda.Stream).
    TorchStream(Bound<'py, PyAny>),
    /// Has `.record()` and looks like a stream (cupy.cuda.Stream).
    CupyStream(Bound<'py, PyAny>),
    /// Has `.ptr` (cupy.cuda.Event).
    CupyEvent(Bound<'py, PyAny>),
}

impl Form<'_> {
    fn name(&self) -> &'static str {
        match self {
            Form::Default => "None",
            Form::RawEvent(_) => "raw CUevent (an int)",
            Form::TorchEvent(_) => "torch.cuda.Event",
            Form::TorchStream(_) => "torch.cuda.Stream",
            Form::CupyStream(_) => "cupy.cuda.Stream",
            Form::CupyEvent(_) => "cupy.cuda.Event",
        }
    }
}

/// Which form `event` has. Checked in this order, since the objects share attributes: a
/// torch Event also has `.record()`, a cupy Event has `.record()` and `.ptr` like a cupy
/// Stream (a stream is told apart by `.wait_event` / `__cuda_stream__`, or failing those,
/// by its class name not naming an event).
fn inspect<'py>(event: Option<&Bound<'py, PyAny>>) -> PyResult<Form<'py>> {
    let Some(obj) = event.filter(|e| !e.is_none()) else {
        return Ok(Form::Default);
    };
    let obj = obj.clone();
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        return Ok(Form::RawEvent(obj));
    }
    if obj.hasattr("cuda_event")? {
        return Ok(Form::TorchEvent(obj));
    }
    if obj.hasattr("record_event")? {
        return Ok(Form::TorchStream(obj));
    }
    if obj.hasattr("record")? && looks_like_stream(&obj)? {
        return Ok(Form::CupyStream(obj));
    }
    if obj.hasattr("ptr")? {
        return Ok(Form::CupyEvent(obj));
    }
    Err(PyTypeError::new_err(format!(
        "event={} ({}) is not a fence. {ACCEPTED}",
        obj.repr()?,
        obj.get_type().name()?
    )))
}

/// Reads the raw handle a form stands for, calling `record_event()` / `record()` where the
/// object has no handle of its own. `keep` receives objects that must stay alive until the
/// release is done.
fn resolve<'py>(form: &Form<'py>, keep: &mut Vec<Bound<'py, PyAny>>) -> PyResult<FenceArg> {
    let name = form.name();
    let event = |raw: usize, what: &str| -> PyResult<FenceArg> {
        Ok(FenceArg::Event {
            raw: nonzero_event(raw, what)?,
            form: name,
        })
    };
    match form {
        Form::Default => Ok(FenceArg::Default),
        Form::RawEvent(obj) => event(handle(obj, "event")?, "event"),
        Form::TorchEvent(obj) => event(
            handle(&obj.getattr("cuda_event")?, "event.cuda_event")?,
            "event.cuda_event",
        ),
        Form::TorchStream(obj) => {
            if obj.hasattr("cuda_stream")? {
                let raw = handle(&obj.getattr("cuda_stream")?, "stream.cuda_stream")?;
                return Ok(FenceArg::Stream { raw, form: name });
            }
            let recorded = obj.call_method0("record_event")?;
            let raw = handle(
                &recorded.getattr("cuda_event")?,
                "record_event().cuda_event",
            )?;
            keep.push(recorded);
            event(raw, "record_event().cuda_event")
        }
        Form::CupyStream(obj) => {
            if obj.hasattr("ptr")? {
                let raw = handle(&obj.getattr("ptr")?, "stream.ptr")?;
                return Ok(FenceArg::Stream { raw, form: name });
            }
            let recorded = obj.call_method0("record")?;
            let raw = handle(&recorded.getattr("ptr")?, "stream.record().ptr")?;
            keep.push(recorded);
            event(raw, "stream.record().ptr")
        }
        Form::CupyEvent(obj) => event(handle(&obj.getattr("ptr")?, "event.ptr")?, "event.ptr"),
    }
}

/// Releases a cuda batch with `fence`; on failure the batch is handed back.
fn release_cuda(
    batch: Batch<Cuda>,
    fence: FenceArg,
    declared: Option<&CuStream>,
) -> Result<(), Box<ReleaseError<Cuda>>> {
    let result = match fence {
        FenceArg::Default => match declared {
            Some(stream) => batch.release(Fence::Stream(stream)),
            None => {
                // No stream declared: the core's conservative release of an unbound batch
                // (a context synchronize on this backend).
                drop(batch);
                return Ok(());
            }
        },
        FenceArg::Event { raw, .. } => {
            // SAFETY: `raw` is the caller's live CUevent (read from the object passed to
            // release(), which the caller keeps alive for the call, or given as an int,
            // whose liveness the caller promises per the docs); the `CuEvent` lives only for
            // this call, and the capture waits on the event's current record at once.
            let event = unsafe { CuEvent::from_raw(raw as *mut _) };
            batch.release(Fence::Event(&event))
        }
        FenceArg::Stream { raw, .. } => {
            // SAFETY: `raw` is the caller's live CUstream (read from the stream object passed
            // to release(), alive for the call); the `CuStream` lives only for this call, in
            // which the fence event is recorded on it.
            let stream = unsafe { CuStream::from_raw(raw as *mut _) };
            batch.release(Fence::Stream(&stream))
        }
    };
    result.map_err(Box::new)
}

#[pymethods]
impl PyBatch {
    /// The batch's sequence number: 0, 1, 2, ... in delivery order.
    #[getter]
    fn seq(&self) -> u64 {
        self.seq
    }

    /// The epoch (from 0) every sample of the batch belongs to: a batch never spans two
    /// epochs.
    #[getter]
    fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Each sample's id, in row order, as a read-only numpy uint64 array: the window's
    /// index in the dataset's fixed enumeration (shard by shard, window by window),
    /// the same whatever the order, seed, rank or world size. Needs numpy.
    #[getter]
    fn sample_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let numpy = py.import("numpy").map_err(|e| {
            pyo3::exceptions::PyImportError::new_err(format!(
                "Batch.sample_ids is a numpy array: install numpy ({e})"
            ))
        })?;
        let bytes: Vec<u8> = self.ids.iter().flat_map(|id| id.to_le_bytes()).collect();
        numpy.call_method1("frombuffer", (pyo3::types::PyBytes::new(py, &bytes), "<u8"))
    }

    /// Samples (rows) in the batch: batch_size, or fewer for a short last batch.
    #[getter]
    fn samples(&self) -> usize {
        self.samples
    }

    /// `(samples, cols)`: `cols` is `seq_len + 1` for TokenWindows, `record_bytes` for
    /// FixedRecords.
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, [self.samples, self.row.cols])
    }

    /// The element type's name: "uint8", "uint16", "int32" or "int64".
    #[getter]
    fn dtype(&self) -> &'static str {
        self.row.dtype.name()
    }

    /// Bytes of the batch: samples × cols × itemsize.
    #[getter]
    fn nbytes(&self) -> usize {
        self.samples * self.row.bytes()
    }

    /// "cpu" or "cuda:N".
    #[getter]
    fn device(&self) -> String {
        self.device.name()
    }

    /// The slot's address: a host pointer on cpu, a CUdeviceptr on cuda (what
    /// `torch.from_dlpack(batch).data_ptr()` returns).
    #[getter]
    fn ptr(&self) -> u64 {
        self.ptr
    }

    /// The device slot the batch occupies.
    #[getter]
    fn slot(&self) -> usize {
        self.slot
    }

    /// Whether the batch has been released (its slot may hold another batch now).
    #[getter]
    fn released(&self) -> bool {
        self.cell.lock().batch.is_none()
    }

    /// `(device_type, device_id)` per DLPack: `(1, 0)` for cpu, `(2, N)` for cuda:N.
    fn __dlpack_device__(&self) -> (u32, i32) {
        self.device.dlpack()
    }

    /// A DLPack capsule viewing the slot (zero copy), per the Python array API standard.
    ///
    /// `stream` (cuda): `-1` no synchronization; `None` or `1` the legacy default stream;
    /// `2` the per-thread default stream; any other int a `cudaStream_t`. The stream waits
    /// for the batch's copy stream-side (`cuStreamWaitEvent`), never the host, and is
    /// remembered: `release()` without an event then fences on it. A versioned (1.x)
    /// capsule when `max_version` allows it, else a legacy one. `copy=True` raises
    /// BufferError (pinring only exports zero-copy).
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
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
            batch: self,
            version: DLPackVersion {
                major: current.major,
                minor,
            },
        };
        export_dlpack(&export, py, request)
    }

    /// Gives the slot back; its reuse waits for `event`, stream-side.
    ///
    /// `event` may be None, an int (a raw CUevent), a torch.cuda.Event, a torch.cuda.Stream,
    /// a cupy.cuda.Stream or a cupy.cuda.Event. None fences on the stream last declared to
    /// `__dlpack__`, or, with none declared, conservatively (a context synchronize on cuda).
    /// On the cpu backend only None is accepted. Idempotent; works from any thread and
    /// after the loader is closed.
    #[pyo3(signature = (event = None))]
    fn release(&self, py: Python<'_>, event: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let form = inspect(event)?;
        if self.device == Device::Cpu {
            if !matches!(form, Form::Default) {
                return Err(PyTypeError::new_err(format!(
                    "batch {} is on the cpu backend, which has no CUDA streams or events: \
                     release it with event=None (got a {})",
                    self.seq,
                    form.name()
                )));
            }
            let taken = self.cell.lock().batch.take();
            // The core's release of an unbound cpu batch: it waits for every CpuStream to
            // drain (none in Python use), then frees the slot.
            py.detach(move || drop(taken));
            return Ok(());
        }
        if self.released() {
            // Idempotent: nothing to fence, and nothing is recorded on the caller's stream.
            return Ok(());
        }
        let mut keep = Vec::new();
        let fence = resolve(&form, &mut keep)?;
        let mut lease = self.cell.lock();
        let Some(batch) = lease.batch.take() else {
            return Ok(());
        };
        match batch {
            AnyBatch::Cpu(b) => {
                // Not reached: a cpu batch is released above.
                drop(lease);
                py.detach(move || drop(b));
                Ok(())
            }
            AnyBatch::Cuda(b) => {
                let declared = lease.declared.take();
                if matches!(fence, FenceArg::Default) && declared.is_none() {
                    drop(lease);
                    // The core's release of an unbound, dropped batch: conservative (a context
                    // synchronize, a host block), so without the GIL.
                    py.detach(move || drop(b));
                    return Ok(());
                }
                let result = release_cuda(b, fence, declared.as_ref());
                drop(keep);
                result.map_err(|e| {
                    let e = *e;
                    lease.batch = Some(AnyBatch::Cuda(e.batch));
                    lease.declared = declared;
                    drop(lease);
                    let context =
                        format!("release of batch {} (fence: {})", self.seq, fence.form());
                    errors::to_py_with(py, e.error, &context)
                })
            }
        }
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Releases the batch (as `release()` with no event).
    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.release(py, None)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "<pinring.Batch seq={} shape=({}, {}) dtype={} device={}{}>",
            self.seq,
            self.samples,
            self.row.cols,
            self.row.dtype.name(),
            self.device.name(),
            if self.released() { " released" } else { "" }
        )
    }
}
