//! `pinring.Batch`: a leased device slot, exported through DLPack and released with a
//! fence.

use std::sync::{Arc, OnceLock};

use pinring::{FieldAt, Fields, Locate};
use pyo3::exceptions::{PyBufferError, PyImportError, PyKeyError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PySlice, PyTuple};

use crate::device::Device;
use crate::dispatch::{AnyBatch, BatchFacts, RowColumns};
use crate::dlpack::{export, released_error, Owner, Shape, SlotView};
use crate::errors::classes::config;
use crate::field::PyField;
use crate::fixed_views::{BatchShape, SlotViews};
use crate::holder::PipelineHolder;
use crate::lease::{BatchCell, StreamsBound};
use crate::lineage::locations;
use crate::source::dtype::Row;
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};

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
/// `torch.from_dlpack(batch["inputs"])`; `batch.fields` names them. With
/// `Loader(fixed_views=...)`, `batch.view()` returns its slot's view, made once. Release
/// it with `release(event=...)` (or `release()` with the Loader's `stream=`) once the work
/// reading it is enqueued, leave a `with batch:` block, or drop every reference to it, to
/// its fields and to the views made from them. A view read after the release may show the
/// next batch's bytes (with `Loader(poison_released=True)`, a debug mode, it shows
/// out-of-range values instead).
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", name = "Batch", frozen)]
#[derive(Debug)]
pub struct PyBatch {
    pub(crate) cell: Arc<BatchCell>,
    pub(crate) facts: BatchFacts,
    /// The rows (ids, lengths, sources), copied from the lease the first time they are
    /// asked for.
    pub(crate) rows: OnceLock<RowColumns>,
    /// The loader's field layout, for a batch of fields.
    layout: Option<Arc<Fields>>,
    /// Its slot's fixed views (`Loader(fixed_views=...)`).
    pub(crate) views: Option<Arc<SlotViews>>,
    row: Row,
    /// Samples in a full batch (the loader's batch_size): a fixed view's rows.
    batch_size: usize,
    pub(crate) device: Device,
    /// What places the rows in their files (the pipeline's source).
    locator: Arc<dyn Locate>,
}

impl PyBatch {
    /// Wraps a freshly popped batch (bound to the streams `streams` counts) of the
    /// pipeline `pipeline` holds; `views` are its slot's fixed views, if the loader has
    /// them.
    pub(crate) fn new(
        batch: AnyBatch,
        streams: StreamsBound,
        shape: &BatchShape,
        pipeline: Arc<PipelineHolder>,
        views: Option<Arc<SlotViews>>,
    ) -> Self {
        let locator = pipeline.locator().clone();
        PyBatch {
            facts: batch.facts(),
            cell: Arc::new(BatchCell::new(batch, streams, pipeline)),
            rows: OnceLock::new(),
            locator,
            layout: shape.layout.clone(),
            views,
            row: shape.row,
            batch_size: shape.batch_size,
            device: shape.device,
        }
    }

    /// The batch's rows: copied from the lease the first time, or by `release()` if not
    /// before (so they are there after it). BufferError only if the lease went without a
    /// copy, which `release()` and this never let happen while the Batch object lives.
    pub(crate) fn rows(&self, py: Python<'_>, what: &str) -> PyResult<&RowColumns> {
        if let Some(rows) = self.rows.get() {
            return Ok(rows);
        }
        let lease = self.cell.lock_attached(py);
        // A release in another thread may have copied them meanwhile (under this lock).
        if let Some(rows) = self.rows.get() {
            return Ok(rows);
        }
        let copied = match lease.as_ref() {
            Some(leased) => leased.batch.rows(),
            None => {
                return Err(PyBufferError::new_err(format!(
                    "batch {}'s lease ended without a copy of its {what} (a pinring bug: \
                     release() copies them)",
                    self.facts.seq
                )))
            }
        };
        drop(lease);
        Ok(self.rows.get_or_init(|| copied))
    }

    /// Whether the batch is still leased; on cpu, also waits (host-side, without the GIL)
    /// for its copy, as a cpu export does.
    fn ready_for_view(&self, py: Python<'_>) -> bool {
        if self.device != Device::Cpu {
            return self.cell.lock_attached(py).is_some();
        }
        let cell = &self.cell;
        py.detach(|| match cell.lock().as_ref().map(|l| &l.batch) {
            Some(AnyBatch::Cpu(b)) => {
                let _ = b.bytes();
                true
            }
            _ => false,
        })
    }

