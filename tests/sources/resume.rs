//! Resuming from a position: iterators and pipelines continue exactly.

use pinring::source::{NextToken, Order, Position, TokenType};
use pinring::Pipeline;

use crate::helpers::{drain, key, shards, token_config};

#[test]
fn resumed_iterators_continue_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let (src, _) = shards(&dir, &[900, 433]);
    for order in [
        Order::Sequential,
        Order::Shuffled { seed: 77 },
        Order::Random { seed: 77 },
    ] {
        let s = src
            .clone()
            .windows(9)
            .order(order)
            .shard(1, 3)
            .build()
            .unwrap();
        let len = s.epoch_len();
        let continuous: Vec<_> = s
            .iter()
            .take((3 * len + 7) as usize)
            .map(|w| key(&w))
            .collect();
        for stop in [0, 1, len - 1, len, len + 1, 2 * len + 3] {
            let mut run = s.iter();
            let before: Vec<_> = run.by_ref().take(stop as usize).map(|w| key(&w)).collect();
            let at = s.position_after(Position::default(), stop);
            assert_eq!(run.position(), at);
            assert_eq!(
                at,
                Position {
                    epoch: stop / len,
                    index: stop % len
                }
            );
            let after: Vec<_> = s
                .iter_from(at)
                .unwrap()
                .take(continuous.len() - stop as usize)
                .map(|w| key(&w))
                .collect();
            assert_eq!(
                [before, after].concat(),
                continuous,
                "{order:?} stop {stop}"
            );
            assert_eq!(
                s.sample_at(at).map(|w| key(&w)),
                continuous.get(stop as usize).cloned()
            );
        }
    }
}

#[test]
fn resumed_pipeline_gives_the_batches_of_a_continuous_run() {
    let dir = tempfile::tempdir().unwrap();
    let (src, _) = shards(&dir, &[3000, 1234]);
    const B: usize = 4;
    const W: u64 = 33;
    let decoder = NextToken::new(TokenType::I32);
    let sampler = src
        .windows(W)
        .order(Order::Shuffled { seed: 2024 })
        .shard(1, 2)
        .build()
        .unwrap();
    // Crosses epoch boundaries; a batch ends at each (the epochs are not multiples of B).
    let samples = 3 * sampler.epoch_len() as usize + 5 * B;
    let sample_bytes = decoder.sample_bytes(W);
    let mut continuous = Vec::new();
    let mut p = Pipeline::new(
        token_config(&decoder, W, B),
        decoder,
        sampler.iter().take(samples),
    )
    .unwrap();
    let total = drain(&mut p, None, &mut continuous);
    drop(p);
    assert_eq!(
        continuous.iter().map(Vec::len).sum::<usize>(),
        samples * sample_bytes
    );
    assert!(total > samples / B, "short batches at the epochs' ends");

    for stop in [1, sampler.epoch_len() as usize / B + 1, total - 1] {
        let mut resumed = Vec::new();
        // The first run is endless and stopped after `stop` batches, decode running ahead.
        let mut first =
            Pipeline::new(token_config(&decoder, W, B), decoder, sampler.iter()).unwrap();
        assert_eq!(drain(&mut first, Some(stop), &mut resumed), stop);
        drop(first);
        let consumed = resumed.iter().map(Vec::len).sum::<usize>() / sample_bytes;
        let at = sampler.position_after(Position::default(), consumed as u64);
        let mut second = Pipeline::new(
            token_config(&decoder, W, B),
            decoder,
            sampler.iter_from(at).unwrap().take(samples - consumed),
        )
        .unwrap();
        assert_eq!(drain(&mut second, None, &mut resumed), total - stop);
        assert!(resumed == continuous, "resume after {stop} batches differs");
    }
}
