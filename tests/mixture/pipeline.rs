//! A mixture through a pipeline: each row says its source, its id within that source and
//! the batch's step; `Stats` counts each source's samples and share and names a source
//! that decodes markedly slower than the rest.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pinring::source::{Mixture, TokenShard, TokenType, Tokens, Window};
use pinring::{Config, Decode, DecodeError, Fence, Pipeline};

use crate::helpers::{drawn, sources, WINDOW};

#[test]
fn rows_carry_their_source_their_id_and_the_step() {
    let (_dir, sources) = sources(&[161, 57, 105]);
    let mix = Mixture::builder(sources)
        .weights([0.5, 0.3, 0.2])
        .seed(1)
        .shard(1, 2)
        .batch_size(5)
        .skip_steps([(2, 4)])
        .build()
        .unwrap();
    let want: Vec<_> = mix.iter().take(30).map(drawn).collect();
    let config = Config::builder()
        .batch_size(5)
        .bytes_per_sample(Tokens::new(TokenType::U16).sample_bytes(WINDOW))
        .build()
        .unwrap();
    let mut pipeline = Pipeline::new(
        config,
        mix.decoder(Tokens::new(TokenType::U16)),
        mix.iter().take(30),
    )
    .unwrap();
    let mut got = Vec::new();
    let mut steps = Vec::new();
    while let Some(b) = pipeline.pop().unwrap() {
        assert_eq!(b.epoch(), 0);
        steps.push(b.step().unwrap());
        for (&id, &source) in b.sample_ids().iter().zip(b.row_sources()) {
            got.push((source, id));
        }
        b.release(Fence::Sync).unwrap();
    }
    assert_eq!(steps, [0, 1, 4, 5, 6, 7]);
    let want: Vec<(u16, u64)> = want.iter().map(|d| (d.0, d.2)).collect();
    assert_eq!(got, want);
    // Every sample was decoded once; the shares are the blend's.
    let stats = pipeline.stats();
    let counts: Vec<u64> = stats.sources.iter().map(|s| s.samples).collect();
    let per_source = |s: u16| got.iter().filter(|g| g.0 == s).count() as u64;
    assert_eq!(counts, [per_source(0), per_source(1), per_source(2)]);
    let text = stats.to_string();
    assert!(
        text.contains(&format!("source 0   {} samples (", counts[0])),
        "{text}"
    );
    assert!(
        text.lines().last().unwrap().starts_with("bottleneck: "),
        "{text}"
    );
    let shares = stats.source_shares();
    assert!((shares.iter().sum::<f64>() - 1.0).abs() < 1e-9);
}

/// Tokens, but source 1's samples take at least 2 ms each to decode (a spin on the clock,
/// not a sleep: the time is the decode's own, whatever the load).
#[derive(Debug)]
struct SlowSecond(Tokens);

impl Decode for SlowSecond {
    type Sample = Window<TokenShard>;

    fn decode(&self, w: Window<TokenShard>, out: &mut [u8]) -> Result<(), DecodeError> {
        if w.file().path().ends_with("source_1.bin") {
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(2) {
                std::hint::spin_loop();
            }
        }
        self.0.decode(w, out)
    }

    fn identify(w: &Window<TokenShard>) -> Option<(u64, u64)> {
        Tokens::identify(w)
    }

    fn describe(w: &Window<TokenShard>, out: &mut pinring::Describe<'_>) {
        Tokens::describe(w, out)
    }
}

#[test]
fn stats_name_the_source_that_decodes_slowest() {
    let (_dir, sources) = sources(&[161, 57]);
    let mix = Mixture::builder(sources).batch_size(4).build().unwrap();
    let decoder = Arc::new(mix.decoder(SlowSecond(Tokens::new(TokenType::U16))));
    let config = Config::builder()
        .batch_size(4)
        .bytes_per_sample(Tokens::new(TokenType::U16).sample_bytes(WINDOW))
        .decode_threads(1)
        .build()
        .unwrap();
    let mut pipeline = Pipeline::new(config, decoder, mix.iter().take(80)).unwrap();
    while let Some(b) = pipeline.pop().unwrap() {
        b.release(Fence::Sync).unwrap();
    }
    let stats = pipeline.stats();
    assert_eq!(
        stats.sources.iter().map(|s| s.samples).collect::<Vec<_>>(),
        [40, 40]
    );
    let (slow, mine, _) = stats.slowest_source().expect("source 1 is markedly slower");
    assert_eq!(slow, 1);
    assert!(mine >= Duration::from_millis(2));
    // When the run is decode-bound, the bottleneck line says so.
    let (_, why) = stats.bottleneck();
    if why.starts_with("decode-bound") {
        assert!(why.contains("source 1 decodes slowest"), "{why}");
    }
}
