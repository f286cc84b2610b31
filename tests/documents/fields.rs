//! The fields of real pipelines (cpu backend) against the tokens on disk, through the
//! model: modded-nanogpt's inputs, targets and cu_seqlens (its parity, checked in Rust
//! without Python), `tokens` and `positions`, and what each batch says of itself (rows,
//! step, epoch, dims).

use pinring::source::{DocOrder, TokenType};
use pinring::{Batch, Fence, Pipeline};

use crate::case::Case;
use crate::field_values::values;
use crate::helpers::{shard, BOS};
use crate::model::{self, At, Data, ModelStep};

/// Four shards: short and long documents (some far past max_seq_len), a shard too short
/// for a step, tokens before the first bos.
pub fn dataset(bos: u32) -> Data {
    let lens = |seed: usize, count: usize| -> Vec<usize> {
        (0..count)
            .map(|i| match (i * 7 + seed * 3) % 11 {
                0 => 90 + (i * 13) % 70,
                k => 2 + (k * 5 + i) % 30,
            })
            .collect()
    };
    Data {
        shards: vec![
            shard(bos, 3, &lens(1, 150)),
            shard(bos, 0, &lens(2, 100)),
            shard(bos, 1, &[4, 3]),
            shard(bos, 2, &lens(3, 160)),
        ],
        bos,
    }
}

/// Checks one popped batch against the model's step for `rank`.
pub fn check_batch(data: &Data, batch: &Batch, want: &ModelStep, rank: usize, positions: bool) {
    let spans = &want.ranks[rank];
    let n = want.tokens;
    let k = want.step;
    let buf: Vec<i64> = data.buf(spans).into_iter().map(i64::from).collect();
    assert_eq!(buf.len(), n + 1, "step {k}");
    assert_eq!(batch.step(), Some(k));
    assert_eq!(batch.epoch(), want.epoch, "step {k}");
    assert_eq!(
        batch.dims(),
        [n as u64 + 1, want.max_docs as u64, n as u64, 0],
        "step {k}"
    );
    assert_eq!(values(batch, "tokens"), buf, "tokens, step {k}");
    assert_eq!(values(batch, "inputs"), buf[..n], "inputs, step {k}");
    assert_eq!(values(batch, "targets"), buf[1..], "targets, step {k}");
    let cu = model::cu_seqlens(spans, n, want.max_docs).expect("fits");
    let cu64: Vec<i64> = cu.iter().map(|&c| i64::from(c)).collect();
    assert_eq!(values(batch, "cu_seqlens"), cu64, "cu_seqlens, step {k}");
    let ids: Vec<u64> = spans.iter().map(|&p| data.id(p)).collect();
    assert_eq!(batch.sample_ids(), ids, "rows, step {k}");
    let lens = model::row_lens(&cu, spans.len());
    assert_eq!(
        batch.row_lens(),
        lens,
        "row lengths = cu_seqlens differences, step {k}"
    );
    assert_eq!(batch.rows_dropped(), 0);
    if positions {
        let mut want_pos = Vec::new();
        for p in spans {
            want_pos.extend((0..(p.end - p.start) as i64).take(n - want_pos.len()));
        }
        assert_eq!(values(batch, "positions"), want_pos, "positions, step {k}");
    } else {
        assert!(batch.field("positions").is_none());
    }
}

/// Runs rank `rank` of `world` through a pipeline into the second epoch and checks each
/// batch.
pub fn run(
    data: &Data,
    u32_shards: bool,
    ty: TokenType,
    world: u64,
    rank: u64,
    order: DocOrder,
    positions: bool,
) {
    let schedule = vec![(4, 48, 40), (9, 20, 7)];
    let case = Case::write(data.clone(), u32_shards, (32, 24), schedule, order);
    let docs = case
        .source(rank, world)
        .bos(data.bos)
        .token_type(ty)
        .positions(positions)
        .build()
        .unwrap();
    let (mut want, _, _) = case.model(world, At::default(), 1000);
    // Into the second epoch by a few steps.
    let first_of_epoch_1 = want.iter().position(|w| w.epoch == 1).expect("epoch 1");
    want.truncate(first_of_epoch_1 + 3);
    let steps = want.len();
    assert!(
        steps > 10,
        "the run must pass both schedule changes ({steps} steps)"
    );
    let config = docs.config().decode_threads(2).build().unwrap();
    let mut pipeline = Pipeline::new(config, docs.decoder(), docs.iter().take(steps)).unwrap();
    let mut k = 0;
    while let Some(batch) = pipeline.pop().unwrap() {
        check_batch(data, &batch, &want[k], rank as usize, positions);
        batch.release(Fence::Sync).unwrap();
        k += 1;
    }
    assert_eq!(k, steps);
}

#[test]
fn sequential_fields_are_modded_nanogpts() {
    let data = dataset(BOS);
    for world in [1, 2, 8] {
        for rank in [0, world - 1] {
            run(
                &data,
                false,
                TokenType::I32,
                world,
                rank,
                DocOrder::Sequential,
                true,
            );
        }
    }
}

#[test]
fn shuffled_fields_follow_the_permutation() {
    let data = dataset(BOS);
    run(
        &data,
        false,
        TokenType::I32,
        2,
        1,
        DocOrder::Shuffled { seed: 9 },
        true,
    );
}

#[test]
fn every_token_type_and_no_positions() {
    let data = dataset(BOS);
    run(
        &data,
        false,
        TokenType::U16,
        1,
        0,
        DocOrder::Sequential,
        false,
    );
    run(
        &data,
        false,
        TokenType::I64,
        2,
        0,
        DocOrder::Sequential,
        true,
    );
}
