//! A single source object as the caller gave it — a `TokenWindows`, `FixedRecords` or
//! `Documents` — read into what a loader or a mixture takes from it.

use pyo3::prelude::*;

use crate::source::base::PySource;
use crate::source::given::Given;

/// The single source `src` as a loader takes it; `None` for an object that is none of the
/// three (a `Mixture` is read by the loader itself: it does not nest).
pub(crate) fn single(src: &Bound<'_, PyAny>) -> Option<Given> {
    given(src).filter(|g| g.class != "Mixture")
}

/// What a loader takes from the source `src` of any class (a `Mixture` too).
pub(crate) fn given(src: &Bound<'_, PyAny>) -> Option<Given> {
    let source = src.cast::<PySource>().ok()?;
    Some(source.get().given.clone())
}
