//! `Locate` for one source of packed documents: through a pipeline given the source as its
//! locator, every row of every batch (both orders, two shard widths, into the second
//! epoch) is found in its shard file, and the file's tokens there are the row's tokens in
//! the batch; ids that are no document's start, or lengths past a document, are not
//! located.

use std::sync::Arc;

use pinring::source::{DocOrder, ShardFormat, TokenType};
use pinring::{Fence, Locate, Pipeline, Row};

use crate::field_values::values;
use crate::fields::dataset;
use crate::helpers::{builder, write, BOS};

/// Tokens `offset..offset + len` of a shard file of `format`, from its bytes (past llm.c's
/// 1024-byte header).
fn file_tokens(path: &std::path::Path, format: ShardFormat, offset: u64, len: u64) -> Vec<i64> {
    let bytes = std::fs::read(path).unwrap();
    let w = format.token_bytes();
    let at = 1024 + w * offset as usize;
    bytes[at..at + w * len as usize]
        .chunks_exact(w)
        .map(|c| match w {
            2 => i64::from(u16::from_le_bytes([c[0], c[1]])),
            _ => i64::from(u32::from_le_bytes(c.try_into().unwrap())),
        })
        .collect()
}

fn check(u32_shards: bool, order: DocOrder, world: u64, rank: u64) {
    let data = dataset(BOS);
    let dir = tempfile::tempdir().unwrap();
    let paths = write(dir.path(), &data, u32_shards);
    let format = if u32_shards {
        ShardFormat::U32
    } else {
        ShardFormat::U16
    };
    let docs = builder(&paths)
        .bos(BOS)
        .tokens_per_batch(48)
        .max_seq_len(40)
        .order(order)
        .shard(rank, world)
        .token_type(TokenType::I64)
        .build()
        .unwrap();
    let config = docs
        .config()
        .decode_threads(2)
        .locator(Arc::new(docs.clone()))
        .build()
        .unwrap();
    // About an epoch and a half of this dataset.
    let steps = 160 / world as usize;
    let mut pipeline = Pipeline::new(config, docs.decoder(), docs.iter().take(steps)).unwrap();
    let mut rows = 0;
    while let Some(batch) = pipeline.pop().unwrap() {
        let tokens = values(&batch, "tokens");
        let cu = values(&batch, "cu_seqlens");
        let located = batch.locate().unwrap();
        assert_eq!(located.len(), batch.row_lens().len());
        for (r, at) in located.iter().enumerate() {
            assert_eq!(at.source, 0);
            assert_eq!(at.len, u64::from(batch.row_lens()[r]));
            assert!(paths.contains(&at.path), "{}", at.path.display());
            let from = cu[r] as usize;
            assert_eq!(
                file_tokens(&at.path, format, at.offset, at.len),
                tokens[from..from + at.len as usize],
                "step {:?} row {r}: {at}",
                batch.step()
            );
            // The document's first token is its bos.
            assert_eq!(
                file_tokens(&at.path, format, at.offset, 1),
                [i64::from(BOS)]
            );
            rows += 1;
        }
        batch.release(Fence::Sync).unwrap();
    }
    assert!(rows > 100);
}

#[test]
fn every_row_reads_back_from_its_shard() {
    check(false, DocOrder::Sequential, 1, 0);
    check(false, DocOrder::Shuffled { seed: 3 }, 2, 1);
    check(true, DocOrder::Sequential, 3, 2);
}

#[test]
fn only_document_starts_within_their_document_are_located() {
    let data = dataset(BOS);
    let dir = tempfile::tempdir().unwrap();
    let paths = write(dir.path(), &data, false);
    // Shuffled: every shard indexed at build.
    let docs = builder(&paths)
        .tokens_per_batch(48)
        .max_seq_len(40)
        .order(DocOrder::Shuffled { seed: 1 })
        .build()
        .unwrap();
    let total: u64 = data.shards.iter().map(|s| s.len() as u64).sum();
    for (s, path) in paths.iter().enumerate() {
        let bos = data.bos_idx(s);
        let first = data.first_token(s);
        for (j, &b) in bos.iter().enumerate() {
            let end = bos.get(j + 1).copied().unwrap_or(data.shards[s].len());
            let len = (end - b) as u64;
            let id = first + b as u64;
            let at = docs.location(id, len).expect("a whole document");
            assert_eq!((&at.path, at.offset, at.len), (path, b as u64, len));
            assert!(
                docs.location(id, len + 1).is_none(),
                "past the document's end"
            );
            assert!(docs.location(id + 1, 1).is_none() || bos.contains(&(b + 1)));
            let row = Row {
                id,
                len: 1,
                source: 0,
            };
            assert_eq!(docs.locate(&row).map(|a| a.offset), Some(b as u64));
        }
        // Tokens before a shard's first document start none.
        if bos[0] > 0 {
            assert!(docs.location(first, 1).is_none());
        }
    }
    assert!(docs.location(total, 1).is_none(), "past the last shard");
}
