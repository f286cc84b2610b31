//! Raw headerless token files (llama2.c's and candle's `u16`, OLMo's and MaxText's `u32`),
//! written as numpy's `tofile` writes an array — the tokens little-endian, nothing else —
//! and read through `pinring::Loader`: windows, documents and a mixture, batch for batch
//! what the same tokens in llm.c shards give; their checkpoint fingerprint and content;
//! files that are not raw tokens of the type said; a file changed under the loader.

use std::path::{Path, PathBuf};

use pinring::source::Source;
use pinring::source::{
    write_shard, write_shard_u32, DocOrder, DocumentProblem, Documents, FileProblem, Llmc, Mixture,
    Order, RawProblem, RawTokens, ReadProblem, Sampler, Segmented, ShardFormat, SourceError,
    TokenFileFormat, TokenShard, TokenShards, TokenType, SHARD_MAGIC,
};
use pinring::{Error, Fence, Loader, State};
use tempfile::TempDir;

use crate::helpers::{
    file_problem, first_batches, random_tokens, random_tokens_u32, same_steps_on_each_rank,
};

/// `tokens` as numpy's `np.asarray(tokens, dtype="<u2").tofile(path)` writes them (or
/// `"<u4"` for `u32`): each token's little-endian bytes, nothing else.
fn tofile<T: Copy, const N: usize>(path: &Path, tokens: &[T], le: fn(T) -> [u8; N]) {
    let bytes: Vec<u8> = tokens.iter().flat_map(|&t| le(t)).collect();
    std::fs::write(path, bytes).unwrap();
}

fn tofile_u16(path: &Path, tokens: &[u16]) {
    tofile(path, tokens, u16::to_le_bytes);
}

fn tofile_u32(path: &Path, tokens: &[u32]) {
    tofile(path, tokens, u32::to_le_bytes);
}

/// The same random `u16` tokens twice: as raw files (`raw_000.bin`, ...) and as llm.c
/// shards (`llmc_000.bin`, ...), with a document start (`bos`) every 30 to 150 tokens.
fn both_u16(dir: &Path, lens: &[usize], bos: u16) -> (Vec<PathBuf>, Vec<PathBuf>) {
    let mut raw = Vec::new();
    let mut llmc = Vec::new();
    for (i, &n) in lens.iter().enumerate() {
        let mut tokens = random_tokens(n, 40 + i as u64);
        let mut at = 0;
        while at < n {
            tokens[at] = bos;
            at += 30 + (tokens[at.saturating_sub(1)] as usize % 120);
        }
        let (r, l) = (
            dir.join(format!("raw_{i:03}.bin")),
            dir.join(format!("llmc_{i:03}.bin")),
        );
        tofile_u16(&r, &tokens);
        write_shard(&l, &tokens).unwrap();
        raw.push(r);
        llmc.push(l);
    }
    (raw, llmc)
}

/// A loader's batches as (step, ids, bytes), to its end.
fn batches<S: Source>(loader: Loader<S>) -> Vec<(Option<u64>, Vec<u64>, Vec<u8>)> {
    first_batches(loader, usize::MAX)
}

fn windows(shards: TokenShards, ty: TokenType) -> Sampler<TokenShards> {
    shards
        .decode_as(ty)
        .windows(65)
        .order(Order::Shuffled { seed: 11 })
        .build()
        .unwrap()
}

#[test]
fn raw_u16_windows_through_a_loader_are_the_llmc_shards_of_the_same_tokens() {
    let dir = TempDir::new().unwrap();
    let (raw, llmc) = both_u16(dir.path(), &[3000, 1234], 50256);
    let raw = TokenShards::open_as(&raw, RawTokens::U16).unwrap();
    assert_eq!(raw.tokens(), 3000 + 1234);
    assert_eq!(raw.format(), ShardFormat::U16);
    let llmc = TokenShards::open(&llmc).unwrap();
    // A format picked at run time (as from a `format="raw"` argument) opens the same.
    let picked: Box<dyn TokenFileFormat> = Box::new(RawTokens::U16);
    let paths: Vec<_> = raw.shards().iter().map(|s| s.path().to_owned()).collect();
    let again = TokenShards::open_as(&paths, &*picked).unwrap();
    assert_eq!(again.fingerprint(), raw.fingerprint());
    let picked: Box<dyn TokenFileFormat> = Box::new(Llmc);
    assert!(TokenShards::open_as(&paths, &*picked).is_err());
    for ty in [
        TokenType::U16,
        TokenType::U32,
        TokenType::I32,
        TokenType::I64,
    ] {
        let run = |s: &TokenShards| {
            let loader = Loader::builder(windows(s.clone(), ty))
                .batch_size(8)
                .epochs(2)
                .build()
                .unwrap();
            batches(loader)
        };
        let (from_raw, from_llmc) = (run(&raw), run(&llmc));
        assert_eq!(from_raw.len(), 2 * ((2999 / 64 + 1233 / 64) / 8), "{ty}");
        assert!(from_raw == from_llmc, "{ty}: the batches differ");
    }
}

