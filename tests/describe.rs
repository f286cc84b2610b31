//! Batches that describe themselves (rows, step, extents) and carry several named fields
//! in one slot: what a source of packed documents needs from the pipeline.

use pinring::{
    decode_fn, Config, ConfigError, Decode, DecodeError, Describe, Dtype, Fence, Fields, Pipeline,
    Row,
};

/// A "step" `k`: `k + 1` documents of `k + 2` tokens each... packed into `tokens`, with
/// `cu_seqlens`; step `k` holds `n(k)` tokens.
#[derive(Debug, Clone, Copy)]
struct Step(u64);

fn tokens_in(k: u64) -> u64 {
    [7, 12, 3, 12][(k % 4) as usize]
}

fn docs_in(k: u64) -> u64 {
    k % 3 + 1
}

fn layout() -> Fields {
    Fields::new()
        .array("tokens", Dtype::I32, 13, 0)
        .view("inputs", "tokens", 0, 1)
        .view("targets", "tokens", 1, 1)
        .array("cu_seqlens", Dtype::I32, 4, 1)
}

/// Packs step `k`: token `i` is `1000 k + i`; documents split the tokens evenly.
struct Pack;

impl Decode for Pack {
    type Sample = Step;

    fn identify(step: &Step) -> Option<(u64, u64)> {
        Some((step.0, 0))
    }

    fn describe(step: &Step, out: &mut Describe<'_>) {
        let k = step.0;
        for d in 0..docs_in(k) {
            out.row(Row {
                id: 100 * k + d,
                len: (tokens_in(k) / docs_in(k)) as u32,
                source: d as u16,
            });
        }
        out.step(10 + k);
        out.dims(&[tokens_in(k) + 1, docs_in(k) + 1]);
    }

