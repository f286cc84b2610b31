//! Every rank's steps against the model, over random sources, weights, seeds, world sizes,
//! sizes and schedules; and the blend within one document of each source's share at every
//! prefix of the document sequence the ranks together packed.

use pinring::source::Stop;
use proptest::prelude::*;

use super::data::{Data, ModelOrder};
use super::helpers::{pieces, sources_and, weights, Written};
use super::model::ModelPiece;
use super::sizes::{schedules, sizes_at};

/// Steps compared per rank.
const STEPS: usize = 16;

/// Sources and their weights.
pub fn mixed() -> impl Strategy<Value = (Vec<(Data, ModelOrder)>, Vec<f64>)> {
    sources_and(weights)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn every_rank_packs_the_models_steps_and_the_blend_holds_at_every_prefix(
        (sources, weights) in mixed(),
        seed in prop_oneof![Just(0u64), any::<u64>()],
        world in 1u64..4,
        base in (1u64..40, 1u64..50),
        schedule in schedules(),
    ) {
        let mut written = Written::new(&sources, seed);
        let sizes = |k: u64| sizes_at(base, &schedule, k);
        let sequence = written.model.sequence(&[(0, weights.clone())], Stop::Never, 50_000);
        let want = written.model.steps(&sequence, world as usize, &sizes, 0, STEPS);
        prop_assert_eq!(want.len(), STEPS);
        let mut ranks: Vec<Vec<Vec<ModelPiece>>> = Vec::new();
        for rank in 0..world {
            let mix = written
                .mixture_of_rank(rank, world, base)
                .weights(weights.clone())
                .schedule(schedule.clone())
                .build()
                .unwrap();
            let got: Vec<Vec<ModelPiece>> = mix
                .iter()
                .take(STEPS)
                .enumerate()
                .map(|(k, step)| {
                    assert_eq!(step.step(), k as u64);
                    let (n, _) = sizes(k as u64);
                    assert_eq!(step.sizes().tokens, n as u64);
                    pieces(&written, &step)
                })
                .collect();
            for (k, w) in want.iter().enumerate() {
                prop_assert_eq!(&got[k], &w.ranks[rank as usize], "step {} rank {}", k, rank);
            }
            ranks.push(got);
        }
        // The ranks' pieces, step by step and rank by rank, are the document sequence: each
        // source within one document of its share at every prefix.
        let total: f64 = weights.iter().sum();
        let mut counts = vec![0u64; weights.len()];
        let mut n = 0u64;
        for k in 0..STEPS {
            for rank in &ranks {
                for &(s, _) in &rank[k] {
                    counts[usize::from(s)] += 1;
                    n += 1;
                    for (i, &c) in counts.iter().enumerate() {
                        let share = weights[i] / total * n as f64;
                        prop_assert!(
                            (c as f64 - share).abs() < 1.0,
                            "source {} has {} of {} documents, its share is {}", i, c, n, share
                        );
                    }
                }
            }
        }
        prop_assert_eq!(n, want.iter().map(|s| s.ranks.iter().map(Vec::len).sum::<usize>() as u64).sum::<u64>());
    }
}
