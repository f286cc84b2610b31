//! The token-shard format read and written exactly, file patterns, and the one window
//! type both formats share.

use std::path::Path;
use std::sync::Arc;

use pinring::source::{
    write_shard, write_shard_u32, FixedRecords, RecordFile, Sampler, ShardFormat, ShardToken,
    ShardWriter, SourceError, TokenShard, TokenShards, Window, SHARD_MAGIC_U32, SHARD_VERSION_U32,
};
use pinring::Error;

use crate::helpers::{random_tokens, random_tokens_u32, raw_shard_u32, widened};

/// Panics unless `bytes` are a shard file: a 1,024-byte header of the words `header`
/// (magic, version, token count), zeros after them, then that many tokens of `width`
/// bytes each.
fn assert_shard_layout(bytes: &[u8], header: [i32; 3], width: usize) {
    assert_eq!(bytes.len(), 1024 + width * header[2] as usize);
    let word = |i: usize| i32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap());
    assert_eq!([word(0), word(1), word(2)], header);
    assert!(bytes[12..1024].iter().all(|&b| b == 0));
}

/// Writes `tokens` through `writer` in pieces (of 3,001 tokens): the writer counts them
/// all, and the file it made at `path` is `bytes`.
fn assert_written_in_pieces<T: ShardToken>(
    mut writer: ShardWriter<T>,
    tokens: &[T],
    path: &Path,
    bytes: &[u8],
) {
    for chunk in tokens.chunks(3001) {
        writer.write(chunk).unwrap();
    }
    assert_eq!(writer.finish().unwrap(), tokens.len() as u64);
    assert_eq!(std::fs::read(path).unwrap(), bytes);
}

#[test]
fn shard_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = random_tokens(10_007, 1);
    let path = dir.path().join("a.bin");
    write_shard(&path, &tokens).unwrap();

    // The bytes on disk are exactly the format.
    let bytes = std::fs::read(&path).unwrap();
    assert_shard_layout(&bytes, [20240520, 1, 10_007], 2);

    let shard = TokenShard::open(&path).unwrap();
    assert_eq!(shard.len(), tokens.len());
    assert_eq!(shard.path(), path);
    assert!((0..tokens.len()).all(|i| shard.token(i).unwrap() == Some(u32::from(tokens[i]))));
    assert_eq!(shard.token(tokens.len()).unwrap(), None);
    assert_eq!(shard.token(usize::MAX).unwrap(), None);

    // Written in pieces, the same file.
    let path2 = dir.path().join("b.bin");
    let writer = ShardWriter::create(&path2).unwrap();
    assert_written_in_pieces(writer, &tokens, &path2, &bytes);

    // Through the sampler: one window of the whole shard is the tokens.
    let sampler = TokenShards::open([&path])
        .unwrap()
        .windows(tokens.len() as u64)
        .build()
        .unwrap();
    let all: Vec<_> = sampler.epoch(0).collect();
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].to_vec().unwrap(), widened(&tokens));
    assert_eq!(all[0].read_bytes().unwrap(), &bytes[1024..]);
}

#[test]
fn glob_opens_matches_in_name_order() {
    let dir = tempfile::tempdir().unwrap();
    for (name, n) in [("t_002.bin", 30), ("t_000.bin", 10), ("t_001.bin", 20)] {
        write_shard(dir.path().join(name), &random_tokens(n, n as u64)).unwrap();
    }
    write_shard(dir.path().join("v_000.bin"), &[1, 2, 3]).unwrap();
    let shards = TokenShards::glob(dir.path().join("t_*.bin")).unwrap();
    let lens: Vec<_> = shards.shards().iter().map(|s| s.len()).collect();
    assert_eq!(lens, [10, 20, 30]);
    assert_eq!(shards.tokens(), 60);
    assert_eq!(
        TokenShards::glob(dir.path().join("t_00?.bin"))
            .unwrap()
            .shards()
            .len(),
        3
    );

    match TokenShards::glob(dir.path().join("x_*.bin")) {
        Err(Error::Source(SourceError::NoMatch { pattern })) => {
            assert_eq!(pattern, dir.path().join("x_*.bin"))
        }
        other => panic!("expected NoMatch, got {other:?}"),
    }
    let err = TokenShards::glob(dir.path().join("*").join("t_000.bin")).unwrap_err();
    assert!(
        matches!(err, Error::Source(SourceError::BadPattern { .. })),
        "{err}"
    );
    let none: [&Path; 0] = [];
    assert!(matches!(
        TokenShards::open(none),
        Err(Error::Source(SourceError::NoFiles))
    ));
}

