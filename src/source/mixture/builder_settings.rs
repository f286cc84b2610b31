//! [`BuilderSettings`]: the settings both mixture builders hold — the weights, the seed,
//! the stop rule and the run's ranks and steps — as given, and their one check
//! ([`BuilderSettings::check`]), which checks the sources to mix as well.

use super::blend::normalized;
use super::settings::MixSettings;
use super::stop::Stop;
use crate::error::source::{MixtureProblem, SourceError};
use crate::error::{ConfigError, Result};
use crate::source::run::{CheckedRun, Run};

/// The settings of a mixture as its builder
/// ([`MixtureBuilder`](crate::source::MixtureBuilder),
/// [`DocumentMixtureBuilder`](crate::source::DocumentMixtureBuilder)) was given them.
#[derive(Debug, Clone)]
pub(crate) struct BuilderSettings {
    /// Each source's weight (`None`: equal).
    pub(crate) weights: Option<Vec<f64>>,
    pub(crate) seed: u64,
    pub(crate) stop: Stop,
    pub(crate) run: Run,
}

/// How a source's samples differ from source 0's: what differs, source 0's value and the
/// source's (a [`MixtureProblem::Shape`]).
pub(crate) type ShapeDifference = (&'static str, u64, u64);

/// What makes a source unfit to mix, as a builder's kind of source tells it.
pub(crate) struct SourceRules<T> {
    /// The first setting a source gives that belongs to the mixture, if any.
    pub(crate) own_setting: fn(&T) -> Option<&'static str>,
    /// Where a source's samples differ from source 0's (`first`, then the source).
    pub(crate) shape: fn(first: &T, source: &T) -> Option<ShapeDifference>,
    /// Checks the run ([`Run::check`], or [`Run::check_own_steps`] for a kind whose every
    /// item is a step).
    pub(crate) run: fn(&Run) -> Result<CheckedRun, SourceError>,
}

impl Default for BuilderSettings {
    /// Equal weights, seed 0, [`Stop::Never`], rank 0 of 1 and no steps set.
    fn default() -> Self {
        BuilderSettings {
            weights: None,
            seed: 0,
            stop: Stop::Never,
            run: Run::default(),
        }
    }
}

impl BuilderSettings {
    /// The settings a built mixture was checked from, so that checking them again gives
    /// the same.
    pub(crate) fn of(settings: &MixSettings) -> Self {
        BuilderSettings {
            weights: Some(settings.weights.clone()),
            seed: settings.seed,
            stop: settings.stop,
            run: settings.run.run(),
        }
    }

    /// Checks `sources` by `rules` and these settings for them, in this order: no source
    /// or more than 65536 ([`MixtureProblem::NoSources`],
    /// [`MixtureProblem::TooManySources`]), a source setting what belongs to the mixture
    /// ([`MixtureProblem::SourceSetting`]), a source unlike source 0
    /// ([`MixtureProblem::Shape`]), weights that cannot be normalized (all these
    /// [`ConfigError::Mixture`]), then the run's settings as `rules.run` checks them. The
    /// mixture's settings.
    pub(crate) fn check<T>(self, sources: &[T], rules: SourceRules<T>) -> Result<MixSettings> {
        let problem = |p: MixtureProblem| crate::Error::Config(ConfigError::Mixture(p));
        let n = sources.len();
        if n == 0 {
            return Err(problem(MixtureProblem::NoSources));
        }
        if n > usize::from(u16::MAX) + 1 {
            return Err(problem(MixtureProblem::TooManySources(n)));
        }
        for (index, source) in sources.iter().enumerate() {
            if let Some(setting) = (rules.own_setting)(source) {
                return Err(problem(MixtureProblem::SourceSetting { index, setting }));
            }
        }
        let first = &sources[0];
        for (index, source) in sources.iter().enumerate().skip(1) {
            if let Some((what, first, here)) = (rules.shape)(first, source) {
                return Err(problem(MixtureProblem::Shape {
                    index,
                    what,
                    first,
                    here,
                }));
            }
        }
        let weights = self.weights.unwrap_or_else(|| vec![1.0; n]);
        let norm = normalized(&weights, Some(n)).map_err(problem)?;
        Ok(MixSettings {
            weights,
            norm,
            seed: self.seed,
            stop: self.stop,
            run: (rules.run)(&self.run)?,
        })
    }
}