    fn decode(&self, step: Step, out: &mut [u8]) -> Result<(), DecodeError> {
        let fields = layout();
        let k = step.0;
        let tokens = fields.get("tokens").unwrap().offset;
        for i in 0..=tokens_in(k) as usize {
            let v = (1000 * k + i as u64) as i32;
            out[tokens + 4 * i..tokens + 4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        let cu = fields.get("cu_seqlens").unwrap().offset;
        for d in 0..=docs_in(k) as usize {
            let v = (d as u64 * (tokens_in(k) / docs_in(k))) as i32;
            out[cu + 4 * d..cu + 4 * d + 4].copy_from_slice(&v.to_le_bytes());
        }
        Ok(())
    }
}

fn i32s(bytes: &[u8]) -> Vec<i32> {
    bytes
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn each_batch_carries_its_fields_rows_step_and_extents() {
    let config = Config::builder()
        .batch_size(1)
        .fields(layout())
        .rows_per_batch(3)
        .device_slots(2)
        .decode_threads(2)
        .build()
        .unwrap();
    assert_eq!(config.bytes_per_sample(), layout().bytes());
    assert_eq!(config.rows_per_batch(), 3);
    let mut pipeline = Pipeline::new(config, Pack, (0..9).map(Step)).unwrap();
    let mut seen = 0;
    while let Some(batch) = pipeline.pop().unwrap() {
        let k = batch.seq();
        let n = tokens_in(k) as usize;
        assert_eq!(batch.step(), Some(10 + k));
        assert_eq!(batch.dims()[..2], [n as u64 + 1, docs_in(k) + 1]);
        let ids: Vec<u64> = (0..docs_in(k)).map(|d| 100 * k + d).collect();
        assert_eq!(batch.sample_ids(), ids);
        assert_eq!(batch.row_sources().len(), ids.len());
        assert!(batch
            .row_lens()
            .iter()
            .all(|&l| l as u64 == tokens_in(k) / docs_in(k)));
        assert_eq!(batch.rows_dropped(), 0);
        let want: Vec<i32> = (0..=n).map(|i| (1000 * k + i as u64) as i32).collect();
        assert_eq!(i32s(batch.field_bytes("tokens").unwrap()), want);
        assert_eq!(i32s(batch.field_bytes("inputs").unwrap()), want[..n]);
        assert_eq!(i32s(batch.field_bytes("targets").unwrap()), want[1..]);
        let cu = i32s(batch.field_bytes("cu_seqlens").unwrap());
        assert_eq!(cu.len() as u64, docs_in(k) + 1);
        assert_eq!(cu[0], 0);
        assert!(batch.field("positions").is_none());
        batch.release(Fence::Sync).unwrap();
        seen += 1;
    }
    assert_eq!(seen, 9);
}

#[test]
fn rows_past_the_capacity_are_counted_not_kept() {
    let config = Config::builder()
        .batch_size(1)
        .fields(layout())
        .rows_per_batch(1)
        .build()
        .unwrap();
    let mut pipeline = Pipeline::new(config, Pack, [Step(2)]).unwrap();
    let batch = pipeline.pop().unwrap().unwrap();
    assert_eq!(batch.sample_ids(), [200]);
    assert_eq!(batch.rows_dropped(), 2);
    batch.release(Fence::Sync).unwrap();
}

#[test]
fn samples_with_ids_describe_a_row_each_by_default() {
    // A decoder that only identifies its samples: one row each, no step, no extents.
    struct Ids;
    impl Decode for Ids {
        type Sample = u64;
        fn identify(s: &u64) -> Option<(u64, u64)> {
            Some((*s * 3, 0))
        }
        fn decode(&self, _: u64, _: &mut [u8]) -> Result<(), DecodeError> {
            Ok(())
        }
    }
    let config = Config::builder()
        .batch_size(4)
        .bytes_per_sample(8)
        .build()
        .unwrap();
    let mut pipeline = Pipeline::new(config, Ids, 0..6u64).unwrap();
    let batch = pipeline.pop().unwrap().unwrap();
    assert_eq!(batch.sample_ids(), [0, 3, 6, 9]);
    assert_eq!((batch.step(), batch.dims()), (None, [0; 4]));
    assert!(batch.fields().is_none() && batch.field("tokens").is_none());
    batch.release(Fence::Sync).unwrap();
    let batch = pipeline.pop().unwrap().unwrap();
    assert_eq!(
        batch.sample_ids(),
        [12, 15],
        "the short batch's rows are its own"
    );
    batch.release(Fence::Sync).unwrap();
    // A decoder without ids describes nothing.
    let config = Config::builder()
        .batch_size(2)
        .bytes_per_sample(8)
        .build()
        .unwrap();
    let plain = decode_fn(|_: u8, _: &mut [u8]| Ok(()));
    let mut pipeline = Pipeline::new(config, plain, 0..2u8).unwrap();
    let batch = pipeline.pop().unwrap().unwrap();
    assert!(batch.sample_ids().is_empty() && batch.row_lens().is_empty());
    batch.release(Fence::Sync).unwrap();
}

#[test]
fn field_layouts_that_cannot_work_are_config_errors() {
    let bad = |fields: Fields, batch: usize, bytes: Option<usize>| {
        let mut b = Config::builder().batch_size(batch).fields(fields);
        if let Some(bytes) = bytes {
            b = b.bytes_per_sample(bytes);
        }
        match b.build() {
            Err(ConfigError::Fields(why)) => why,
            other => panic!("expected a field error, got {other:?}"),
        }
    };
    let why = bad(layout().array("tokens", Dtype::U8, 1, 0), 1, None);
    assert!(why.contains("two fields are named `tokens`"), "{why}");
    let why = bad(Fields::new().view("inputs", "tokens", 0, 1), 1, None);
    assert!(why.contains("no array"), "{why}");
    let why = bad(layout(), 2, None);
    assert!(why.contains("batch_size 1"), "{why}");
    let why = bad(layout(), 1, Some(16));
    assert!(why.contains("past bytes_per_sample 16"), "{why}");
    let why = bad(Fields::new().array("x", Dtype::I32, 1, 9), 1, None);
    assert!(why.contains("dims[9]"), "{why}");
    let why = bad(Fields::new(), 1, None);
    assert!(why.contains("no field"), "{why}");
    let e = Config::builder()
        .batch_size(2)
        .fields(layout())
        .build()
        .unwrap_err();
    assert_eq!(e.field(), "fields");
}
