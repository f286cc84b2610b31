//! A source object as the caller gave it — a `TokenWindows`, `FixedRecords` or
//! `Documents` — read into what a loader (or a mixture) needs from it.

use pyo3::prelude::*;

use crate::source::documents::Documents;
use crate::source::dtype::Row;
use crate::source::fixed_records::FixedRecords;
use crate::source::spec::Spec;
use crate::source::token_windows::TokenWindows;

/// A single source: its spec, its row shape and its class's name; None for an object
/// that is none of the three.
pub(crate) fn single(src: &Bound<'_, PyAny>) -> Option<(Spec, Row, &'static str)> {
    if let Ok(t) = src.cast::<TokenWindows>() {
        let (spec, row) = t.get().spec();
        return Some((spec, row, "TokenWindows"));
    }
    if let Ok(r) = src.cast::<FixedRecords>() {
        let (spec, row) = r.get().spec();
        return Some((spec, row, "FixedRecords"));
    }
    if let Ok(d) = src.cast::<Documents>() {
        let (spec, row) = d.get().spec();
        return Some((spec, row, "Documents"));
    }
    None
}
