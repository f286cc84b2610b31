//! `Batch.locate()`: each row's place as a `pinring.Location` named tuple (defined in
//! `pinring/_lineage.py`), from the row's id, length and source through the loader's
//! locator (the core's [`Locate`]). Nothing is read: it is arithmetic on the source's layout.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyList, PyType};

use pinring::source::SourceError;
use pinring::{Locate, Row};

use crate::dispatch::RowColumns;
use crate::errors::from_core::to_py;

/// `pinring._lineage.Location`, imported once.
static LOCATION: PyOnceLock<Py<PyType>> = PyOnceLock::new();

/// Each of `rows` placed by `locator`, as a list of `pinring.Location`.
pub(crate) fn locations<'py>(
    py: Python<'py>,
    locator: &dyn Locate,
    rows: &RowColumns,
) -> PyResult<Bound<'py, PyList>> {
    let class = LOCATION.import(py, "pinring._lineage", "Location")?;
    let list = PyList::empty(py);
    for (index, &id) in rows.ids.iter().enumerate() {
        let row = Row {
            id,
            len: rows.lens.get(index).copied().unwrap_or(0),
            source: rows.sources.get(index).copied().unwrap_or(0),
        };
        let Some(at) = locator.locate(&row) else {
            let e = SourceError::Unlocated {
                row: index,
                id,
                source_index: row.source,
            };
            return Err(to_py(py, e.into()));
        };
        let path = at.path.to_string_lossy().into_owned();
        list.append(class.call1((at.source, path, at.offset, at.len))?)?;
    }
    Ok(list)
}
