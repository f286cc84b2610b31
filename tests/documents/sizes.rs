//! Step sizes: the random schedules the property tests draw, and step `k`'s sizes under
//! base sizes and a schedule, as the contract says. Shared with the tests of mixtures of
//! documents.

use proptest::prelude::*;

/// A random schedule: none, or one or two changes.
pub fn schedules() -> impl Strategy<Value = Vec<(u64, u64, u64)>> {
    prop_oneof![
        2 => Just(vec![]),
        1 => (1u64..6, 1u64..40, 1u64..50).prop_map(|(k, n, m)| vec![(k, n, m)]),
        1 => (0u64..3, 1u64..40, 1u64..50, 1u64..5, 1u64..40, 1u64..50)
            .prop_map(|(k, n, m, d, n2, m2)| vec![(k, n, m), (k + d, n2, m2)]),
    ]
}

/// Step `k`'s (N, max_seq_len) under base sizes and a schedule, as the contract says.
pub fn sizes_at(base: (u64, u64), schedule: &[(u64, u64, u64)], k: u64) -> (usize, usize) {
    let (mut n, mut m) = base;
    for &(from, n2, m2) in schedule {
        if from <= k {
            (n, m) = (n2, m2);
        }
    }
    (n as usize, m as usize)
}
