//! The mixture problem a build was refused with, for the bad-input tests of mixtures of
//! windows and of documents.

use std::fmt::Debug;

use pinring::source::MixtureProblem;
use pinring::{ConfigError, Error};

/// The mixture problem `built` was refused with, its text and its field; panics on
/// anything else.
pub fn mixture_problem<T: Debug>(
    built: Result<T, Error>,
) -> (MixtureProblem, String, &'static str) {
    match built {
        Err(Error::Config(e @ ConfigError::Mixture(_))) => {
            let field = e.field();
            let text = e.to_string();
            let ConfigError::Mixture(p) = e else {
                unreachable!()
            };
            (p, text, field)
        }
        other => panic!("expected a mixture problem, got {other:?}"),
    }
}
