//! Lineage: every row a batch locates is read back from its file, byte for byte, and
//! compared with the row's bytes in the batch — for mixtures of token shards and of
//! records, on any rank, and for a single sampler.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use pinring::source::{
    FixedRecords, Mixture, Order, RecordBytes, Sampler, SourceError, TokenType, Tokens,
};
use pinring::{Config, Error, Fence, Location, Pipeline};
use proptest::prelude::*;
use tempfile::TempDir;

use crate::helpers::{ranks, sources, WINDOW};

/// The bytes `at` names in its file: tokens of 2 bytes after the 1024-byte header, or
/// records of `record_bytes`.
fn read_back(at: &Location, unit_bytes: u64, header: u64) -> Vec<u8> {
    let mut bytes = vec![0u8; (at.len * unit_bytes) as usize];
    File::open(&at.path)
        .unwrap()
        .read_exact_at(&mut bytes, header + at.offset * unit_bytes)
        .unwrap();
    bytes
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn a_mixtures_rows_read_back_from_their_files(
        (world, rank) in ranks(),
        batch in 1u64..6,
        start in 0u64..30,
        seed in any::<u64>(),
        weights in proptest::collection::vec(0.1f64..1.0, 3),
    ) {
        let (_dir, sources) = sources(&[161, 57, 105]);
        let mix = Mixture::builder(sources)
            .weights(weights)
            .seed(seed)
            .shard(rank, world)
            .batch_size(batch)
            .start_step(start)
            .build()
            .unwrap();
        let decoder = mix.decoder(Tokens::new(TokenType::U16));
        let sample = Tokens::new(TokenType::U16).sample_bytes(WINDOW);
        let config = Config::builder()
            .batch_size(batch as usize)
            .bytes_per_sample(sample)
            .decode_threads(2)
            .locator(Arc::new(mix.clone()))
            .build()
            .unwrap();
        let mut pipeline = Pipeline::new(config, decoder, mix.iter().take((6 * batch) as usize)).unwrap();
        let mut step = start;
        while let Some(b) = pipeline.pop().unwrap() {
            prop_assert_eq!(b.step(), Some(step));
            step += 1;
            let rows = b.locate().unwrap();
            prop_assert_eq!(rows.len(), b.samples());
            for (i, at) in rows.iter().enumerate() {
                prop_assert_eq!(at.source, b.row_sources()[i]);
                prop_assert_eq!(at.len, WINDOW);
                let file = format!("source_{}.bin", at.source);
                prop_assert!(at.path.ends_with(&file));
                prop_assert_eq!(
                    &read_back(at, 2, 1024)[..],
                    &b.bytes()[i * sample..(i + 1) * sample]
                );
            }
            b.release(Fence::Sync).unwrap();
        }
        prop_assert_eq!(step, start + 6);
    }
}

#[test]
fn a_mixture_of_records_reads_back_too() {
    let dir = TempDir::new().unwrap();
    let files: Vec<_> = (0..2u8)
        .map(|f| {
            let path = dir.path().join(format!("records_{f}.bin"));
            let bytes: Vec<u8> = (0..40u32 * 16).map(|i| (i as u8) ^ (f * 91)).collect();
            std::fs::write(&path, bytes).unwrap();
            path
        })
        .collect();
    let source = |path| {
        Sampler::builder(FixedRecords::open([path], 16).unwrap())
            .window(2)
            .order(Order::Shuffled { seed: 4 })
            .build()
            .unwrap()
    };
    let mix = Mixture::builder([source(&files[0]), source(&files[1])])
        .weights([1.0, 3.0])
        .batch_size(4)
        .build()
        .unwrap();
    let config = Config::builder()
        .batch_size(4)
        .bytes_per_sample(32)
        .locator(Arc::new(mix.clone()))
        .build()
        .unwrap();
    let mut pipeline =
        Pipeline::new(config, mix.decoder(RecordBytes), mix.iter().take(40)).unwrap();
    let mut rows = 0;
    while let Some(b) = pipeline.pop().unwrap() {
        for (i, at) in b.locate().unwrap().into_iter().enumerate() {
            assert_eq!(at.len, 2);
            assert_eq!(read_back(&at, 16, 0), &b.bytes()[i * 32..(i + 1) * 32]);
            rows += 1;
        }
        b.release(Fence::Sync).unwrap();
    }
    assert_eq!(rows, 40);
}

#[test]
fn a_samplers_rows_read_back_and_a_pipeline_without_a_locator_says_so() {
    let (_dir, sources) = sources(&[801, 401]);
    let shards = pinring::source::TokenShards::open(
        sources
            .iter()
            .map(|s| s.source().shards()[0].path().to_owned()),
    )
    .unwrap();
    let sampler = shards
        .windows(WINDOW)
        .order(Order::Random { seed: 9 })
        .shard(1, 2)
        .batch_size(8)
        .build()
        .unwrap();
    let sample = Tokens::new(TokenType::U16).sample_bytes(WINDOW);
    let config = || Config::builder().batch_size(8).bytes_per_sample(sample);
    let mut pipeline = Pipeline::new(
        config().locator(Arc::new(sampler.clone())).build().unwrap(),
        Tokens::new(TokenType::U16),
        sampler.iter().take(24),
    )
    .unwrap();
    while let Some(b) = pipeline.pop().unwrap() {
        assert_eq!(b.step(), Some(b.seq()));
        for (i, at) in b.locate().unwrap().iter().enumerate() {
            assert_eq!(at.source, 0);
            assert_eq!(
                read_back(at, 2, 1024),
                &b.bytes()[i * sample..(i + 1) * sample]
            );
        }
        b.release(Fence::Sync).unwrap();
    }
    let mut bare = Pipeline::new(
        config().build().unwrap(),
        Tokens::new(TokenType::U16),
        sampler.iter().take(8),
    )
    .unwrap();
    let b = bare.pop().unwrap().unwrap();
    assert!(matches!(
        b.locate(),
        Err(Error::Source(SourceError::NoLocator))
    ));
    // A locator of another source: its rows are not found there.
    let other = Mixture::builder([sources[1].clone()]).build().unwrap();
    let mut wrong = Pipeline::new(
        Config::builder()
            .batch_size(8)
            .bytes_per_sample(sample)
            .locator(Arc::new(other))
            .build()
            .unwrap(),
        Tokens::new(TokenType::U16),
        sampler.iter().take(8),
    )
    .unwrap();
    let b = wrong.pop().unwrap().unwrap();
    // Random ids number every window start (about 1,180 here): past the other source's
    // 50 windows.
    match b.locate() {
        Err(Error::Source(SourceError::Unlocated {
            row,
            id,
            source_index: 0,
        })) => {
            assert_eq!(id, b.sample_ids()[row]);
            assert!(id >= 50);
        }
        other => panic!("{other:?}"),
    }
}
