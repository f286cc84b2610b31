//! What can be wrong with a [`Mixture`](crate::source::Mixture)'s settings:
//! [`MixtureProblem`], reached through [`ConfigError::Mixture`](crate::ConfigError::Mixture).

/// What is wrong with a [`Mixture`](crate::source::Mixture)'s settings, reached through
/// [`ConfigError::Mixture`](crate::ConfigError::Mixture).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum MixtureProblem {
    /// No source was given.
    #[error("a mixture needs at least one source")]
    NoSources,
    /// More sources than a row can name (a row's source is a `u16`).
    #[error("a mixture takes at most 65536 sources, not {0}")]
    TooManySources(usize),
    /// The weights are not one per source.
    #[error("{weights} weight(s) for {sources} source(s): give one weight per source")]
    WeightCount {
        /// Weights given.
        weights: usize,
        /// Sources given.
        sources: usize,
    },
    /// A weight is negative, NaN or infinite.
    #[error("weight {index} is {weight}: weights must be finite and at least 0")]
    BadWeight {
        /// The source whose weight it is (its index).
        index: usize,
        /// The weight given.
        weight: f64,
    },
    /// Every weight is 0.
    #[error("every weight is 0: at least one source needs a positive weight")]
    AllZero,
    /// A source sets what belongs to the mixture: its own rank and world size, batch size,
    /// start step or skipped steps.
    #[error(
        "source {index} sets its own {setting}: inside a mixture, {setting} belongs to the \
         mixture (build the source without it and set it on the Mixture)"
    )]
    SourceSetting {
        /// The source (its index).
        index: usize,
        /// The setting: `"rank/world_size"`, `"batch_size"`, `"start_step"`, `"skip_steps"`.
        setting: &'static str,
    },
    /// A source's samples have another shape than source 0's: another window length or
    /// record size.
    #[error(
        "source {index}'s samples differ from source 0's: its {what} is {here}, source 0's \
         is {first}; a mixture's sources give samples of one shape"
    )]
    Shape {
        /// The source (its index).
        index: usize,
        /// What differs: `"window"` (units per sample), `"record size"`.
        what: &'static str,
        /// Source 0's.
        first: u64,
        /// This source's.
        here: u64,
    },
    /// A source is of another kind than source 0 (token windows, records, documents).
    #[error(
        "source {index} gives {here}, source 0 gives {first}: a mixture's sources are of \
         one kind"
    )]
    Kinds {
        /// The source (its index).
        index: usize,
        /// Source 0's kind.
        first: String,
        /// This source's kind.
        here: String,
    },
}

impl MixtureProblem {
    /// The setting the problem is about: `"sources"` or `"weights"`.
    pub fn field(&self) -> &'static str {
        match self {
            MixtureProblem::WeightCount { .. }
            | MixtureProblem::BadWeight { .. }
            | MixtureProblem::AllZero => "weights",
            _ => "sources",
        }
    }
}

impl PartialEq for MixtureProblem {
    /// Equal when the same problem with the same values (weights compared bit for bit, so
    /// a NaN weight equals itself).
    fn eq(&self, other: &Self) -> bool {
        use MixtureProblem as P;
        match (self, other) {
            (P::NoSources, P::NoSources) | (P::AllZero, P::AllZero) => true,
            (P::TooManySources(a), P::TooManySources(b)) => a == b,
            (
                P::WeightCount { weights, sources },
                P::WeightCount {
                    weights: w,
                    sources: s,
                },
            ) => (weights, sources) == (w, s),
            (
                P::BadWeight { index, weight },
                P::BadWeight {
                    index: s,
                    weight: w,
                },
            ) => index == s && weight.to_bits() == w.to_bits(),
            (
                P::SourceSetting { index, setting },
                P::SourceSetting {
                    index: s,
                    setting: t,
                },
            ) => (index, setting) == (s, t),
            (
                P::Shape {
                    index,
                    what,
                    first,
                    here,
                },
                P::Shape {
                    index: s,
                    what: w,
                    first: f,
                    here: h,
                },
            ) => (index, what, first, here) == (s, w, f, h),
            (
                P::Kinds { index, first, here },
                P::Kinds {
                    index: s,
                    first: f,
                    here: h,
                },
            ) => (index, first, here) == (s, f, h),
            _ => false,
        }
    }
}

impl Eq for MixtureProblem {}