#[test]
fn raw_u32_windows_decode_to_every_type_that_holds_them() {
    let dir = TempDir::new().unwrap();
    let tokens = random_tokens_u32(2000, 3);
    let path = dir.path().join("part-00000.bin");
    tofile_u32(&path, &tokens);
    let shards = TokenShards::glob_as(dir.path().join("part-*.bin"), RawTokens::U32).unwrap();
    assert_eq!((shards.tokens(), shards.format()), (2000, ShardFormat::U32));
    let sampler = shards.clone().windows(101).build().unwrap();
    let want: Vec<Vec<u32>> = sampler
        .epoch(0)
        .map(|w| tokens[w.start()..w.start() + w.len()].to_vec())
        .collect();
    let read: Vec<Vec<u32>> = sampler.epoch(0).map(|w| w.to_vec().unwrap()).collect();
    assert_eq!(read, want);
    for ty in [TokenType::U32, TokenType::I32, TokenType::I64] {
        shards.check_token_type(ty).unwrap();
        let loader = Loader::builder(shards.clone().decode_as(ty).windows(101).build().unwrap())
            .batch_size(4)
            .epochs(1)
            .build()
            .unwrap();
        let got: Vec<u8> = batches(loader).into_iter().flat_map(|b| b.2).collect();
        let expected: Vec<u8> = want[..want.len() / 4 * 4]
            .iter()
            .flatten()
            .flat_map(|&t| match ty {
                TokenType::U32 => t.to_le_bytes().to_vec(),
                TokenType::I32 => i32::try_from(t).unwrap().to_le_bytes().to_vec(),
                _ => i64::from(t).to_le_bytes().to_vec(),
            })
            .collect();
        assert!(got == expected, "{ty}: the batches differ");
    }
    assert!(shards.check_token_type(TokenType::U16).is_err());
}

#[test]
fn documents_over_raw_files_are_the_documents_of_the_same_tokens_in_llmc_shards() {
    let dir = TempDir::new().unwrap();
    let (raw, llmc) = both_u16(dir.path(), &[20_000, 9_000], 50256);
    for order in [DocOrder::Sequential, DocOrder::Shuffled { seed: 4 }] {
        let run = |shards: TokenShards, rank: u64| {
            let docs = Documents::builder(shards)
                .bos(50256)
                .tokens_per_batch(256)
                .max_seq_len(128)
                .order(order)
                .build()
                .unwrap();
            let loader = Loader::builder(docs).rank(rank).world_size(2).epochs(1);
            batches(loader.build().unwrap())
        };
        // The raw files' steps counted, the llm.c shards' compared with them.
        let label = format!("{order:?}");
        same_steps_on_each_rank(&label, &label, 20, |rank| {
            let from_raw = run(TokenShards::open_as(&raw, RawTokens::U16).unwrap(), rank);
            let from_llmc = run(TokenShards::open(&llmc).unwrap(), rank);
            (from_llmc, from_raw)
        });
    }
}

#[test]
fn documents_over_raw_u32_files_start_at_bos_and_resume_from_their_state() {
    let dir = TempDir::new().unwrap();
    // OLMo-like: u32 tokens above u16's range, documents starting at 100257.
    let bos = 100_257u32;
    let mut tokens = random_tokens_u32(12_000, 8);
    for at in (0..tokens.len()).step_by(97) {
        tokens[at] = bos;
    }
    let path = dir.path().join("olmo.npy.raw");
    tofile_u32(&path, &tokens);
    let docs = Documents::builder(TokenShards::open_as([&path], RawTokens::U32).unwrap())
        .bos(bos)
        .tokens_per_batch(200)
        .max_seq_len(200)
        .token_type(TokenType::U32)
        .build()
        .unwrap();
    let mut loader = Loader::builder(docs.clone()).build().unwrap();
    let first = loader.pop().unwrap().unwrap();
    let inputs = first.field_bytes("inputs").unwrap();
    let got: Vec<u32> = inputs
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(got, tokens[..200]);
    first.release(Fence::Sync).unwrap();
    let rest = |loader: Loader<Documents>| first_batches(loader, 10);
    let state = State::from_text(&loader.state().to_text()).unwrap();
    let straight = rest(loader);
    let resumed = rest(Loader::builder(docs).resume(&state).build().unwrap());
    assert_eq!(resumed[0].0, Some(1));
    assert!(resumed == straight, "the resumed steps differ");
}

