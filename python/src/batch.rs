//! `pinring.Batch`: a leased device slot, exported through DLPack and released with a
//! fence.

use std::sync::Arc;

use pinring::{FieldAt, Locate};
use pyo3::exceptions::{PyBufferError, PyImportError, PyKeyError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use pyo3_stub_gen::derive::{gen_stub_pyclass, gen_stub_pymethods};

use crate::device::Device;
use crate::dispatch::{AnyBatch, BatchFacts};
use crate::dlpack::{export, Shape, SlotView};
use crate::errors::from_core::to_py_with;
use crate::field::PyField;
use crate::holder::PipelineHolder;
use crate::lease::BatchCell;
use crate::lineage::locations;
use crate::release_forms::{inspect, resolve, FenceArg, Form};
use crate::source::dtype::Row;

/// `bytes` as a read-only numpy array of `dtype` (`what` names it in the error without
/// numpy).
fn numpy_array<'py>(
    py: Python<'py>,
    bytes: &[u8],
    dtype: &str,
    what: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let numpy = py.import("numpy").map_err(|e| {
        PyImportError::new_err(format!("{what} is a numpy array: install numpy ({e})"))
    })?;
    numpy.call_method1("frombuffer", (PyBytes::new(py, bytes), dtype))
}

/// `values` as a read-only numpy uint64 array.
fn u64_array<'py>(py: Python<'py>, values: &[u64], what: &str) -> PyResult<Bound<'py, PyAny>> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    numpy_array(py, &bytes, "<u8", what)
}

/// One batch in a device slot, leased to you until released.
///
/// A DLPack producer: `torch.from_dlpack(batch)`, `numpy.from_dlpack(batch)` (cpu) or
/// `cupy.from_dlpack(batch)` give a zero-copy view of shape `(samples, cols)`. A batch of
/// several fields (a `Documents` step) is exported field by field instead:
/// `torch.from_dlpack(batch["inputs"])`; `batch.fields` names them. Release it with
/// `release(event=...)` once the work reading it is enqueued, leave a `with batch:` block,
/// or drop every reference to it, to its fields and to the views made from them. A view
/// read after the release may show the next batch's bytes (with
/// `Loader(poison_released=True)`, a debug mode, it shows out-of-range values instead).
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", name = "Batch", frozen)]
#[derive(Debug)]
pub struct PyBatch {
    cell: Arc<BatchCell>,
    facts: BatchFacts,
    row: Row,
    device: Device,
    /// What places the rows in their files (the pipeline's source).
    locator: Arc<dyn Locate>,
}

impl PyBatch {
    /// Wraps a freshly popped batch of the pipeline `pipeline` holds.
    pub(crate) fn new(
        batch: AnyBatch,
        row: Row,
        device: Device,
        pipeline: Arc<PipelineHolder>,
    ) -> Self {
        PyBatch {
            facts: batch.facts(),
            locator: pipeline.locator().clone(),
            cell: Arc::new(BatchCell::new(batch, pipeline)),
            row,
            device,
        }
    }

    fn view(&self) -> SlotView {
        SlotView {
            seq: self.facts.seq,
            ptr: self.facts.ptr,
            shape: Shape::Rows {
                samples: self.facts.samples,
                cols: self.row.cols,
            },
            dtype: self.row.dtype,
            device: self.device,
        }
    }

    /// The view of the field `at` of this batch: its elements inside the slot.
    fn field_view(&self, at: &FieldAt) -> SlotView {
        SlotView {
            seq: self.facts.seq,
            ptr: self.facts.ptr + at.offset as u64,
            shape: Shape::Flat { len: at.len },
            dtype: at.dtype,
            device: self.device,
        }
    }

    /// The names of the batch's fields, in layout order.
    fn field_names(&self) -> Vec<&str> {
        self.facts.fields.iter().map(|(n, _)| n.as_str()).collect()
    }

