//! [`Stop`]: when a mixture ends.

use serde::{Deserialize, Serialize};

/// When a [`Mixture`](crate::source::Mixture) ends. Whatever the rule, the end falls on a
/// whole step of every rank: the step that the end would cut short is left out too, so
/// that every rank gets the same number of full batches.
///
/// Epochs here are each source's own (its walk of its order, sample count over its epoch
/// length): a source's first epoch is the one it is in when its count is below its epoch
/// length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stop {
    /// Never: each source cycles its own epochs, a fresh order each (the default).
    #[default]
    Never,
    /// Before the first sample that would start any source's second epoch (the first
    /// source to run out ends the mixture).
    First,
    /// Once every source with a positive weight has finished its first epoch: sources that
    /// finish earlier go on into their next epochs meanwhile. (A source of weight 0 is
    /// never drawn, so it does not hold the end back.)
    All,
}

impl Stop {
    /// Its name: `"never"`, `"first"` or `"all"` (as a state records it).
    ///
    /// ```
    /// use pinring::source::Stop;
    /// assert_eq!(Stop::from_name(Stop::All.name()), Some(Stop::All));
    /// assert_eq!(Stop::from_name("sometimes"), None);
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Stop::Never => "never",
            Stop::First => "first",
            Stop::All => "all",
        }
    }

    /// The rule of this [`name`](Self::name); `None` for another name.
    pub fn from_name(name: &str) -> Option<Stop> {
        match name {
            "never" => Some(Stop::Never),
            "first" => Some(Stop::First),
            "all" => Some(Stop::All),
            _ => None,
        }
    }
}
