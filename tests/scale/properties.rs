//! Properties.

use super::*;

fn order_strategy() -> impl Strategy<Value = Order> {
    prop_oneof![
        Just(Order::Sequential),
        any::<u16>().prop_map(|s| Order::Shuffled { seed: u64::from(s) }),
        any::<u16>().prop_map(|s| Order::Random { seed: u64::from(s) }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// For any windows, batch size, world size and drop_last: every rank has the same
    /// number of samples and batches, the ranks together take exactly the epoch's first
    /// `M` positions, and fewer than `W·B` (or `W`) are dropped; or the set-up is
    /// refused because some rank would get nothing.
    #[test]
    fn equal_batch_counts_per_rank(
        lens in proptest::collection::vec(0u64..400, 1..4),
        window in 1u64..12,
        world in 1u64..9,
        batch in 1u64..9,
        drop_last: bool,
        order in order_strategy(),
        epoch in 0u64..3,
    ) {
        let src = Lengths(lens);
        let run = Run { window, stride: window, order, world, batch: Some(batch), drop_last };
        let n: u64 = src.0.iter().map(|&u| if u >= window { (u - window) / window + 1 } else { 0 }).sum();
        prop_assume!(n > 0);
        let m = run.end(n, 0);
        if m == 0 {
            let err = run.sampler(&src, world - 1).unwrap_err();
            prop_assert!(matches!(err, Error::Source(SourceError::TooFewForBatches { .. })), "{err:?}");
            return Ok(());
        }
        let mut all = Vec::new();
        for s in run.ranks(&src) {
            prop_assert_eq!(s.epoch_len(), m / world);
            prop_assert_eq!(s.epoch_batches(), Some((m / world).div_ceil(batch)));
            if drop_last {
                prop_assert_eq!(s.epoch_len() % batch, 0);
            }
            let ids: Vec<u64> = s.epoch(epoch).map(|w| w.id).collect();
            prop_assert_eq!(ids.len() as u64, m / world);
            all.extend(ids);
        }
        all.sort_unstable();
        prop_assert_eq!(all, first_positions(&run, &src, epoch, m));
        let bound = if drop_last { world * batch } else { world };
        prop_assert!(n - m < bound, "dropped {} of {}", n - m, n);
    }

    /// For any resume (N, W, B, k, W', B'): old + new deliver the epoch's first `M'`
    /// positions exactly once, every new rank the same count, and later epochs are a
    /// fresh run's.
    #[test]
    fn elastic_resume_is_exactly_once(
        lens in proptest::collection::vec(1u64..300, 1..3),
        world in 1u64..6,
        batch in 1u64..6,
        new_world in 1u64..6,
        new_batch in proptest::option::of(1u64..6),
        drop_last: bool,
        new_drop_last: bool,
        order in order_strategy(),
        k_frac in 0.0f64..2.5,
    ) {
        let src = Lengths(lens);
        let old = Run { window: 3, stride: 2, order, world, batch: Some(batch), drop_last };
        let Ok(first) = old.sampler(&src, 0) else {
            return Ok(()); // too few windows for this run (checked above)
        };
        let k = (k_frac * first.epoch_len() as f64) as u64;
        let new = Run { world: new_world, batch: new_batch, drop_last: new_drop_last, ..old };
        if new.sampler(&src, new_world - 1).is_err() {
            return Ok(());
        }
        check_resume(&src, &old, k, &new);
    }
}
