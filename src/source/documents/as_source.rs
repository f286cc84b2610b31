//! [`Documents`] as a [`Source`]: a batch is one packed step of this rank; its state is the
//! walk's [`DocumentsCheckpoint`], found by walking the index from the nearest state known.

use std::sync::Arc;

use super::checkpoint::DocumentsCheckpoint;
use super::decoder::PackDocuments;
use super::packed::Documents;
use super::steps::Steps;
use crate::config::ConfigBuilder;
use crate::error::source::SourceError;
use crate::error::Result;
use crate::locate::Locate;
use crate::source::contract::Source;
use crate::source::run::Run;
use crate::source::sampling::as_source::kept_between;
use crate::source::state::State;

/// The documents state in `from`, or a mismatch for a state of another kind.
fn documents_state(from: Option<&State>) -> Result<Option<&DocumentsCheckpoint>> {
    match from {
        None => Ok(None),
        Some(State::Documents(c)) => Ok(Some(c)),
        Some(other) => Err(SourceError::DocumentsCheckpointMismatch {
            what: "the kind of source".to_owned(),
            saved: other.described().to_owned(),
            here: "packed documents".to_owned(),
        }
        .into()),
    }
}

impl Source for Documents {
    type Sample = <Steps as Iterator>::Item;
    type Decoder = PackDocuments;
    type Samples = Steps;

    fn packs_steps(&self) -> bool {
        true
    }

    fn own_run(&self) -> Run {
        Run {
            rank: self.rank(),
            world_size: self.world_size(),
            batch_size: None,
            drop_last: true,
            start_step: self.start_step(),
            skip_steps: self.skip_steps().iter().map(|&(a, b)| a..b).collect(),
            epochs: self.end_epoch(),
        }
    }

    fn with_run(&self, run: &Run) -> Result<Self> {
        self.on_run(
            run.rank,
            run.world_size,
            run.start_step,
            run.skip_pairs(),
            run.epochs,
        )
    }

    fn config(&self) -> ConfigBuilder {
        Documents::config(self).locator(self.locator())
    }

    fn decoder(&self) -> PackDocuments {
        Documents::decoder(self)
    }

    fn samples(&self, from: Option<&State>, epochs: Option<u64>) -> Result<Steps> {
        let capped;
        let docs = match epochs {
            Some(end) => {
                capped = self.until_epoch(end);
                &capped
            }
            None => self,
        };
        match documents_state(from)? {
            None => Ok(docs.iter()),
            Some(state) => docs.iter_from(state),
        }
    }

    fn state_at(&self, from: Option<&State>, near: Option<&State>, step: u64) -> Result<State> {
        let from = documents_state(from)?;
        // A state of this run at an earlier step walks on from there: only the steps
        // since are walked again.
        let near = documents_state(near)?.filter(|n| n.step <= step);
        let start = near.or(from);
        let skip = self.skip_union(start);
        let first = self.start_step().max(start.map_or(0, |s| s.step));
        let next = skip.next_kept(step.max(first));
        let steps = kept_between(skip.ranges(), first, next);
        self.checkpoint_after(start, steps).map(State::Documents)
    }

    fn check(&self, state: &State) -> Result<()> {
        match documents_state(Some(state))? {
            Some(c) => self.check_checkpoint(c),
            None => Ok(()),
        }
    }

    fn locator(&self) -> Arc<dyn Locate> {
        Arc::new(self.clone())
    }
}
