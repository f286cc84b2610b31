//! What a [`Mixture`](crate::source::Mixture) of samplers and its iterators share: the
//! sources and the settings.

use super::member::Member;
use super::run_origin::RunOrigin;
use super::settings::{MixSettings, MixShared};
use super::state::MixtureState;
use super::walk::Walk;
use crate::error::Result;
use crate::source::sampling::checkpoint::Checkpoint;
use crate::source::sampling::segmented::Segmented;

/// What a mixture of samplers and its iterators share. (Public only as the hidden
/// [`Mixable::Shared`](super::mixable::Mixable) of samplers' segment sets; nothing outside
/// the crate can name it.)
pub struct MixInner<S> {
    pub(crate) members: Vec<Member<S>>,
    pub(crate) settings: MixSettings,
}

impl<S> std::fmt::Debug for MixInner<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MixInner")
            .field("sources", &self.members.len())
            .field("weights", &self.settings.weights)
            .finish_non_exhaustive()
    }
}

impl<S: Segmented> MixShared for MixInner<S> {
    type Part = Checkpoint;

    fn settings(&self) -> &MixSettings {
        &self.settings
    }

    fn sources(&self) -> usize {
        self.members.len()
    }

    fn check_run(&self, state: &MixtureState) -> Result<Vec<u64>> {
        self.settings
            .checked_counts(state, &self.members, Member::count_of)
    }
}

impl<S> MixInner<S> {
    /// The walk of a run from `origin`.
    pub(crate) fn walk(&self, origin: &RunOrigin) -> Walk {
        origin.walk(
            &self.settings.norm,
            self.settings.stop,
            self.members.iter().map(|m| m.epoch_len).collect(),
        )
    }
}
