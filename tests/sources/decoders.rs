//! The decoders through real pipelines, every byte: tokens of both formats widened and
//! split, records copied, wrong sizes and tokens too large refused, never a panic.

use std::collections::{BTreeMap, BTreeSet};

use pinring::source::{
    write_shard, write_shard_u32, FixedRecords, NextToken, Order, RecordBytes, Sampler,
    ShardFormat, ShardProblem, SourceError, TokenShard, TokenShards, TokenType, Tokens, Window,
};
use pinring::{Config, Decode, Error, Fence, Pipeline};

use crate::helpers::{
    drain, le, random_tokens, random_tokens_u32, shards, token_batches, token_config, widened,
};

#[test]
fn token_batches_through_the_pipeline_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (src, written) = shards(&dir, &[5000, 129, 2049]);
    const T: usize = 64;
    const B: usize = 8;
    // The expected samples, from the tokens written (not from the reader).
    let mut windows: Vec<&[u16]> = Vec::new();
    for tokens in &written {
        let mut s = 0;
        while s + T < tokens.len() {
            windows.push(&tokens[s..s + T + 1]);
            s += T;
        }
    }
    let sampler = src.windows(T as u64 + 1).build().unwrap();
    assert_eq!(sampler.epoch_len(), windows.len() as u64);
    for ty in [
        TokenType::U16,
        TokenType::U32,
        TokenType::I32,
        TokenType::I64,
    ] {
        let epochs = 2;
        let expected: Vec<u8> = windows
            .iter()
            .cycle()
            .take(epochs * windows.len())
            .flat_map(|w| {
                let inputs = w[..T].iter().flat_map(|&t| le(ty, t));
                let targets = w[1..].iter().flat_map(|&t| le(ty, t));
                inputs.chain(targets).collect::<Vec<_>>()
            })
            .collect();
        let samples = sampler.iter().take(epochs * windows.len());
        let got = token_batches(NextToken::new(ty), T as u64 + 1, B, samples);
        assert_eq!(got.len(), (epochs * windows.len()).div_ceil(B));
        let got = got.concat();
        assert_eq!(got.len(), expected.len(), "{ty}");
        assert!(got == expected, "{ty}: batch bytes differ");

        // The plain widening decoder: each sample is the window itself.
        let got = token_batches(Tokens::new(ty), T as u64 + 1, B, sampler.epoch(0));
        let expected: Vec<u8> = windows
            .iter()
            .flat_map(|w| w.iter().flat_map(|&t| le(ty, t)))
            .collect();
        assert!(got.concat() == expected, "{ty}: Tokens bytes differ");
    }
}

#[test]
fn records_through_the_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    const R: usize = 24;
    let mut paths = Vec::new();
    let mut all = BTreeMap::new();
    for (f, n) in [(0u8, 37usize), (1, 64)] {
        let bytes: Vec<u8> = (0..n * R)
            .map(|i| (i * 7 + usize::from(f) * 13) as u8)
            .collect();
        for (i, rec) in bytes.chunks(R).enumerate() {
            all.insert((f, i), rec.to_vec());
        }
        let path = dir.path().join(format!("rec_{f}.bin"));
        std::fs::write(&path, &bytes).unwrap();
        paths.push(path);
    }
    let records = FixedRecords::glob(dir.path().join("rec_*.bin"), R).unwrap();
    assert_eq!(records.records(), 101);
    let sampler = Sampler::builder(records)
        .order(Order::Shuffled { seed: 3 })
        .build()
        .unwrap();
    let order: Vec<_> = sampler
        .epoch(0)
        .map(|w| (u8::from(w.file().path() == paths[1]), w.start()))
        .collect();
    let config = Config::builder()
        .batch_size(10)
        .bytes_per_sample(R)
        .decode_threads(2)
        .build()
        .unwrap();
    let mut p = Pipeline::new(config, RecordBytes, sampler.epoch(0)).unwrap();
    let mut got = Vec::new();
    assert_eq!(drain(&mut p, None, &mut got), 11); // 10 full batches and one of 1
    let expected: Vec<u8> = order.iter().flat_map(|k| all[k].clone()).collect();
    assert!(got.concat() == expected);
    let visited: BTreeSet<_> = order.into_iter().collect();
    assert_eq!(visited.len(), 101, "every record once per epoch");
}