#[test]
fn a_mixture_mixes_raw_files_and_llmc_shards() {
    let dir = TempDir::new().unwrap();
    let (raw, llmc) = both_u16(dir.path(), &[4000], 7);
    let raw = windows(
        TokenShards::open_as(&raw, RawTokens::U16).unwrap(),
        TokenType::I32,
    );
    let llmc = windows(TokenShards::open(&llmc).unwrap(), TokenType::I32);
    let mix = Mixture::builder(vec![raw, llmc])
        .weights([0.5, 0.5])
        .build()
        .unwrap();
    let mut loader = Loader::builder(mix).batch_size(8).build().unwrap();
    let mut rows = 0;
    for _ in 0..6 {
        let b = loader.pop().unwrap().unwrap();
        assert_eq!(b.bytes().len(), 8 * 65 * 4);
        rows += b.sample_ids().len();
        b.release(Fence::Sync).unwrap();
    }
    assert_eq!(rows, 48);
    let State::Mixture(state) = loader.state() else {
        panic!("a mixture's state")
    };
    assert_eq!(state.consumed, 48);
}

#[test]
fn a_raw_state_names_its_format_and_is_refused_on_other_files() {
    let dir = TempDir::new().unwrap();
    let (raw, llmc) = both_u16(dir.path(), &[5000], 50256);
    let shards = TokenShards::open_as(&raw, RawTokens::U16).unwrap();
    let print = shards.fingerprint();
    assert_eq!(print.format, "raw-u16");
    assert_eq!(
        (print.files, print.sizes),
        (vec!["raw_000.bin".to_owned()], vec![10_000])
    );
    // The content of the file's bytes, whoever opens it: the llm.c shard's differs.
    let content = RawTokens::U16.open(&raw[0]).unwrap().content();
    assert_eq!(print.contents, [content]);
    assert_ne!(TokenShard::open(&llmc[0]).unwrap().content(), content);
    let run = |s: TokenShards| windows(s, TokenType::I32);
    let state = run(shards.clone()).checkpoint(0, 16);
    // The same tokens in an llm.c shard: another format.
    let err = run(TokenShards::open(&llmc).unwrap())
        .iter_from_checkpoint(&state)
        .unwrap_err();
    assert!(err.to_string().contains("the dataset's format"), "{err}");
    // The same name and size, other tokens: other content.
    let other = TempDir::new().unwrap();
    let path = other.path().join("raw_000.bin");
    tofile_u16(&path, &random_tokens(5000, 999));
    let err = run(TokenShards::open_as([&path], RawTokens::U16).unwrap())
        .iter_from_checkpoint(&state)
        .unwrap_err();
    assert!(
        err.to_string().contains("the content of raw_000.bin"),
        "{err}"
    );
    // The same file read as u32 tokens: another format (and a grid of other windows).
    let err = run(TokenShards::open_as(&raw, RawTokens::U32).unwrap())
        .iter_from_checkpoint(&state)
        .unwrap_err();
    assert!(err.to_string().contains("the dataset's format"), "{err}");
    // The same files: it resumes.
    assert!(run(shards).iter_from_checkpoint(&state).is_ok());
}

/// The raw problem of a file that does not open as raw tokens.
fn raw_problem(err: &Error) -> &RawProblem {
    file_problem(err)
        .format_problem::<RawProblem>()
        .unwrap_or_else(|| panic!("not a raw problem: {err}"))
}

