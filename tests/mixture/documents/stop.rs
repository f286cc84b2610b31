//! Stop rules, counted in each source's documents: the run ends with the last step the
//! document sequence fills before the rule ends it, on every rank alike, as the model
//! says; a state at or past the end resumes into nothing.

use pinring::source::{DocumentsCheckpoint, MixtureState, Stop};
use proptest::prelude::*;

use super::helpers::{pieces, Written};
use super::model::ModelPiece;
use super::walk::mixed;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn the_run_ends_where_the_model_says_on_every_rank(
        (sources, weights) in mixed(),
        seed in any::<u64>(),
        world in 1u64..4,
        sizes in (1u64..30, 1u64..40),
        all in any::<bool>(),
    ) {
        let stop = if all { Stop::All } else { Stop::First };
        let mut written = Written::new(&sources, seed);
        let sequence = written.model.sequence(&[(0, weights.clone())], stop, usize::MAX);
        let size = |_| (sizes.0 as usize, sizes.1 as usize);
        let want = written.model.steps(&sequence, world as usize, &size, 0, usize::MAX);
        let mix = |r| {
            written
                .mixture_of_rank(r, world, sizes)
                .weights(weights.clone())
                .stop(stop)
                .build()
                .unwrap()
        };
        let mut states = Vec::new();
        for rank in 0..world {
            let got: Vec<Vec<ModelPiece>> = mix(rank).iter().map(|s| pieces(&written, &s)).collect();
            prop_assert_eq!(got.len(), want.len());
            for (k, w) in want.iter().enumerate() {
                prop_assert_eq!(&got[k], &w.ranks[rank as usize]);
            }
            states.push(mix(rank).checkpoint_after(None, want.len() as u64).unwrap());
        }
        // Every source's documents used: within its first epoch (First), or every source of
        // positive weight through it (All) once the sequence ran out.
        let state: MixtureState<DocumentsCheckpoint> = MixtureState::merge(&states).unwrap();
        for rank in 0..world {
            prop_assert_eq!(mix(rank).iter_from(&state).unwrap().count(), 0);
            // Past the end: the state at the end.
            let past = mix(rank).checkpoint_after(None, want.len() as u64 + 3).unwrap();
            prop_assert_eq!(&past, &state);
        }
        if stop == Stop::First {
            for (s, c) in state.sources.iter().enumerate() {
                prop_assert!(c.epoch == 0 || (c.epoch == 1 && c.shard == 0 && c.doc == 0), "source {}: {:?}", s, c);
            }
        }
    }
}
