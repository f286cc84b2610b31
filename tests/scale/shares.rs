//! Equal batches per rank.

use super::*;

#[test]
fn every_rank_gets_the_same_batches_and_the_epoch_drops_only_its_tail() {
    let src = Lengths(vec![1001, 333]);
    for order in ORDERS {
        for (world, batch, drop_last) in [(2, 4, true), (3, 5, true), (3, 5, false), (7, 8, true)] {
            let run = Run {
                window: 11,
                stride: 10,
                order,
                world,
                batch: Some(batch),
                drop_last,
            };
            let ranks = run.ranks(&src);
            let n = ranks[0].grid_windows(); // 100 + 33
            let m = run.end(n, 0);
            for e in [0, 1] {
                let mut all = Vec::new();
                for s in &ranks {
                    assert_eq!(s.epoch_windows(), m);
                    assert_eq!(s.epoch_len(), m / world);
                    assert_eq!(s.epoch_batches(), Some((m / world).div_ceil(batch)));
                    let got: Vec<u64> = s.epoch(e).map(|w| w.id).collect();
                    assert_eq!(got.len() as u64, m / world);
                    all.extend(got);
                }
                all.sort_unstable();
                assert_eq!(all, first_positions(&run, &src, e, m), "{run:?}");
            }
            let bound = if drop_last { world * batch } else { world };
            assert!(n - m < bound);
        }
    }
}

#[test]
fn too_few_windows_for_a_batch_on_every_rank_is_named() {
    let src = Lengths(vec![100]); // 10 windows of 10
    let run = |world, batch, drop_last| Run {
        window: 10,
        stride: 10,
        order: Order::Sequential,
        world,
        batch: Some(batch),
        drop_last,
    };
    let err = run(3, 4, true).sampler(&src, 0).unwrap_err();
    assert_source_error!(
        err,
        SourceError::TooFewForBatches {
            windows: 10,
            world_size: 3,
            batch_size: 4,
            drop_last: true
        }
    );
    assert!(err.to_string().contains("3 × 4"), "{err}");
    // Without drop_last one short batch per rank is enough.
    assert_eq!(
        run(3, 4, false).sampler(&src, 2).unwrap().epoch_batches(),
        Some(1)
    );
    let err = run(11, 1, false).sampler(&src, 0).unwrap_err();
    assert_source_error!(err, SourceError::TooFewForBatches { .. });
    let err = run(1, 0, true).sampler(&src, 0).unwrap_err();
    assert_source_error!(err, SourceError::Zero("batch_size"));
}
