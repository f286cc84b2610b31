//! The `weights` argument of `Mixture(...)` and `Loader.load_state_dict(...)`: a list
//! (tuple, array) of numbers, one per source.

use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::classes::config;
use crate::source::taken_arg::{ShownAs, TakenArg};

/// How the stubs show the `weights` argument ([`WeightsArg`]).
pub(crate) enum Weights {}

impl ShownAs for Weights {
    const TYPE: &'static str = "typing.Sequence[float]";
    const IMPORTS: &'static [&'static str] = &["typing"];
}

/// The `weights` argument as given: any object is taken here ([`WeightsArg::read`] reads
/// and checks it, so its error comes in the caller's own order). Taken as
/// `Option<WeightsArg>`: Python's None is no weights.
pub(crate) type WeightsArg<'py> = TakenArg<'py, Weights>;

impl WeightsArg<'_> {
    /// The weights, or a ConfigError about `weights` (saying there is one `per_source`,
    /// e.g. "one per source of the Mixture") for a str or anything that is not a sequence
    /// of numbers.
    pub(crate) fn read(&self, per_source: &str) -> PyResult<Vec<f64>> {
        let weights = self.object();
        let wrong = || {
            config(
                weights.py(),
                "weights",
                format!(
                    "weights must be a list of numbers, {per_source}, got {}",
                    weights.repr().map(|r| r.to_string()).unwrap_or_default()
                ),
            )
        };
        if weights.is_instance_of::<PyString>() {
            return Err(wrong());
        }
        weights
            .try_iter()
            .and_then(|items| items.map(|i| i.and_then(|i| i.extract::<f64>())).collect())
            .map_err(|_| wrong())
    }
}