#[test]
fn files_that_are_not_raw_tokens_of_the_type_said_are_named() {
    let dir = TempDir::new().unwrap();
    let at = |name: &str| dir.path().join(name);
    let open = |path: &Path, format: RawTokens| {
        let err = TokenShards::open_as([path], format).unwrap_err();
        match &err {
            Error::Source(SourceError::File { path: p, .. }) => assert_eq!(p, path),
            other => panic!("expected a file error naming it, got {other:?}"),
        }
        err
    };
    // A file of `len` bytes read as `raw`: no whole number of tokens, of `format`.
    let partial = |name: &str, len: u64, raw: RawTokens, format: ShardFormat| {
        std::fs::write(at(name), vec![1u8; len as usize]).unwrap();
        let err = open(&at(name), raw);
        assert_eq!(raw_problem(&err), &RawProblem::PartialToken { len, format });
        err
    };
    // An odd number of bytes is no u16 file; 6 bytes are 3 u16 tokens, not u32 ones.
    let err = partial("odd.bin", 7, RawTokens::U16, ShardFormat::U16);
    assert!(!err.to_string().contains("were they written"), "{err}");
    let err = partial("six.bin", 6, RawTokens::U32, ShardFormat::U32);
    assert!(err
        .to_string()
        .contains("whole number of u16 tokens; were they written as u16?"));
    assert!(TokenShards::open_as([at("six.bin")], RawTokens::U16).is_ok());
    // Empty, a folder, nothing, no match.
    std::fs::write(at("empty.bin"), []).unwrap();
    let err = open(&at("empty.bin"), RawTokens::U16);
    assert!(matches!(file_problem(&err), FileProblem::Empty), "{err}");
    std::fs::create_dir(at("folder")).unwrap();
    let err = open(&at("folder"), RawTokens::U16);
    assert!(
        matches!(file_problem(&err), FileProblem::IsDirectory),
        "{err}"
    );
    let none: [&Path; 0] = [];
    let err = TokenShards::open_as(none, RawTokens::U16).unwrap_err();
    assert_source_error!(err, SourceError::NoFiles);
    let err = TokenShards::glob_as(at("nothing_*.bin"), RawTokens::U16).unwrap_err();
    assert_source_error!(err, SourceError::NoMatch { .. });
    // An llm.c shard read as raw tokens: its header would be 512 "tokens".
    write_shard(at("llmc16.bin"), &[1, 2, 3]).unwrap();
    let err = open(&at("llmc16.bin"), RawTokens::U16);
    let (format, tokens) = (ShardFormat::U16, 3);
    assert_eq!(
        raw_problem(&err),
        &RawProblem::LlmcHeader { format, tokens }
    );
    assert!(err.to_string().contains("TokenShards::open"), "{err}");
    write_shard_u32(at("llmc32.bin"), &[1, 2, 3, 4]).unwrap();
    let err = open(&at("llmc32.bin"), RawTokens::U32);
    let (format, tokens) = (ShardFormat::U32, 4);
    assert_eq!(
        raw_problem(&err),
        &RawProblem::LlmcHeader { format, tokens }
    );
    // A .npy array: its header is not tokens.
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    npy.resize(128, b' ');
    npy.extend(std::iter::repeat_n(0u8, 64));
    std::fs::write(at("arr.npy"), &npy).unwrap();
    let err = open(&at("arr.npy"), RawTokens::U16);
    assert_eq!(raw_problem(&err), &RawProblem::NpyHeader { major: 1 });
    // Tokens that only begin like a header are tokens: the magic and version, but a count
    // that does not fit the file.
    let mut tokens = vec![0u32; 600];
    tokens[..3].copy_from_slice(&[SHARD_MAGIC as u32, 1, 5]);
    tofile_u32(&at("like_a_header.bin"), &tokens);
    let shards = TokenShards::open_as([at("like_a_header.bin")], RawTokens::U32).unwrap();
    assert_eq!(shards.tokens(), 600);
}

#[test]
fn a_raw_file_changed_under_the_loader_is_a_read_error_naming_it() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("tokens.bin");
    let tokens = random_tokens(4000, 5);
    tofile_u16(&path, &tokens);
    let shards = TokenShards::open_as([&path], RawTokens::U16).unwrap();
    let sampler = shards.windows(65).build().unwrap();
    // Cut to half after it was opened: the first batch that reads it fails, naming it.
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(4000).unwrap();
    let mut loader = Loader::builder(sampler).batch_size(4).build().unwrap();
    let err = loader.pop().unwrap_err();
    match &err {
        Error::Source(
            e @ SourceError::Read {
                path: p, problem, ..
            },
        ) => {
            assert_eq!(p, &path);
            assert!(
                matches!(
                    problem,
                    ReadProblem::Shrank {
                        len: 4000,
                        opened: 8000
                    }
                ),
                "{err}"
            );
            assert!(!e.is_retryable());
        }
        other => panic!("expected a read error, got {other:?}"),
    }
}

#[test]
fn documents_refuse_a_raw_file_of_more_tokens_than_an_index_places() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("huge.bin");
    // 2^32 u16 tokens, sparse: one more than a document index places.
    let tokens = 1u64 << 32;
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(tokens * 2).unwrap();
    drop(file);
    let shards = TokenShards::open_as([&path], RawTokens::U16).unwrap();
    assert_eq!(shards.tokens(), tokens);
    // Windows need no index.
    assert_eq!(
        shards.clone().windows(1025).build().unwrap().epoch_len(),
        tokens / 1024 - 1
    );
    // bos 1 is nowhere in the zeros: without the check, a scan of every token finds none.
    let err = Documents::builder(shards)
        .bos(1)
        .tokens_per_batch(8)
        .max_seq_len(8)
        .build()
        .unwrap_err();
    let most = u64::from(u32::MAX);
    assert_eq!(
        file_problem(&err).format_problem::<DocumentProblem>(),
        Some(&DocumentProblem::TooManyTokens { tokens, most })
    );
    assert!(err.to_string().contains("huge.bin"), "{err}");
}