#[test]
fn u32_shards_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let tokens = random_tokens_u32(10_007, 5);
    assert!(tokens.iter().any(|&t| t > u32::from(u16::MAX)));
    let path = dir.path().join("a.bin");
    write_shard_u32(&path, &tokens).unwrap();

    // The bytes on disk are llm.c's LLaMA-3 format exactly.
    let bytes = std::fs::read(&path).unwrap();
    assert_shard_layout(&bytes, [20240801, 7, 10_007], 4);
    assert_eq!((SHARD_MAGIC_U32, SHARD_VERSION_U32), (20240801, 7));
    let on_disk: Vec<u32> = bytes[1024..]
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(on_disk, tokens);

    let shard = TokenShard::open(&path).unwrap();
    assert_eq!(shard.format(), ShardFormat::U32);
    assert_eq!(shard.format().token_bytes(), 4);
    assert_eq!(shard.len(), tokens.len());
    assert!((0..tokens.len()).all(|i| shard.token(i).unwrap() == Some(tokens[i])));
    assert_eq!(shard.token(tokens.len()).unwrap(), None);
    let whole = Window::new(Arc::new(shard), 0, tokens.len()).unwrap();
    assert_eq!(whole.read_bytes().unwrap(), &bytes[1024..]);

    // Written in pieces, by either constructor, the same file.
    for (i, generic) in [false, true].into_iter().enumerate() {
        let path2 = dir.path().join(format!("b{i}.bin"));
        let writer = if generic {
            ShardWriter::<u32>::create_as(&path2).unwrap()
        } else {
            ShardWriter::create_u32(&path2).unwrap()
        };
        assert_eq!(writer.format(), ShardFormat::U32);
        assert_written_in_pieces(writer, &tokens, &path2, &bytes);
    }

    // Windows read the u32 tokens.
    let sampler = TokenShards::open([&path])
        .unwrap()
        .windows(65)
        .build()
        .unwrap();
    for w in sampler.epoch(0) {
        assert_eq!(w.format(), ShardFormat::U32);
        assert_eq!(w.to_vec().unwrap(), tokens[w.start()..w.start() + w.len()]);
        assert_eq!(w.read_bytes().unwrap().len(), 4 * w.len());
        assert_eq!(w.byte_len(), 4 * w.len());
    }

    // A file made by hand in the format (not by this crate's writer) opens too.
    let by_hand = dir.path().join("hand.bin");
    raw_shard_u32(&by_hand, [20240801, 7, 3], &[0, 128_255, u32::MAX], &[]);
    let shard = TokenShard::open(&by_hand).unwrap();
    assert_eq!(
        (0..3).map(|i| shard.token(i).unwrap()).collect::<Vec<_>>(),
        [Some(0), Some(128_255), Some(u32::MAX)]
    );
    // The GPT-2 format still reads as u16.
    write_shard(dir.path().join("u16.bin"), &[1, 2, 65535]).unwrap();
    let shard = TokenShard::open(dir.path().join("u16.bin")).unwrap();
    assert_eq!(
        (shard.format(), shard.token(2).unwrap()),
        (ShardFormat::U16, Some(65535))
    );
}

/// Windows of both formats are one type: they say where they start and how long they are
/// with the same words, counted in their units (tokens, records), and agree with the
/// bytes they hold.
#[test]
fn windows_name_start_and_len_alike() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.bin");
    let bytes: Vec<u8> = (0..40u8).collect();
    std::fs::write(&path, &bytes).unwrap();
    let file = Arc::new(RecordFile::open(&path, 4).unwrap());
    let w = Window::new(file.clone(), 3, 2).unwrap();
    assert_eq!((w.start(), w.len(), w.is_empty()), (3, 2, false));
    assert_eq!(w.read_bytes().unwrap(), &bytes[12..20]);
    assert_eq!(file.record(3).unwrap().as_deref(), Some(&bytes[12..16]));
    assert_eq!(file.record(10).unwrap(), None);
    assert!(Window::new(file.clone(), 9, 2).is_none());
    assert!(Window::new(file, usize::MAX, 2).is_none());
    let sampler = Sampler::builder(FixedRecords::open([&path], 4).unwrap())
        .window(3)
        .build()
        .unwrap();
    let starts: Vec<_> = sampler.epoch(0).map(|w| (w.start(), w.len())).collect();
    assert_eq!(starts, [(0, 3), (3, 3), (6, 3)]);

    let spath = dir.path().join("t.bin");
    write_shard(&spath, &(0..40u16).collect::<Vec<_>>()).unwrap();
    let shard = Arc::new(TokenShard::open(&spath).unwrap());
    let w = Window::new(shard.clone(), 3, 2).unwrap();
    assert_eq!((w.start(), w.len(), w.is_empty()), (3, 2, false));
    assert_eq!(w.to_vec().unwrap(), [3, 4]);
    assert!(Window::new(shard, 39, 2).is_none());
    // A shorter buffer gets the first bytes; a longer one the window's.
    let mut out = [0u8; 3];
    assert_eq!(w.read_into(&mut out).unwrap(), 3);
    assert_eq!(out, [3, 0, 4]);
    let mut out = [9u8; 6];
    assert_eq!(w.read_into(&mut out).unwrap(), 4);
    assert_eq!(out, [3, 0, 4, 0, 9, 9]);
}
