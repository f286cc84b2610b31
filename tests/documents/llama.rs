//! LLaMA-3 shards (`u32` tokens, `bos` 128000 by default): the same walk and fields, tokens
//! past `u16`, and a token past `i32` refused for `i32` output, kept for `i64`.

use pinring::source::{write_shard_u32, DocOrder, Documents, TokenShards, TokenType, LLAMA3_BOS};
use pinring::{Error, Fence, Pipeline};

use crate::field_values::values;
use crate::fields::{dataset, run};
use crate::model::Data;

/// The fields test's dataset with LLaMA-3's bos and tokens past `u16`.
fn llama_data() -> Data {
    let mut data = dataset(LLAMA3_BOS);
    for shard in &mut data.shards {
        for t in shard.iter_mut().filter(|t| **t != LLAMA3_BOS) {
            *t = *t * 128 + 3; // up to 127_875: past u16, never 128000
        }
    }
    data
}

#[test]
fn llama3_shards_walk_and_pack_as_gpt2_shards() {
    let data = llama_data();
    run(
        &data,
        true,
        TokenType::I32,
        2,
        1,
        DocOrder::Sequential,
        true,
    );
    run(
        &data,
        true,
        TokenType::I64,
        3,
        0,
        DocOrder::Shuffled { seed: 4 },
        false,
    );
}

#[test]
fn the_default_bos_of_u32_shards_is_llama3s() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.bin");
    write_shard_u32(&path, &llama_data().shards[0]).unwrap();
    let docs = Documents::builder(TokenShards::open([&path]).unwrap())
        .tokens_per_batch(16)
        .max_seq_len(16)
        .build()
        .unwrap();
    assert_eq!(docs.bos(), 128_000);
}

#[test]
fn a_token_past_i32_needs_i64() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.bin");
    let big = u32::MAX - 5;
    write_shard_u32(&path, &[LLAMA3_BOS, 1, big, 2, LLAMA3_BOS, 3, 4, 5]).unwrap();
    let docs = |ty| {
        Documents::builder(TokenShards::open([&path]).unwrap())
            .tokens_per_batch(7)
            .max_seq_len(16)
            .token_type(ty)
            .build()
            .unwrap()
    };
    let first = |docs: &Documents| {
        let config = docs.config().decode_threads(1).build().unwrap();
        let mut pipeline = Pipeline::new(config, docs.decoder(), docs.iter().take(1)).unwrap();
        pipeline.pop().map(|b| {
            let b = b.unwrap();
            let v = values(&b, "tokens");
            b.release(Fence::Sync).unwrap();
            v
        })
    };
    let err = first(&docs(TokenType::I32)).unwrap_err();
    assert!(
        matches!(&err, Error::Decode { message, .. } if message.contains(&big.to_string()) && message.contains("i64")),
        "{err}"
    );
    assert_eq!(
        first(&docs(TokenType::I64)).unwrap(),
        [128_000, 1, i64::from(big), 2, 128_000, 3, 4, 5]
    );
}
