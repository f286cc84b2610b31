//! `Batch.host`: a kept field's host bytes as a numpy array, and its producer, which
//! exports them through DLPack on the cpu.

use std::sync::Arc;

use pyo3::prelude::*;

use pyo3::exceptions::{PyImportError, PyKeyError};
use pyo3::types::IntoPyDict;

use crate::batch::PyBatch;
use crate::device::Device;
use crate::dlpack::{export, released_error, Owner, Shape, SlotView};
use crate::fixed_views::FixedSlot;
use crate::lease::BatchCell;
use crate::stub_attrs::gen_stub_pymethods;

/// A kept field's host bytes as a DLPack producer on the cpu (what `Batch.host` hands
/// `numpy.from_dlpack`): its capsule shares the batch's lease, as a field's does.
#[pyclass(module = "pinring", frozen)]
pub(crate) struct HostField {
    pub(crate) cell: Arc<BatchCell>,
    pub(crate) view: SlotView,
}

#[pymethods]
impl HostField {
    fn __dlpack_device__(&self) -> (u32, i32) {
        Device::Cpu.dlpack()
    }

    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        &self,
        py: Python<'py>,
        stream: Option<Bound<'py, PyAny>>,
        max_version: Option<(u32, u32)>,
        dl_device: Option<(u32, i32)>,
        copy: Option<bool>,
    ) -> PyResult<Py<PyAny>> {
        export(
            py,
            Owner::Host(&self.cell),
            self.view,
            stream,
            max_version,
            dl_device,
            copy,
        )
    }
}

#[gen_stub_pymethods]
#[pymethods]
impl PyBatch {
    /// A numpy view (read-only, no copy) of field `name`'s host bytes, readable from pop
    /// until release: the bytes the device slot holds, kept on the host for this batch
    /// (modded-nanogpt's `bigram_cpu`). After the release the view may show another
    /// batch's bytes.
    ///
    /// A host slot is reused as soon as its copy completes, before the release, so the
    /// loader keeps a batch of fields' host bytes apart: the copy thread copies the slot's
    /// arrays, as it starts the batch's copy, into a buffer of the batch's device slot.
    /// Cost: device_slots × the slot's bytes of host memory and one memcpy of them a batch
    /// on the copy thread (769 KiB at modded-nanogpt's stage 3: 49,152 tokens a rank with
    /// int64 targets and bigram_inputs), none on the training thread.
    ///
    /// With `Loader(fixed_views=...)` the array is made once per device slot and field,
    /// like `batch.view()`'s views, and returned again each time the slot comes round (a
    /// shorter field: narrowed to this batch's length); it holds no lease.
    ///
    /// Raises:
    ///     KeyError: no such field (a batch without fields has none).
    ///     BufferError: the batch was released.
    fn host<'py>(slf: Bound<'py, Self>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let py = slf.py();
        let batch = slf.get();
        let Some((i, field, at)) = batch.field(name) else {
            return Err(batch.no_such_field(name));
        };
        let found = {
            let lease = batch.cell.lock_attached(py);
            match lease.as_ref() {
                None => return Err(released_error(batch.facts.seq)),
                Some(leased) => leased.batch.host_field(name),
            }
        };
        let Some((ptr, len)) = found else {
            return Err(PyKeyError::new_err(format!(
                "the loader keeps no host bytes of {name:?} (a pinring bug: every field's are \
                 kept)"
            )));
        };
        let flat = |len: usize| SlotView {
            seq: batch.facts.seq,
            ptr: ptr as u64,
            shape: Shape::Flat { len },
            dtype: at.dtype,
            device: Device::Cpu,
        };
        if let Some(views) = &batch.views {
            // The slot's kept bytes of the field lie at one place for every batch the slot
            // holds (`ptr`): one array as long as the field can be.
            let made = views.host(i, || {
                let whole = FixedSlot {
                    holder: batch.cell.pipeline().clone(),
                    view: flat(field.max_len),
                };
                Ok(read_only_numpy(py, Bound::new(py, whole)?.into_any())?.unbind())
            })?;
            if let Some(array) = made {
                let array = PyBatch::narrowed(py, array, len / at.dtype.size(), field.max_len)?;
                return Ok(array.into_bound(py));
            }
        }
        let producer = HostField {
            cell: batch.cell.clone(),
            view: flat(len / at.dtype.size()),
        };
        read_only_numpy(py, Bound::new(py, producer)?.into_any())
    }
}

/// `numpy.from_dlpack(producer)`, made read-only.
fn read_only_numpy<'py>(
    py: Python<'py>,
    producer: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyAny>> {
    let numpy = py.import("numpy").map_err(|e| {
        PyImportError::new_err(format!(
            "batch.host() is a numpy array: install numpy ({e})"
        ))
    })?;
    let array = numpy.call_method1("from_dlpack", (producer,))?;
    let kwargs = [("write", false)].into_py_dict(py)?;
    array.call_method("setflags", (), Some(&kwargs))?;
    Ok(array)
}
