//! A single source object as the caller gave it — a `TokenWindows`, `FixedRecords` or
//! `Documents` — read into what a loader or a mixture takes from it.

use pyo3::prelude::*;

use crate::source::documents::Documents;
use crate::source::fixed_records::FixedRecords;
use crate::source::given::Given;
use crate::source::token_windows::TokenWindows;

/// The single source `src` as a loader takes it; `None` for an object that is none of the
/// three (a `Mixture` is read by the loader itself: it does not nest).
pub(crate) fn single(src: &Bound<'_, PyAny>) -> Option<Given> {
    if let Ok(t) = src.cast::<TokenWindows>() {
        return Some(t.get().given.clone());
    }
    if let Ok(r) = src.cast::<FixedRecords>() {
        return Some(r.get().given.clone());
    }
    if let Ok(d) = src.cast::<Documents>() {
        return Some(d.get().given.clone());
    }
    None
}
