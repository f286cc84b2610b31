//! A pipeline whose source cuts its steps into batches of another size than the config's
//! `batch_size` (issue 29 item 1): refused with a `ConfigError` at the first pop, before
//! any batch is delivered — a sampler's, a mixture's — rather than batches labelled with
//! the wrong steps. Sources that number no steps are not checked.

use pinring::source::{Mixture, Sampler, TokenShards, TokenType, Tokens};
use pinring::{Config, ConfigError, Error, Fence, Pipeline};

use crate::helpers::shards;

const T: u64 = 64;

fn config(batch: usize) -> Config {
    Config::builder()
        .batch_size(batch)
        .bytes_per_sample(Tokens::new(TokenType::U16).sample_bytes(T + 1))
        .decode_threads(1)
        .build()
        .unwrap()
}

fn sampler(src: &TokenShards, batch: Option<u64>) -> Sampler<TokenShards> {
    let b = src.clone().windows(T + 1);
    match batch {
        Some(n) => b.batch_size(n).build().unwrap(),
        None => b.build().unwrap(),
    }
}

/// What the first pop of a pipeline of `config` over `samples` says.
fn first_pop<I>(config: Config, samples: I) -> Result<Option<u64>, Error>
where
    I: IntoIterator<Item = pinring::source::Window<pinring::source::TokenShard>>,
    I::IntoIter: Send + 'static,
{
    let mut p = Pipeline::new(config, Tokens::new(TokenType::U16), samples)?;
    let batch = p.pop()?;
    Ok(batch.map(|b| {
        let step = b.step().unwrap_or(u64::MAX);
        b.release(Fence::Sync).unwrap();
        step
    }))
}

fn assert_refused(popped: Result<Option<u64>, Error>, source_batch: u64, config_batch: usize) {
    let err = popped.expect_err("a pipeline of another batch size than its source's");
    let Error::Config(e @ ConfigError::SourceBatchSize { .. }) = &err else {
        panic!("not a SourceBatchSize ConfigError: {err:?}");
    };
    assert_eq!(
        e,
        &ConfigError::SourceBatchSize {
            source_batch,
            config_batch
        }
    );
    assert_eq!(e.field(), "batch_size");
    let text = err.to_string();
    assert!(
        text.contains(&format!("batches of {source_batch} sample(s)"))
            && text.contains(&format!("the config's batch_size is {config_batch}")),
        "{text}"
    );
}

#[test]
fn a_sampler_of_another_batch_size_than_the_config_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let (src, _) = shards(&dir, &[5000, 2049]);
    // Smaller than the config's: each batch would hold two steps, labelled 1, 3, 5, ...
    assert_refused(first_pop(config(16), sampler(&src, Some(8)).iter()), 8, 16);
    // Larger: each step would span two batches.
    assert_refused(first_pop(config(8), sampler(&src, Some(16)).iter()), 16, 8);
    // Resumed and begun at a step: the same.
    let s = sampler(&src, Some(8));
    let from = s.checkpoint(0, 16);
    assert_refused(
        first_pop(config(4), s.iter_from_checkpoint(&from).unwrap()),
        8,
        4,
    );
    // The same batch size, or a sampler that numbers no steps: delivered.
    assert_eq!(
        first_pop(config(8), sampler(&src, Some(8)).iter()).unwrap(),
        Some(0)
    );
    assert_eq!(
        first_pop(config(16), sampler(&src, None).iter()).unwrap(),
        Some(u64::MAX)
    );
    // Windows made by hand carry no batch size: not checked.
    let by_hand: Vec<_> = sampler(&src, None).iter().take(20).collect();
    assert_eq!(first_pop(config(16), by_hand).unwrap(), Some(u64::MAX));
}

#[test]
fn a_mixture_of_another_batch_size_than_the_config_is_a_config_error() {
    let dir = tempfile::tempdir().unwrap();
    let (src, _) = shards(&dir, &[5000, 2049]);
    let mix = Mixture::builder([sampler(&src, None), sampler(&src, None)])
        .batch_size(4)
        .build()
        .unwrap();
    let pop = |batch| -> Result<Option<u64>, Error> {
        let mut p = Pipeline::new(
            config(batch),
            mix.decoder(Tokens::new(TokenType::U16)),
            mix.iter(),
        )?;
        Ok(p.pop()?.map(|b| b.step().unwrap_or(u64::MAX)))
    };
    assert_refused(pop(8), 4, 8);
    assert_eq!(pop(4).unwrap(), Some(0));
}
