//! The walk against the model: every rank's pieces of every step, over random datasets,
//! world sizes, sizes, schedules and both orders.

use pinring::source::{DocOrder, SourceError};
use pinring::Error;
use proptest::prelude::*;

use crate::case::Case;
use crate::helpers::{datasets, got, Got};
use crate::model::{At, Data};
use crate::sizes::schedules;

/// Steps compared per rank.
const STEPS: usize = 24;

fn check_walk(
    data: &Data,
    world: u64,
    base: (u64, u64),
    schedule: &[(u64, u64, u64)],
    order: DocOrder,
) -> Result<(), TestCaseError> {
    let case = Case::write(data.clone(), false, base, schedule.to_vec(), order);
    let (want, _, all_fit) = case.model(world, At::default(), STEPS);
    for rank in 0..world {
        let docs = match case.source(rank, world).build() {
            Ok(docs) => docs,
            Err(Error::Source(SourceError::NoStepFits { step: 0, .. })) => {
                prop_assert!(
                    want.is_empty(),
                    "pinring found no first step; the model did"
                );
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(format!("build: {e}"))),
        };
        let mut steps = docs.iter();
        for w in &want {
            let step = steps.next().expect("endless until a step fails");
            prop_assert!(
                step.error().is_none(),
                "step {}: {:?}",
                w.step,
                step.error()
            );
            let g = got(data, &step);
            let expect = Got {
                step: w.step,
                epoch: w.epoch,
                spans: w.ranks[rank as usize].clone(),
            };
            prop_assert_eq!(g, expect, "rank {} of {}", rank, world);
        }
        if !all_fit {
            // The model found no step in a whole epoch: pinring's next step says so.
            let step = steps.next().expect("the failed step");
            prop_assert!(
                matches!(step.error(), Some(SourceError::NoStepFits { .. })),
                "{:?}",
                step.error()
            );
            prop_assert!(steps.next().is_none());
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Sequential order: every rank's pieces are the model's (modded-nanogpt's walk, on
    /// into later epochs).
    #[test]
    fn sequential_walk_is_the_models(
        data in datasets(),
        world in 1u64..=8,
        n in 1u64..40,
        msl in 1u64..50,
        schedule in schedules(),
    ) {
        check_walk(&data, world, (n, msl), &schedule, DocOrder::Sequential)?;
    }

    /// Shuffled order: every rank's pieces are the model's over the epoch's permutation.
    #[test]
    fn shuffled_walk_is_the_models(
        data in datasets(),
        world in 1u64..=8,
        n in 1u64..40,
        msl in 1u64..50,
        schedule in schedules(),
        seed in any::<u64>(),
    ) {
        check_walk(&data, world, (n, msl), &schedule, DocOrder::Shuffled { seed })?;
    }
}
