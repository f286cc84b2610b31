//! The blend rule: every source within one sample of its share at every prefix, for any
//! weights (zeros included); deterministic; Megatron's rule is not.

use pinring::source::Blend;
use proptest::prelude::*;

/// Weights from the draws: 1 to 9 sources, some zero, spread over six orders of magnitude.
fn weights() -> impl Strategy<Value = Vec<f64>> {
    proptest::collection::vec((0u8..4, 0.0f64..1.0, -3i32..3), 1..9)
        .prop_map(|ws| {
            ws.into_iter()
                .map(|(kind, x, e)| if kind == 0 { 0.0 } else { x * 10f64.powi(e) })
                .collect::<Vec<f64>>()
        })
        .prop_filter("not all zero", |ws| ws.iter().any(|&w| w > 0.0))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_source_is_within_one_sample_of_its_share_at_every_prefix(
        weights in weights(),
        n in 1u64..3000,
    ) {
        let mut blend = Blend::new(&weights).unwrap();
        let shares = blend.weights().to_vec();
        for prefix in 1..=n {
            blend.next();
            for (s, &c) in blend.counts().iter().enumerate() {
                let want = shares[s] * prefix as f64;
                prop_assert!(
                    (c as f64 - want).abs() < 1.0,
                    "source {s} has {c} after {prefix}, its share is {want} (weights {weights:?})"
                );
                if weights[s] == 0.0 {
                    prop_assert_eq!(c, 0);
                }
            }
        }
        prop_assert_eq!(blend.position(), n);
    }

    #[test]
    fn the_sequence_is_a_function_of_the_weights_alone(weights in weights()) {
        let a: Vec<usize> = Blend::new(&weights).unwrap().take(500).collect();
        let b: Vec<usize> = Blend::new(&weights).unwrap().take(500).collect();
        prop_assert_eq!(&a, &b);
        // Scaling every weight changes nothing.
        let scaled: Vec<f64> = weights.iter().map(|w| w * 4.0).collect();
        let c: Vec<usize> = Blend::new(&scaled).unwrap().take(500).collect();
        prop_assert_eq!(a, c);
    }
}

/// Megatron's rule, `argmax w_s · max(n, 1) − c_s(n)` (ties to the lowest index), for the
/// record: it strays past one sample where the rule here does not.
fn megatron(weights: &[f64], n: usize) -> Vec<u64> {
    let mut counts = vec![0u64; weights.len()];
    for g in 0..n {
        let t = g.max(1) as f64;
        let error = |s: usize| weights[s] * t - counts[s] as f64;
        let best = (1..weights.len()).fold(0, |b, s| if error(s) > error(b) { s } else { b });
        counts[best] += 1;
    }
    counts
}

#[test]
fn megatrons_rule_strays_past_one_sample_where_this_one_does_not() {
    let weights = [0.1, 0.2, 0.7];
    assert_eq!(megatron(&weights, 13), [2, 3, 8]); // 0.7 · 13 = 9.1
    let mut blend = Blend::new(&weights).unwrap();
    for _ in 0..13 {
        blend.next();
    }
    assert_eq!(blend.counts(), [1, 2, 10]);
}

#[test]
fn the_sequence_is_pinned() {
    // Golden values: a change to the rule changes every mixture's order and its states'
    // meaning (MIXTURE_STATE_VERSION).
    let seq: Vec<usize> = Blend::new(&[0.5, 0.3, 0.2]).unwrap().take(20).collect();
    assert_eq!(
        seq,
        [0, 1, 0, 2, 0, 1, 0, 1, 0, 2, 0, 1, 0, 2, 0, 1, 0, 1, 0, 2]
    );
}