    /// The error for a name that is no field of this batch.
    fn no_such_field(&self, name: &str) -> PyErr {
        if self.facts.fields.is_empty() {
            PyKeyError::new_err(format!(
                "{name:?}: batch {} has no fields (a TokenWindows or FixedRecords batch is one \
                 array: torch.from_dlpack(batch))",
                self.facts.seq
            ))
        } else {
            PyKeyError::new_err(format!(
                "{name:?} is no field of batch {}: its fields are {}",
                self.facts.seq,
                self.field_names().join(", ")
            ))
        }
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl PyBatch {
    /// The batch's sequence number: 0, 1, 2, ... in delivery order.
    #[getter]
    fn seq(&self) -> u64 {
        self.facts.seq
    }

    /// The epoch (from 0) every sample of the batch belongs to: a batch never spans two
    /// epochs.
    #[getter]
    fn epoch(&self) -> u64 {
        self.facts.epoch
    }

    /// Each sample's id, in row order, as a read-only numpy uint64 array (needs numpy).
    ///
    /// With order="sequential" or "shuffled", a window's index in the dataset's fixed
    /// enumeration of grid windows (shard by shard, window by window at stride seq_len;
    /// a record's index for FixedRecords): the same whatever the seed, rank or world size,
    /// and each id comes once per epoch. With order="random", windows start at any offset
    /// and are drawn independently: the id is the index of the window's start among every
    /// possible start (shard by shard, token by token), so it numbers start offsets, not
    /// grid windows, and the same id can come more than once in an epoch.
    #[getter]
    #[gen_stub(override_return_type(type_repr = "numpy.typing.NDArray[numpy.uint64]", imports = ("numpy", "numpy.typing")))]
    fn sample_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        u64_array(py, &self.facts.ids, "Batch.sample_ids")
    }

    /// The names of the batch's fields, in layout order: `("tokens", "inputs", "targets",
    /// "cu_seqlens")` (and `"positions"`) for a `Documents` step; `()` for a batch without
    /// fields (TokenWindows, FixedRecords), which is one array.
    #[getter]
    #[gen_stub(override_return_type(type_repr = "tuple[str, ...]"))]
    fn fields<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.field_names())
    }

    /// The field `name` of this batch: a `pinring.Field`, a 1-D DLPack producer viewing
    /// its bytes in the slot (zero copy), of this batch's own length.
    ///
    /// Args:
    ///     name: one of `batch.fields`.
    ///
    /// Raises:
    ///     KeyError: the batch has no field of that name (the message lists its fields).
    fn __getitem__(slf: Bound<'_, Self>, name: &str) -> PyResult<PyField> {
        let batch = slf.get();
        let Some((name, at)) = batch.facts.fields.iter().find(|(n, _)| n == name) else {
            return Err(batch.no_such_field(name));
        };
        Ok(PyField::new(
            slf.clone().into_any().unbind(),
            batch.cell.clone(),
            name.clone(),
            *at,
            batch.field_view(at),
        ))
    }

    /// Whether `name` is one of the batch's fields.
    fn __contains__(&self, name: &str) -> bool {
        self.facts.fields.iter().any(|(n, _)| n == name)
    }

    /// The longest row of the batch, as a host int: for a `Documents` step, the longest
    /// document piece (the largest difference of `cu_seqlens`), what varlen attention
    /// kernels take as `max_seqlen`. None when the batch's rows have no lengths (windows,
    /// records).
    #[getter]
    fn max_seqlen(&self) -> Option<u32> {
        self.facts.row_lens.iter().copied().max().filter(|&m| m > 0)
    }

    /// Each document's id, one per document piece of the step in `cu_seqlens` order, as a
    /// read-only numpy uint64 array (needs numpy): the global offset of the document's BOS
    /// token over the shards in order, the same whatever the order, seed, rank or world
    /// size. None for a batch without fields (windows, records: see `sample_ids`).
    #[getter]
    #[gen_stub(override_return_type(type_repr = "numpy.typing.NDArray[numpy.uint64] | None", imports = ("numpy", "numpy.typing")))]
    fn doc_ids<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if self.facts.fields.is_empty() {
            return Ok(None);
        }
        u64_array(py, &self.facts.ids, "Batch.doc_ids").map(Some)
    }

    /// Each row's source, in row order, as a read-only numpy uint16 array (needs numpy):
    /// its index in the Mixture's `sources` (each document's, for Documents); all 0 for a
    /// single source. With `sample_ids` (each row's id within its source) it names every
    /// row.
    #[getter]
    #[gen_stub(override_return_type(type_repr = "numpy.typing.NDArray[numpy.uint16]", imports = ("numpy", "numpy.typing")))]
    fn sources<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let bytes: Vec<u8> = self
            .facts
            .sources
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        numpy_array(py, &bytes, "<u2", "Batch.sources")
    }

    /// Where each row came from, in row order (each document piece, for Documents): a list
    /// of `pinring.Location` named tuples `(source, path, offset, len)`: the source's
    /// index in a Mixture (0 otherwise), the file (as the source opened it), the row's
    /// first token in the file (a record's index for FixedRecords; a document's `bos`
    /// token for Documents) and its length in tokens (records). A token row's bytes are
    /// `len × token bytes` from `1024 + offset × token bytes` of the shard (its 256-int
    /// header first); a record's `record_bytes` from `offset × record_bytes`. Arithmetic
    /// on the source's layout: nothing is read, and it works after `release()`.
    ///
    /// Raises:
    ///     SourceError: a row the source cannot place (not expected: the locator is the
    ///         loader's own source).
    #[gen_stub(override_return_type(type_repr = "list[_lineage.Location]", imports = ("pinring._lineage",)))]
    fn locate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        locations(py, &*self.locator, &self.facts)
    }

    /// The step of the run this batch is (from 0): this rank's k-th batch of an
    /// uninterrupted run, counted across epochs (TokenWindows, FixedRecords, Mixture), or
    /// the step a `Documents` batch packs; the same on every rank, and numbered on by a
    /// resumed run, from `start_step`, past `skip_steps`.
    #[getter]
    fn step(&self) -> Option<u64> {
        self.facts.step
    }

    /// Samples (rows) in the batch: batch_size, or fewer for an epoch's short last batch.
    #[getter]
    fn samples(&self) -> usize {
        self.facts.samples
    }

    /// `(samples, cols)`: `cols` is `seq_len + 1` for TokenWindows, `record_bytes` for
    /// FixedRecords; for a batch of fields, `(1, slot bytes)` of uint8 (its fields' shapes
    /// are `batch[name].shape`).
    #[getter]
    #[gen_stub(override_return_type(type_repr = "tuple[int, int]"))]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, [self.facts.samples, self.row.cols])
    }

    /// The element type's name: "uint8", "uint16", "int32" or "int64" ("uint8" for a batch
    /// of fields: each field has its own, `batch[name].dtype`).
    #[getter]
    fn dtype(&self) -> &'static str {
        self.row.dtype.name()
    }

    /// Bytes of the batch: samples × cols × itemsize.
    #[getter]
    fn nbytes(&self) -> usize {
        self.facts.samples * self.row.bytes()
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
        self.facts.ptr
    }

    /// The device slot the batch occupies.
    #[getter]
    fn slot(&self) -> usize {
        self.facts.slot
    }

    /// Whether the batch has been released (its slot may hold another batch now).
    #[getter]
    fn released(&self, py: Python<'_>) -> bool {
        self.cell.lock_attached(py).is_none()
    }

    /// `(device_type, device_id)` per DLPack: `(1, 0)` for cpu, `(2, N)` for cuda:N.
    fn __dlpack_device__(&self) -> (u32, i32) {
        self.device.dlpack()
    }

    /// A DLPack capsule viewing the slot (zero copy), per the Python array API standard.
    /// A batch of fields is exported field by field (`batch["inputs"].__dlpack__`, same
    /// arguments): it raises BufferError.
    ///
    /// Args:
    ///     stream: (cuda) `-1` no synchronization; `None` or `1` the legacy default stream;
    ///         `2` the per-thread default stream (of the calling thread); any other int a
    ///         `cudaStream_t`. The stream waits for the batch's copy stream-side
    ///         (`cuStreamWaitEvent`), never the host. Every stream declared this way while
    ///         the batch is leased is fenced before the slot is reused: by `release()`
    ///         without an event, and by the release when the last view goes. On cpu only
    ///         None or -1 (the call waits for the copy, host-side).
    ///     max_version: a versioned (1.x) capsule when it allows one, else a legacy one.
    ///     dl_device: must be the batch's own device, or None.
    ///     copy: `True` raises BufferError: pinring exports zero-copy only.
    ///
    /// Raises:
    ///     BufferError: the batch was released, or a copy or another device was asked for,
    ///         or the batch has fields.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    #[gen_stub(override_return_type(type_repr = "typing.Any", imports = ("typing",)))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        #[gen_stub(override_type(type_repr = "int | None"))] stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        if !self.facts.fields.is_empty() {
            return Err(PyBufferError::new_err(format!(
                "batch {} holds several fields ({}): export one of them, e.g. \
                 torch.from_dlpack(batch[\"{}\"])",
                self.facts.seq,
                self.field_names().join(", "),
                self.field_names()[0]
            )));
        }
        export(
            py,
            &self.cell,
            self.view(),
            stream,
            max_version,
            dl_device,
            copy,
        )
    }

    /// Gives the slot back; its reuse waits for the fence, stream-side.
    ///
    /// Args:
    ///     event: None: the slot is fenced on every stream declared to `__dlpack__` (what
    ///         `torch.from_dlpack` and `cupy.from_dlpack` pass), each from the thread that
    ///         declared it; with none declared, conservatively (cuda: a context
    ///         synchronize, with the GIL released). Or an int (a raw CUevent), a
    ///         torch.cuda.Event, a torch.cuda.Stream, a cupy.cuda.Stream or a
    ///         cupy.cuda.Event: reuse waits for it as it stands now (and for the declared
    ///         streams). On the cpu backend only None.
    ///
    /// Idempotent; works from any thread and after the loader is closed.
    ///
    /// Raises:
    ///     TypeError: `event` is none of the forms above, or a CUDA fence on a cpu batch.
    ///     ValueError: an event that was never recorded.
    ///     CudaError: the fence was rejected (a stream of another device); the batch stays
    ///         leased.
    #[pyo3(signature = (event = None))]
    fn release(
        &self,
        py: Python<'_>,
        #[gen_stub(override_type(type_repr = "typing.Any | None", imports = ("typing",)))]
        event: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let form = inspect(event)?;
        if self.device == Device::Cpu && !matches!(form, Form::Default) {
            return Err(PyTypeError::new_err(format!(
                "batch {} is on the cpu backend, which has no CUDA streams or events: \
                 release it with event=None (got a {})",
                self.facts.seq,
                form.name()
            )));
        }
        if self.released(py) {
            // Idempotent: nothing to fence, and nothing is recorded on the caller's stream.
            return Ok(());
        }
        let mut keep = Vec::new();
        let fence = resolve(&form, &mut keep)?;
        let cell = &self.cell;
        // Without the GIL: an unbound batch's release may synchronize (cuda).
        let failed = py.detach(|| {
            let mut lease = cell.lock();
            match (lease.take(), fence) {
                (None, _) => None,
                (Some(batch), FenceArg::Default) => {
                    drop(lease);
                    drop(batch);
                    None
                }
                (Some(AnyBatch::Cuda(batch)), fence) => match fence.release(batch) {
                    Ok(()) => None,
                    Err(e) => {
                        let e = *e;
                        *lease = Some(AnyBatch::Cuda(e.batch));
                        Some(e.error)
                    }
                },
                // A CUDA fence on a cpu batch was refused above.
                (Some(batch), _) => {
                    drop(lease);
                    drop(batch);
                    None
                }
            }
        });
        drop(keep);
        match failed {
            None => Ok(()),
            Some(error) => {
                let context = format!(
                    "release of batch {} (fence: {})",
                    self.facts.seq,
                    fence.form()
                );
                Err(to_py_with(py, error, &context))
            }
        }
    }

    /// Returns the batch itself; leaving the block releases it.
    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Releases the batch (as `release()` with no event).
    #[pyo3(signature = (*_args))]
    fn __exit__(
        &self,
        py: Python<'_>,
        #[gen_stub(override_type(type_repr = "typing.Any", imports = ("typing",)))] _args: &Bound<
            '_,
            PyTuple,
        >,
    ) -> PyResult<bool> {
        self.release(py, None)?;
        Ok(false)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let released = if self.released(py) { " released" } else { "" };
        if !self.facts.fields.is_empty() {
            let step = self
                .facts
                .step
                .map_or_else(String::new, |k| format!(" step={k}"));
            return format!(
                "<pinring.Batch seq={}{step} epoch={} fields=({}) rows={} device={}{released}>",
                self.facts.seq,
                self.facts.epoch,
                self.field_names().join(", "),
                self.facts.ids.len(),
                self.device.name(),
            );
        }
        format!(
            "<pinring.Batch seq={} epoch={} shape=({}, {}) dtype={} device={}{}>",
            self.facts.seq,
            self.facts.epoch,
            self.facts.samples,
            self.row.cols,
            self.row.dtype.name(),
            self.device.name(),
            released
        )
    }
}
