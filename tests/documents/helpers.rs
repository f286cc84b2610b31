//! What the document tests share: datasets written as shards, pinring's steps as plain
//! data, and the proptest strategy for random datasets.

use std::path::{Path, PathBuf};

use pinring::source::{
    write_shard, write_shard_u32, DocOrder, DocStep, Documents, DocumentsBuilder, TokenShards,
};
use proptest::prelude::*;

use crate::model::{Data, ModelOrder, Span};

/// The bos of the u16 test datasets (GPT-2's).
pub const BOS: u32 = 50256;

/// Panics with `err`'s text unless it holds `says`.
#[track_caller]
pub fn assert_says(err: &impl std::fmt::Display, says: &str) {
    let text = err.to_string();
    assert!(text.contains(says), "{text}");
}

/// Writes `data`'s shards into `dir` as `train_000.bin`, ... (`u16` unless `u32`); returns
/// their paths.
pub fn write(dir: &Path, data: &Data, u32: bool) -> Vec<PathBuf> {
    write_shards(dir, &data.shards, u32)
}

/// Writes `shards` into `dir` as `train_000.bin`, ... (`u16` unless `u32`); returns their
/// paths.
pub fn write_shards(dir: &Path, shards: &[Vec<u32>], u32: bool) -> Vec<PathBuf> {
    shards
        .iter()
        .enumerate()
        .map(|(s, tokens)| {
            let path = dir.join(format!("train_{s:03}.bin"));
            if u32 {
                write_shard_u32(&path, tokens).unwrap();
            } else {
                let t: Vec<u16> = tokens.iter().map(|&t| t as u16).collect();
                write_shard(&path, &t).unwrap();
            }
            path
        })
        .collect()
}

/// A builder over `paths`.
pub fn builder(paths: &[PathBuf]) -> DocumentsBuilder {
    Documents::builder(TokenShards::open(paths).unwrap())
}

/// A document of `len` tokens: `bos`, then tokens below 1000 (never `bos`).
pub fn document(bos: u32, len: usize, salt: u32) -> Vec<u32> {
    let mut d = vec![bos];
    d.extend((1..len).map(|i| (i as u32 * 7 + salt * 13) % 1000));
    d
}

/// A shard of `lead` tokens before the first document (never used), then documents of
/// these lengths.
pub fn shard(bos: u32, lead: usize, lens: &[usize]) -> Vec<u32> {
    let mut t: Vec<u32> = (0..lead as u32).map(|i| 900 + i).collect();
    for (k, &len) in lens.iter().enumerate() {
        t.extend(document(bos, len, k as u32));
    }
    t
}

/// A step of one rank as pinring gives it: its number, epoch and pieces as the model's
/// spans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Got {
    pub step: u64,
    pub epoch: u64,
    pub spans: Vec<Span>,
}

/// What a [`DocStep`] says, as plain data; its piece ids checked against the model's.
pub fn got(data: &Data, step: &DocStep) -> Got {
    let spans: Vec<Span> = step
        .pieces()
        .map(|p| {
            let span = Span {
                shard: p.shard,
                start: p.start as usize,
                end: (p.start + p.len) as usize,
            };
            assert_eq!(
                p.doc,
                data.id(span),
                "a piece's id is its bos's global offset"
            );
            span
        })
        .collect();
    assert_eq!(spans.len() as u64, step.piece_count());
    Got {
        step: step.step(),
        epoch: step.epoch(),
        spans,
    }
}

/// What a step says: its number, epoch and pieces, or its error.
pub fn seen(data: &Data, step: &DocStep) -> Result<Got, String> {
    match step.error() {
        Some(e) => Err(format!("step {}: {e}", step.step())),
        None => Ok(got(data, step)),
    }
}

/// The model's order for pinring's.
pub fn model_order(order: DocOrder) -> ModelOrder {
    match order {
        DocOrder::Sequential => ModelOrder::Sequential,
        DocOrder::Shuffled { seed } => ModelOrder::Shuffled(seed),
    }
}

/// A random dataset: 1 to 4 shards, each a few tokens before its first document, then
/// documents of 1 to 60 tokens, some far longer (up to 400), some shards holding a single
/// short document (too short for a step).
pub fn datasets() -> impl Strategy<Value = Data> {
    let doc_len = prop_oneof![
        8 => 1usize..60,
        1 => 100usize..400,
    ];
    let shard_lens = prop_oneof![
        6 => (0usize..4, prop::collection::vec(doc_len, 1..40)),
        1 => (0usize..2, prop::collection::vec(1usize..5, 1..2)),
    ];
    prop::collection::vec(shard_lens, 1..5).prop_map(|shards| Data {
        shards: shards
            .into_iter()
            .map(|(lead, lens)| shard(BOS, lead, &lens))
            .collect(),
        bos: BOS,
    })
}
