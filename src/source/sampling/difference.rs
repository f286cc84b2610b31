//! [`FirstDifference`]: the first of a record's fields in which two records (checkpoints,
//! states) differ, in words, for the mismatch errors that name it.

use std::fmt::{Debug, Display};

/// A difference: (what differs, its value in the first record, its value in the second).
pub(crate) type Difference = (String, String, String);

/// Compares two records field by field, in order, keeping the first field that differs.
#[derive(Debug, Default)]
#[must_use]
pub(crate) struct FirstDifference(Option<Difference>);

impl FirstDifference {
    /// No field compared yet.
    pub(crate) fn new() -> Self {
        FirstDifference(None)
    }

    /// Compares the field `what`, values `a` and `b`, written as they display.
    pub(crate) fn shown<T: PartialEq + Display>(self, what: &str, a: T, b: T) -> Self {
        self.then(|| (a != b).then(|| (what.to_owned(), a.to_string(), b.to_string())))
    }

    /// Compares the field `what`, values `a` and `b`, written as `{:?}` writes them.
    pub(crate) fn debug<T: PartialEq + Debug + ?Sized>(self, what: &str, a: &T, b: &T) -> Self {
        self.then(|| (a != b).then(|| (what.to_owned(), format!("{a:?}"), format!("{b:?}"))))
    }

    /// Compares by `compare`, where no earlier field differs.
    pub(crate) fn then(self, compare: impl FnOnce() -> Option<Difference>) -> Self {
        match self.0 {
            Some(_) => self,
            None => FirstDifference(compare()),
        }
    }

    /// The first difference found, if any.
    pub(crate) fn first(self) -> Option<Difference> {
        self.0
    }
}

/// The first difference, by `difference`, of a rank's record from rank 0's (`records`
/// indexed by rank), its `what` naming the rank: "... (rank 2 against rank 0)". `None`
/// when every rank's record is alike to rank 0's (or there is none).
pub(crate) fn against_rank_0<T>(
    records: &[T],
    difference: impl Fn(&T, &T) -> Option<Difference>,
) -> Option<Difference> {
    let first = records.first()?;
    records
        .iter()
        .enumerate()
        .skip(1)
        .find_map(|(rank, record)| {
            let (what, saved, here) = difference(first, record)?;
            Some((format!("{what} (rank {rank} against rank 0)"), saved, here))
        })
}