    /// `view`, narrowed to its first `len` elements (rows) when it has more.
    pub(crate) fn narrowed(
        py: Python<'_>,
        view: &Py<PyAny>,
        len: usize,
        room: usize,
    ) -> PyResult<Py<PyAny>> {
        if len >= room {
            return Ok(view.clone_ref(py));
        }
        let len = isize::try_from(len).unwrap_or(isize::MAX);
        Ok(view
            .bind(py)
            .get_item(PySlice::new(py, 0, len, 1))?
            .unbind())
    }

    fn whole_view(&self) -> SlotView {
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

    /// The field `name` of this batch: its place in the layout and where it lies in the
    /// slot, with its length in this batch.
    pub(crate) fn field(&self, name: &str) -> Option<(usize, &pinring::Field, FieldAt)> {
        let (i, field) = self
            .layout
            .as_ref()?
            .iter()
            .enumerate()
            .find(|(_, f)| f.name == name)?;
        let at = FieldAt {
            dtype: field.dtype,
            offset: field.offset,
            len: field.len(&self.facts.dims),
        };
        Some((i, field, at))
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

    /// Whether the batch has fields.
    fn has_fields(&self) -> bool {
        self.layout.as_ref().is_some_and(|l| !l.is_empty())
    }

    /// The names of the batch's fields, in layout order.
    fn field_names(&self) -> Vec<&str> {
        self.layout
            .iter()
            .flat_map(|l| l.iter())
            .map(|f| f.name.as_str())
            .collect()
    }

    /// The error for a name that is no field of this batch.
    pub(crate) fn no_such_field(&self, name: &str) -> PyErr {
        if !self.has_fields() {
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
    pub(crate) fn epoch(&self) -> u64 {
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
    ///
    /// Readable before and after `release()`: they come from the leased slot's bookkeeping,
    /// copied the first time they are asked for, or by `release()` if not before (as for
    /// `locate()`), so a loss-spike trace can read them after the step.
    fn sample_ids<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        u64_array(py, &self.rows(py, "sample_ids")?.ids, "Batch.sample_ids")
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
        let Some((_, field, at)) = batch.field(name) else {
            return Err(batch.no_such_field(name));
        };
        Ok(PyField::new(
            slf.clone().into_any().unbind(),
            batch.cell.clone(),
            field.name.clone(),
            at,
            batch.field_view(&at),
        ))
    }

    /// Whether `name` is one of the batch's fields.
    fn __contains__(&self, name: &str) -> bool {
        self.field(name).is_some()
    }

    /// The batch's view in its slot's fixed view (`Loader(fixed_views=...)`, the
    /// CUDA-graph mode): the object the loader's `fixed_views` consumer made for this
    /// device slot (`batch.slot`) the first time a batch landed there, returned as it is
    /// (no call into the consumer, no DLPack export): the same object, at the same address,
    /// every time the slot comes round, so a CUDA graph captured over it replays on every
    /// batch of the slot.
    ///
    /// A short batch (an epoch's last, fewer than batch_size rows; a field shorter than
    /// the longest it can be) is not the whole view: it returns `view[:n]`, a new object
    /// that narrows the cached view to the batch's rows (the same address; for torch a
    /// view sharing its storage). Index a full-size graph input with it as you would
    /// pad (or skip the short batch, or use `drop_last=True`).
    ///
    /// The view holds no lease: read it only between this batch's pop and its release,
    /// on the loader's `stream=` (which every pop makes wait for the batch's copy;
    /// cpu: this call waits for the copy). A view read after `release()` is a bug of the
    /// caller: it shows the slot's next batch (with `poison_released=True`, the poison
    /// pattern).
    ///
    /// Args:
    ///     field: a batch of fields (a `Documents` step): the name of one of
    ///         `batch.fields`, whose view is as long as the field can be in a batch
    ///         (narrowed to this batch's length); None for a batch without fields (its
    ///         view is `(batch_size, cols)`).
    ///
    /// Raises:
    ///     ConfigError: the Loader was made without fixed_views (`e.argument` is
    ///         "fixed_views").
    ///     BufferError: the batch was released.
    ///     KeyError: no such field, or a batch of fields viewed without naming one.
    #[pyo3(signature = (field = None))]
    #[gen_stub(override_return_type(type_repr = "typing.Any", imports = ("typing",)))]
    fn view(&self, py: Python<'_>, field: Option<&str>) -> PyResult<Py<PyAny>> {
        let Some(views) = &self.views else {
            return Err(config(
                py,
                "fixed_views",
                "batch.view() returns the loader's fixed views: make the Loader with \
                 fixed_views=torch.from_dlpack (or another DLPack consumer); without them, \
                 view a batch with torch.from_dlpack(batch)",
            ));
        };
        if !self.ready_for_view(py) {
            return Err(released_error(self.facts.seq));
        }
        match (field, &views.whole) {
            (None, Some(whole)) => Self::narrowed(py, whole, self.facts.samples, self.batch_size),
            (None, None) => Err(PyKeyError::new_err(format!(
                "batch {} holds several fields ({}): view one of them, e.g. \
                 batch.view(\"{}\")",
                self.facts.seq,
                self.field_names().join(", "),
                self.field_names().first().copied().unwrap_or("")
            ))),
            (Some(name), _) => {
                let Some((i, field, at)) = self.field(name) else {
                    return Err(self.no_such_field(name));
                };
                let view = views
                    .fields
                    .get(i)
                    .ok_or_else(|| self.no_such_field(name))?;
                Self::narrowed(py, view, at.len, field.max_len)
            }
        }
    }

    /// The longest row of the batch, as a host int: for a `Documents` step, the longest
    /// document piece (the largest difference of `cu_seqlens`), what varlen attention
    /// kernels take as `max_seqlen`. None when the batch's rows have no lengths (windows,
    /// records).
    #[getter]
    fn max_seqlen(&self) -> Option<u32> {
        self.facts.max_row_len
    }

    /// Each document's id, one per document piece of the step in `cu_seqlens` order, as a
    /// read-only numpy uint64 array (needs numpy): the global offset of the document's BOS
    /// token over the shards in order, the same whatever the order, seed, rank or world
    /// size. None for a batch without fields (windows, records: see `sample_ids`).
    #[getter]
    #[gen_stub(override_return_type(type_repr = "numpy.typing.NDArray[numpy.uint64] | None", imports = ("numpy", "numpy.typing")))]
    ///
    /// Readable after `release()` too, as `sample_ids`.
    fn doc_ids<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        if !self.has_fields() {
            return Ok(None);
        }
        u64_array(py, &self.rows(py, "doc_ids")?.ids, "Batch.doc_ids").map(Some)
    }

    /// Each row's source, in row order, as a read-only numpy uint16 array (needs numpy):
    /// its index in the Mixture's `sources` (each document's, for Documents); all 0 for a
    /// single source. With `sample_ids` (each row's id within its source) it names every
    /// row. Readable after `release()` too, as `sample_ids`.
    #[getter]
    #[gen_stub(override_return_type(type_repr = "numpy.typing.NDArray[numpy.uint16]", imports = ("numpy", "numpy.typing")))]
    fn sources<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let bytes: Vec<u8> = (self.rows(py, "sources")?.sources.iter())
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
    /// on the source's layout: nothing is read. The rows are copied from the leased slot
    /// the first time any of `sample_ids`, `doc_ids`, `sources` or `locate()` is called, or
    /// at `release()`: it works after `release()`.
    ///
    /// Raises:
    ///     SourceError: a row the source cannot place (not expected: the locator is the
    ///         loader's own source).
    #[gen_stub(override_return_type(type_repr = "list[_lineage.Location]", imports = ("pinring._lineage",)))]
    fn locate<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        locations(py, &*self.locator, self.rows(py, "rows")?)
    }

    /// The step of the run this batch is (from 0), where the source numbers steps (a
    /// `Documents` step); None otherwise.
    #[getter]
    fn step(&self) -> Option<u64> {
        self.facts.step
    }

    /// The pop within its optimizer step, `0..grad_accum_steps`, for a `Documents` step
    /// (0 without gradient accumulation); None where the source numbers no steps.
    #[getter]
    fn micro_step(&self) -> Option<u64> {
        self.facts.step.map(|_| self.facts.dims[3])
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

    /// The device slot the batch occupies (0 to device_slots - 1): with fixed views, which
    /// slot's view `view()` returns (a CUDA graph per slot: `graphs[batch.slot].replay()`).
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
        if self.has_fields() {
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
            Owner::Lease(&self.cell),
            self.whole_view(),
            stream,
            max_version,
            dl_device,
            copy,
        )
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
        if self.has_fields() {
            let step = self
                .facts
                .step
                .map_or_else(String::new, |k| format!(" step={k}"));
            return format!(
                "<pinring.Batch seq={}{step} epoch={} fields=({}) rows={} device={}{released}>",
                self.facts.seq,
                self.facts.epoch,
                self.field_names().join(", "),
                self.facts.rows,
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
