//! Fixed views, the CUDA-graph mode (`Loader(fixed_views=torch.from_dlpack)`): one view per
//! device slot (and per field of a batch of fields), made once by the caller's DLPack
//! consumer when a batch first lands in the slot, and handed out by `batch.view()` every
//! time the slot comes round: the same object, at the slot's fixed address. A graph
//! captured over a slot's views replays on every batch that slot holds.
//!
//! `batch.host(name)` is cached the same way in this mode: the slot's kept host bytes of
//! a field as one read-only numpy array, made on first use.
//!
//! A view holds no lease: it keeps the slot's memory alive (the pipeline's holder), and
//! what it shows is the batch the slot holds now. The lease and fence rules are the
//! batch's: read a view between the `pop` that leased its slot and that batch's release,
//! on the declared stream, which every `pop` makes wait for its batch.

use std::sync::{Arc, Mutex, OnceLock};

use pinring::Fields;
use pyo3::prelude::*;
use pyo3::sync::MutexExt;

use crate::device::Device;
use crate::dlpack::{export, Owner, Shape, SlotView};
use crate::holder::PipelineHolder;
use crate::source::dtype::Row;

/// What every batch of one loader shares: how its rows look, where they live, and its
/// field layout.
#[derive(Debug, Clone)]
pub(crate) struct BatchShape {
    /// One sample's shape and type.
    pub(crate) row: Row,
    /// Samples in a full batch.
    pub(crate) batch_size: usize,
    /// The loader's device.
    pub(crate) device: Device,
    /// The field layout, for batches of fields.
    pub(crate) layout: Option<Arc<Fields>>,
}

impl BatchShape {
    /// The fixed views of the slot at `ptr`: the whole slot as `(batch_size, cols)` for
    /// batches without fields, else each field as long as it can be, in layout order.
    pub(crate) fn fixed_views(&self, ptr: u64) -> (Option<SlotView>, Vec<SlotView>) {
        let Some(layout) = &self.layout else {
            let whole = SlotView {
                seq: 0,
                ptr,
                shape: Shape::Rows {
                    samples: self.batch_size,
                    cols: self.row.cols,
                },
                dtype: self.row.dtype,
                device: self.device,
            };
            return (Some(whole), Vec::new());
        };
        let fields = layout
            .iter()
            .map(|f| SlotView {
                seq: 0,
                ptr: ptr + f.offset as u64,
                shape: Shape::Flat { len: f.max_len },
                dtype: f.dtype,
                device: self.device,
            })
            .collect();
        (None, fields)
    }
}

/// The views of one device slot.
#[derive(Debug)]
pub(crate) struct SlotViews {
    /// The whole slot as `(batch_size, cols)`: for batches without fields.
    pub(crate) whole: Option<Py<PyAny>>,
    /// Each field's view, as long as the field can be, in layout order: for batches of
    /// fields.
    pub(crate) fields: Box<[Py<PyAny>]>,
    /// Each field's kept host bytes as a read-only numpy array (`batch.host`), as long as
    /// the field can be, made the first time they are asked for.
    host: Box<[OnceLock<Py<PyAny>>]>,
}

impl SlotViews {
    /// Field `i`'s host array: the one made already, else `make`'s (kept; should another
    /// thread have made one meanwhile, theirs stays: one object per slot and field).
    pub(crate) fn host(
        &self,
        i: usize,
        make: impl FnOnce() -> PyResult<Py<PyAny>>,
    ) -> PyResult<Option<&Py<PyAny>>> {
        let Some(cell) = self.host.get(i) else {
            return Ok(None);
        };
        if cell.get().is_none() {
            let _ = cell.set(make()?);
        }
        Ok(cell.get())
    }
}

/// The loader's fixed views: the consumer that makes them and each slot's, once made.
#[derive(Debug)]
pub(crate) struct FixedViews {
    /// The DLPack consumer (`torch.from_dlpack`, `cupy.from_dlpack`, `numpy.from_dlpack`).
    consumer: Py<PyAny>,
    /// Each device slot's views, once made; emptied by the loader's `close()`, so that the
    /// pipeline's memory can go with the last batch.
    slots: Mutex<Box<[Option<Arc<SlotViews>>]>>,
}

impl FixedViews {
    /// No view yet, for `device_slots` slots, made by `consumer` when asked.
    pub(crate) fn new(consumer: Py<PyAny>, device_slots: usize) -> Self {
        FixedViews {
            consumer,
            slots: Mutex::new((0..device_slots).map(|_| None).collect()),
        }
    }

    /// Slot `slot`'s views: those made already, else made now (the consumer is called
    /// once for the whole slot, `whole`, or once per field, `fields`, each exported
    /// keeping `holder`'s pipeline alive) and kept.
    pub(crate) fn of_slot(
        &self,
        py: Python<'_>,
        slot: usize,
        holder: &Arc<PipelineHolder>,
        make: impl FnOnce() -> (Option<SlotView>, Vec<SlotView>),
    ) -> PyResult<Arc<SlotViews>> {
        if let Some(Some(views)) = self.lock(py).get(slot) {
            return Ok(views.clone());
        }
        // Made without the lock: the consumer is Python code.
        let (whole, fields) = make();
        let view = |v: SlotView| -> PyResult<Py<PyAny>> {
            let export = Py::new(
                py,
                FixedSlot {
                    holder: holder.clone(),
                    view: v,
                },
            )?;
            Ok(self.consumer.bind(py).call1((export,))?.unbind())
        };
        let fields: Box<[Py<PyAny>]> = fields.into_iter().map(view).collect::<PyResult<_>>()?;
        let made = Arc::new(SlotViews {
            whole: whole.map(view).transpose()?,
            host: fields.iter().map(|_| OnceLock::new()).collect(),
            fields,
        });
        let mut slots = self.lock(py);
        Ok(match slots.get_mut(slot) {
            // Another thread made them first: theirs stay (one object per slot).
            Some(entry) => entry.get_or_insert(made).clone(),
            None => made,
        })
    }

    /// Drops every view made (with the GIL held): the loader is closing.
    pub(crate) fn clear(&self, py: Python<'_>) {
        let views: Vec<_> = self.lock(py).iter_mut().map(Option::take).collect();
        drop(views);
    }

    fn lock(&self, py: Python<'_>) -> std::sync::MutexGuard<'_, Box<[Option<Arc<SlotViews>>]>> {
        self.slots
            .lock_py_attached(py)
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// What the fixed-view consumer is given: a DLPack producer of a whole slot (or of a
/// field in it, as long as it can be), holding no lease.
#[pyclass(module = "pinring", name = "FixedSlot", frozen)]
#[derive(Debug)]
pub(crate) struct FixedSlot {
    /// Keeps the slot's memory alive (through every capsule made).
    pub(crate) holder: Arc<PipelineHolder>,
    /// The slot, or a field in it (or a field's kept host bytes: `batch.host`).
    pub(crate) view: SlotView,
}

#[pymethods]
impl FixedSlot {
    /// `(device_type, device_id)` per DLPack.
    fn __dlpack_device__(&self) -> (u32, i32) {
        self.view.device.dlpack()
    }

    /// A capsule viewing the slot (zero copy); no wait, whatever `stream` says.
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
            Owner::Slot(&self.holder),
            self.view,
            stream,
            max_version,
            dl_device,
            copy,
        )
    }
}