#[test]
fn decoders_reject_wrong_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let (src, _) = shards(&dir, &[100]);
    let window = |len: u64| {
        src.clone()
            .windows(len)
            .build()
            .unwrap()
            .iter()
            .next()
            .unwrap()
    };
    for ty in [
        TokenType::U16,
        TokenType::U32,
        TokenType::I32,
        TokenType::I64,
    ] {
        for len in [0, 1, 9, 10, 11, 100, 10_000] {
            let mut out = vec![0u8; len];
            let w = window(10);
            let tokens_ok = len == 10 * ty.bytes();
            assert_eq!(
                Tokens::new(ty).decode(w.clone(), &mut out).is_ok(),
                tokens_ok
            );
            let next_ok = len == 18 * ty.bytes();
            assert_eq!(NextToken::new(ty).decode(w, &mut out).is_ok(), next_ok);
        }
        // A window of one token has no (input, target) pair.
        let err = NextToken::new(ty).decode(window(1), &mut []).unwrap_err();
        assert!(err.to_string().contains("at least 2 tokens"), "{err}");
    }

    // A misconfigured pipeline reports the decoder's message, no panic.
    let decoder = NextToken::new(TokenType::I32);
    let config = Config::builder()
        .batch_size(2)
        .bytes_per_sample(decoder.sample_bytes(11) + 4)
        .decode_threads(1)
        .build()
        .unwrap();
    let sampler = src.windows(11).build().unwrap();
    let mut p = Pipeline::new(config, decoder, sampler.iter()).unwrap();
    match p.pop() {
        Err(Error::Decode {
            seq: 0,
            sample: 0,
            message,
        }) => {
            assert!(message.contains("NextToken::sample_bytes"), "{message}")
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
}

/// The token decoders read u32 shards: u32, i32 and i64 byte for byte through the pipeline;
/// u16 refused up front and per window; a token above i32::MAX never wrapped.
#[test]
fn u32_token_batches_through_the_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = random_tokens_u32(3001, 9);
    let path = dir.path().join("llama.bin");
    write_shard_u32(&path, &tokens).unwrap();
    // A GPT-2 shard beside it: shards of both formats may be mixed.
    let t16 = random_tokens(1001, 10);
    write_shard(dir.path().join("gpt2.bin"), &t16).unwrap();
    let src = TokenShards::open([dir.path().join("gpt2.bin"), path.clone()]).unwrap();
    assert_eq!(src.format(), ShardFormat::U32);
    assert_eq!(
        TokenShards::open([dir.path().join("gpt2.bin")])
            .unwrap()
            .format(),
        ShardFormat::U16
    );
    const T: usize = 32;
    const B: usize = 4;
    let mut windows: Vec<Vec<u32>> = Vec::new();
    for all in [widened(&t16), tokens.clone()] {
        let mut s = 0;
        while s + T < all.len() {
            windows.push(all[s..s + T + 1].to_vec());
            s += T;
        }
    }
    let sampler = src.clone().windows(T as u64 + 1).build().unwrap();
    assert_eq!(sampler.epoch_len(), windows.len() as u64);
    for ty in [TokenType::U32, TokenType::I32, TokenType::I64] {
        src.check_token_type(ty).unwrap();
        let le = |t: u32| match ty {
            TokenType::U32 => t.to_le_bytes().to_vec(),
            TokenType::I32 => i32::try_from(t).unwrap().to_le_bytes().to_vec(),
            _ => i64::from(t).to_le_bytes().to_vec(),
        };
        let expected: Vec<u8> = windows
            .iter()
            .flat_map(|w| {
                let inputs = w[..T].iter().map(|&t| le(t));
                let targets = w[1..].iter().map(|&t| le(t));
                inputs.chain(targets).flatten().collect::<Vec<_>>()
            })
            .collect();
        let got = token_batches(NextToken::new(ty), T as u64 + 1, B, sampler.epoch(0));
        assert!(got.concat() == expected, "{ty}: batch bytes differ");

        let got = token_batches(Tokens::new(ty), T as u64 + 1, B, sampler.epoch(0));
        let expected: Vec<u8> = windows.iter().flatten().flat_map(|&t| le(t)).collect();
        assert!(got.concat() == expected, "{ty}: Tokens bytes differ");
    }

    // u16 cannot hold u32 tokens: refused up front, naming the shard...
    let err = src.check_token_type(TokenType::U16).unwrap_err();
    match &err {
        Error::Source(SourceError::File { path: p, problem }) => {
            assert_eq!(p, &path);
            assert_eq!(
                problem.format_problem::<ShardProblem>(),
                Some(&ShardProblem::TokenTypeTooNarrow {
                    format: ShardFormat::U32,
                    ty: TokenType::U16
                })
            );
        }
        other => panic!("expected TokenTypeTooNarrow, got {other:?}"),
    }
    assert!(
        err.to_string().contains("decode it as u32, i32 or i64"),
        "{err}"
    );
    // ...and, unchecked, every window of the u32 shard is a decode error (the u16 shard's
    // decode fine).
    let u32_window = sampler
        .epoch(0)
        .find(|w| w.format() == ShardFormat::U32)
        .unwrap();
    let u16_window = sampler.epoch(0).next().unwrap();
    let decoder = NextToken::new(TokenType::U16);
    let mut out = vec![0u8; decoder.sample_bytes(T as u64 + 1)];
    let e = decoder.decode(u32_window.clone(), &mut out).unwrap_err();
    assert!(e.to_string().contains("which u16 cannot hold"), "{e}");
    decoder.decode(u16_window, &mut out).unwrap();
    let mut out = vec![0u8; Tokens::new(TokenType::U16).sample_bytes(T as u64 + 1)];
    assert!(Tokens::new(TokenType::U16)
        .decode(u32_window, &mut out)
        .is_err());
}

