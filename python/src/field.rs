//! `pinring.Field`: one named array of a batch (`batch["inputs"]`), exported through
//! DLPack as a 1-D view of its bytes in the batch's slot, under the batch's lease.

use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::PyTuple;

use pinring::FieldAt;

use crate::dlpack::{export, Owner, SlotView};
use crate::lease::BatchCell;
use crate::stub_attrs::{gen_stub_pyclass, gen_stub_pymethods};

/// One field of a batch: `batch["inputs"]`, `batch["targets"]`, `batch["cu_seqlens"]`...
///
/// A DLPack producer: `torch.from_dlpack(batch["inputs"])` (or numpy's, cupy's) gives a
/// zero-copy 1-D view of the field's elements in the batch's slot, of this batch's own
/// length. It shares the batch's lease: `batch.release(...)` gives the slot back for the
/// batch and all of its fields (a view read afterwards may show the next batch's bytes), and
/// without an explicit release the slot comes back once the batch, every field of it and
/// every view made from them are gone. `__dlpack__(stream=...)` works as the batch's: the
/// declared stream waits for the batch's copy stream-side, and is fenced at the release.
#[gen_stub_pyclass(module = "pinring._pinring")]
#[pyclass(module = "pinring", name = "Field", frozen)]
#[derive(Debug)]
pub struct PyField {
    /// The `pinring.Batch` it belongs to (which it keeps alive).
    batch: Py<PyAny>,
    /// The batch's lease, which every export of the field shares.
    cell: Arc<BatchCell>,
    name: String,
    at: FieldAt,
    /// Its elements in the slot.
    view: SlotView,
}

impl PyField {
    /// The field `name` of `batch` (a `pinring.Batch` leasing `cell`), lying at `at` in its
    /// slot, viewed as `view`.
    pub(crate) fn new(
        batch: Py<PyAny>,
        cell: Arc<BatchCell>,
        name: String,
        at: FieldAt,
        view: SlotView,
    ) -> Self {
        PyField {
            batch,
            cell,
            name,
            at,
            view,
        }
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl PyField {
    /// The field's name.
    #[getter]
    fn name(&self) -> &str {
        &self.name
    }

    /// `(len,)`: its elements in this batch (a step's own length, not the slot's).
    #[getter]
    #[gen_stub(override_return_type(type_repr = "tuple[int]"))]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, [self.at.len])
    }

    /// The element type's name: "int32" for inputs, targets, cu_seqlens and positions of a
    /// `Documents` step of dtype="int32"; "uint8", "uint16", "int32", "uint32" or "int64".
    #[getter]
    fn dtype(&self) -> &'static str {
        self.at.dtype.name()
    }

    /// Bytes of the field in this batch: len × itemsize.
    #[getter]
    fn nbytes(&self) -> usize {
        self.at.bytes()
    }

    /// "cpu" or "cuda:N": the batch's device.
    #[getter]
    fn device(&self) -> String {
        self.view.device.name()
    }

    /// The field's address: the batch's slot address plus the field's offset in it (what
    /// `torch.from_dlpack(field).data_ptr()` returns).
    #[getter]
    fn ptr(&self) -> u64 {
        self.view.ptr
    }

    /// The batch this field belongs to.
    #[getter]
    #[gen_stub(override_return_type(type_repr = "Batch"))]
    fn batch(&self, py: Python<'_>) -> Py<PyAny> {
        self.batch.clone_ref(py)
    }

    /// Elements in this batch (as `shape[0]`).
    fn __len__(&self) -> usize {
        self.at.len
    }

    /// `(device_type, device_id)` per DLPack: `(1, 0)` for cpu, `(2, N)` for cuda:N.
    fn __dlpack_device__(&self) -> (u32, i32) {
        self.view.device.dlpack()
    }

    /// A DLPack capsule viewing the field's elements (zero copy), 1-D.
    ///
    /// Args:
    ///     stream: as `Batch.__dlpack__`: (cuda) `-1` no synchronization; `None` or `1` the
    ///         legacy default stream; `2` the per-thread default stream; any other int a
    ///         `cudaStream_t`. The stream waits for the batch's copy stream-side, and the
    ///         batch is bound to it: its release fences the slot on it. On cpu only None
    ///         or -1 (the call waits for the copy, host-side).
    ///     max_version: a versioned (1.x) capsule when it allows one, else a legacy one.
    ///     dl_device: must be the batch's own device, or None.
    ///     copy: `True` raises BufferError: pinring exports zero-copy only.
    ///
    /// Raises:
    ///     BufferError: the batch was released, or a copy or another device was asked for.
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
        export(
            py,
            Owner::Lease(&self.cell),
            self.view,
            stream,
            max_version,
            dl_device,
            copy,
        )
    }

    fn __repr__(&self) -> String {
        format!(
            "<pinring.Field {:?} of batch {} shape=({},) dtype={} device={}>",
            self.name,
            self.view.seq,
            self.at.len,
            self.at.dtype.name(),
            self.view.device.name()
        )
    }
}
