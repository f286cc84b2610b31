//! Skipped steps: whether a step lies in skipped ranges, the first step kept, random
//! ranges for the property tests, and a check that a state records exactly the ranges
//! skipped.

use pinring::source::DocumentsCheckpoint;
use proptest::prelude::*;

/// Whether `step` lies in one of the half-open `ranges`.
pub fn skipped(step: u64, ranges: &[(u64, u64)]) -> bool {
    ranges.iter().any(|&(a, b)| a <= step && step < b)
}

/// The first step from `step` on that no range skips.
pub fn kept_from(mut step: u64, ranges: &[(u64, u64)]) -> u64 {
    while skipped(step, ranges) {
        step += 1;
    }
    step
}

/// Random skipped ranges: none to three in the first 30 steps, some empty, some
/// overlapping or touching.
pub fn skips() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec((0u64..30, 0u64..6).prop_map(|(a, len)| (a, a + len)), 0..4)
}

/// Checks that `state` skips the steps of `want` and no others (over the first 100).
pub fn records(state: &DocumentsCheckpoint, want: &[(u64, u64)]) -> Result<(), TestCaseError> {
    for s in 0..100 {
        prop_assert_eq!(
            skipped(s, &state.skip),
            skipped(s, want),
            "step {} in {:?} against {:?}",
            s,
            &state.skip,
            want
        );
    }
    prop_assert!(
        state.skip.windows(2).all(|w| w[0].1 < w[1].0),
        "sorted and apart: {:?}",
        &state.skip
    );
    Ok(())
}