#[test]
fn a_u32_token_above_i32_max_is_an_error_not_a_wrap() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.bin");
    let mut tokens: Vec<u32> = (0..65).collect();
    tokens[37] = 3_000_000_000;
    write_shard_u32(&path, &tokens).unwrap();
    let src = TokenShards::open([&path]).unwrap();
    // The up-front check passes i32 (it cannot scan the data): decode finds the token.
    src.check_token_type(TokenType::I32).unwrap();
    let sampler = src.windows(17).build().unwrap(); // windows at 0, 16, 32, 48
    let windows: Vec<Window<TokenShard>> = sampler.epoch(0).collect();
    assert_eq!(windows.len(), 4);
    for (i, w) in windows.iter().enumerate() {
        let holds_big = i == 2;
        let tokens = Tokens::new(TokenType::I32);
        let mut out = vec![0u8; tokens.sample_bytes(17)];
        let r = tokens.decode(w.clone(), &mut out);
        assert_eq!(r.is_err(), holds_big, "window {i}");
        if let Err(e) = r {
            let text = e.to_string();
            assert!(text.contains("token 3000000000 (index 37 of"), "{text}");
            assert!(text.contains("does not fit i32"), "{text}");
            assert!(text.contains("decode as u32 or i64"), "{text}");
        }
        // i64 holds it.
        let wide = Tokens::new(TokenType::I64);
        let mut out = vec![0u8; wide.sample_bytes(17)];
        wide.decode(w.clone(), &mut out).unwrap();
        let got: Vec<i64> = out
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let want: Vec<i64> = w.to_vec().unwrap().into_iter().map(i64::from).collect();
        assert_eq!(got, want);
    }
    // Through the pipeline: the batch holding the window fails with the decoder's message,
    // after every batch before it.
    let decoder = NextToken::new(TokenType::I32);
    let mut p = Pipeline::new(token_config(&decoder, 17, 1), decoder, sampler.epoch(0)).unwrap();
    let mut got = Vec::new();
    assert_eq!(drain(&mut p, Some(2), &mut got), 2);
    match p.pop() {
        Err(Error::Decode {
            seq: 2,
            sample: 0,
            message,
        }) => assert!(message.contains("token 3000000000"), "{message}"),
        other => panic!("expected a decode error, got {other:?}"),
    }
}

/// Samples of 512 KiB are one decode item each, so an epoch's short last batch has fewer
/// items than a full one: the lone decode worker's claims on the missing items find the
/// batch filled (or its slot already reused) and must go on to the next batch, epoch after
/// epoch. (They once ended the worker, and the pipeline waited forever.)
#[test]
fn one_decode_worker_crosses_epoch_ends_with_short_batches() {
    let dir = tempfile::tempdir().unwrap();
    let t1: u64 = 131_073; // 512 KiB of i32 a sample
    let tokens: Vec<u16> = (0..10 * (t1 - 1) + 1)
        .map(|i| (i / (t1 - 1)) as u16)
        .collect();
    write_shard(dir.path().join("train_000.bin"), &tokens).unwrap();
    let decoder = Tokens::new(TokenType::I32);
    let sampler = TokenShards::open([dir.path().join("train_000.bin")])
        .unwrap()
        .windows(t1)
        .order(Order::Shuffled { seed: 3 })
        .build()
        .unwrap(); // 10 windows an epoch: batches of 4, 4 and 2
    for host_slots in [2, 4] {
        let config = Config::builder()
            .batch_size(4)
            .bytes_per_sample(decoder.sample_bytes(t1))
            .host_slots(host_slots)
            .decode_threads(1)
            .pop_timeout(std::time::Duration::from_secs(60)) // a hang fails, not waits
            .build()
            .unwrap();
        let samples = sampler.iter().until_epoch(5);
        let mut pipeline = Pipeline::new(config, decoder, samples).unwrap();
        let mut got = Vec::new();
        while let Some(batch) = pipeline.pop().unwrap() {
            // Window w holds tokens w as i32: each row's first element is its window.
            let rows: Vec<u64> = batch
                .bytes()
                .chunks_exact(decoder.sample_bytes(t1))
                .map(|row| u64::from(u32::from_le_bytes(row[..4].try_into().unwrap())))
                .collect();
            assert_eq!(rows, batch.sample_ids(), "batch {}", batch.seq());
            got.push((batch.epoch(), rows));
            batch.release(Fence::Sync).map_err(|e| e.error).unwrap();
        }
        let sizes: Vec<usize> = got.iter().map(|(_, r)| r.len()).collect();
        assert_eq!(sizes, [4, 4, 2].repeat(5), "H = {host_slots}");
        for epoch in 0..5 {
            let mut ids: Vec<u64> = got
                .iter()
                .filter(|(e, _)| *e == epoch)
                .flat_map(|(_, r)| r.iter().copied())
                .collect();
            ids.sort_unstable();
            assert_eq!(
                ids,
                (0..10).collect::<Vec<_>>(),
                "epoch {epoch}, H = {host_slots}"
            );
        }
    }
}
