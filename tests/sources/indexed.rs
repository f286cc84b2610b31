//! Megatron-LM's `.bin`/`.idx`, datatrove's `.ds`/`.ds.index` and numpy's `.npy`, written
//! as their projects write them (`writers.rs`) and read through `pinring::Loader`: windows
//! batch for batch what the same tokens in llm.c shards give; documents taken from the
//! files' own indexes without a `bos` (the documents of llm.c shards with a `bos` at the
//! same starts), the `bos` walk unchanged where a `bos` is given; resume; and files that are
//! not what their format says, each named with its format's problem.

use std::path::{Path, PathBuf};

use pinring::source::{
    write_shard, write_shard_u32, Datatrove, DatatroveProblem, DocOrder, DocumentProblem,
    Documents, Megatron, MegatronProblem, Npy, NpyProblem, Order, RawTokens, Sampler, Segmented,
    ShardFormat, SourceError, TokenFileFormat, TokenShards, TokenType, FILE_INDEX_BOS,
};
use pinring::{Error, Fence, Loader, State};
use tempfile::TempDir;

use crate::helpers::{file_problem, first_batches, random_tokens_u32, same_steps_on_each_rank};
use crate::writers::{datatrove, npy, MegatronWriter};

const BOS: u32 = 7;

/// Documents of 20 to 200 random tokens below `top`, each starting with [`BOS`] and
/// holding no other.
fn documents(n: usize, seed: u64, top: u32) -> Vec<Vec<u32>> {
    let lens = random_tokens_u32(n, seed);
    (0..n)
        .map(|d| {
            let len = 20 + (lens[d] % 181) as usize;
            let mut doc: Vec<u32> = random_tokens_u32(len, seed * 1000 + d as u64)
                .into_iter()
                .map(|t| 8 + t % (top - 8))
                .collect();
            doc[0] = BOS;
            doc
        })
        .collect()
}

/// The documents as an llm.c shard (of `u16` tokens if `narrow`).
fn llmc(path: &Path, docs: &[Vec<u32>], narrow: bool) -> PathBuf {
    let tokens: Vec<u32> = docs.concat();
    if narrow {
        let t: Vec<u16> = tokens.iter().map(|&t| t as u16).collect();
        write_shard(path, &t).unwrap();
    } else {
        write_shard_u32(path, &tokens).unwrap();
    }
    path.to_owned()
}

/// The documents as a Megatron dataset of dtype `code`, each document `per_doc` sequences.
fn megatron(prefix: &Path, docs: &[Vec<u32>], code: u8, per_doc: usize) -> PathBuf {
    let mut w = MegatronWriter::new(prefix, code);
    for doc in docs {
        let n = doc.len();
        let mut lengths = vec![n / per_doc; per_doc];
        lengths[0] += n % per_doc;
        w.add_document(doc, &lengths);
    }
    w.finalize()
}

fn windows(shards: TokenShards) -> Sampler<TokenShards> {
    shards
        .decode_as(TokenType::I64)
        .windows(65)
        .order(Order::Shuffled { seed: 3 })
        .build()
        .unwrap()
}

fn window_batches(shards: TokenShards) -> Vec<(Option<u64>, Vec<u64>, Vec<u8>)> {
    first_batches(
        Loader::builder(windows(shards))
            .batch_size(4)
            .epochs(1)
            .build()
            .unwrap(),
        usize::MAX,
    )
}

#[test]
fn windows_of_every_format_are_the_llmc_shards_of_the_same_tokens() {
    let dir = TempDir::new().unwrap();
    let at = |name: &str| dir.path().join(name);
    let (narrow, wide) = (documents(40, 1, 60_000), documents(40, 2, 1 << 30));
    let llmc16 = TokenShards::open([llmc(&at("n.bin"), &narrow, true)]).unwrap();
    let llmc32 = TokenShards::open([llmc(&at("w.bin"), &wide, false)]).unwrap();
    let (want16, want32) = (window_batches(llmc16), window_batches(llmc32));
    assert!(want16.len() > 10);
    let cases: Vec<(&str, PathBuf, Box<dyn TokenFileFormat>, bool)> = vec![
        (
            "megatron u16",
            megatron(&at("m16"), &narrow, 8, 1),
            Box::new(Megatron),
            true,
        ),
        (
            "megatron i32",
            megatron(&at("m32"), &wide, 4, 3),
            Box::new(Megatron),
            false,
        ),
        (
            "datatrove u16",
            datatrove(&at("d16.ds"), &narrow, 2),
            Box::new(Datatrove),
            true,
        ),
        (
            "datatrove u32",
            datatrove(&at("d32.ds"), &wide, 4),
            Box::new(Datatrove),
            false,
        ),
    ];
    for (what, path, format, is_narrow) in cases {
        let shards = TokenShards::open_as([&path], &*format).unwrap();
        let width = if is_narrow {
            ShardFormat::U16
        } else {
            ShardFormat::U32
        };
        assert_eq!(shards.format(), width, "{what}");
        assert!(shards.shards()[0].has_document_index(), "{what}");
        let want = if is_narrow { &want16 } else { &want32 };
        assert!(
            &window_batches(shards) == want,
            "{what}: the batches differ"
        );
    }
    // A Megatron pair by its .idx or its prefix opens the same.
    for name in ["m16.idx", "m16"] {
        let shards = TokenShards::open_as([at(name)], Megatron).unwrap();
        assert_eq!(shards.shards()[0].path(), at("m16.bin"));
        assert_eq!(
            shards.shards()[0].index_path(),
            Some(at("m16.idx").as_path())
        );
    }
    // .npy of each token dtype and header version.
    let flat16: Vec<u8> = narrow
        .concat()
        .iter()
        .flat_map(|&t| (t as u16).to_le_bytes())
        .collect();
    let flat32: Vec<u8> = wide
        .concat()
        .iter()
        .flat_map(|&t| t.to_le_bytes())
        .collect();
    for major in [1, 2, 3] {
        for (descr, data, want) in [
            ("<u2", &flat16, &want16),
            ("<u4", &flat32, &want32),
            ("<i4", &flat32, &want32),
        ] {
            let path = at(&format!("a{major}{}.npy", &descr[1..]));
            let n = data.len() / if descr == "<u2" { 2 } else { 4 };
            npy(&path, descr, &format!("({n},)"), major, data);
            let shards = TokenShards::open_as([&path], Npy).unwrap();
            assert!(!shards.shards()[0].has_document_index());
            assert!(
                &window_batches(shards) == want,
                "npy {descr} v{major}: the batches differ"
            );
        }
    }
}

fn docs_of(shards: TokenShards, bos: Option<u32>, order: DocOrder) -> Documents {
    let b = Documents::builder(shards)
        .tokens_per_batch(255)
        .max_seq_len(128)
        .order(order);
    let b = match bos {
        Some(bos) => b.bos(bos),
        None => b,
    };
    b.build().unwrap()
}

fn doc_batches(docs: Documents, rank: u64) -> Vec<(Option<u64>, Vec<u64>, Vec<u8>)> {
    let loader = Loader::builder(docs)
        .rank(rank)
        .world_size(2)
        .epochs(1)
        .build()
        .unwrap();
    first_batches(loader, usize::MAX)
}

#[test]
fn documents_without_bos_are_the_files_own_and_match_a_bos_walk_at_the_same_starts() {
    let dir = TempDir::new().unwrap();
    let at = |name: &str| dir.path().join(name);
    let narrow = [documents(60, 3, 60_000), documents(45, 4, 60_000)];
    let wide = [documents(50, 5, 1 << 30), documents(50, 6, 1 << 30)];
    let open_llmc = |docs: &[Vec<Vec<u32>>; 2], name: &str, n: bool| {
        let paths = [
            llmc(&at(&format!("{name}0.bin")), &docs[0], n),
            llmc(&at(&format!("{name}1.bin")), &docs[1], n),
        ];
        TokenShards::open(paths).unwrap()
    };
    let (llmc16, llmc32) = (
        open_llmc(&narrow, "l16_", true),
        open_llmc(&wide, "l32_", false),
    );
    // Each format's two files of the same documents as the llm.c pair's.
    let megatron_pair = |names: [&str; 2], docs: &[Vec<Vec<u32>>; 2], code: u8, per_doc| {
        let paths = [0, 1].map(|i| megatron(&at(names[i]), &docs[i], code, per_doc));
        TokenShards::open_as(paths, Megatron).unwrap()
    };
    let datatrove_pair = |names: [&str; 2], docs: &[Vec<Vec<u32>>; 2], token_size| {
        let paths = [0, 1].map(|i| datatrove(&at(names[i]), &docs[i], token_size));
        TokenShards::open_as(paths, Datatrove).unwrap()
    };
    let cases: Vec<(&str, TokenShards, &TokenShards)> = vec![
        (
            "megatron u16",
            megatron_pair(["m16a", "m16b"], &narrow, 8, 1),
            &llmc16,
        ),
        // Documents of several sequences (Megatron's --split-sentences): a document is
        // its sequences together.
        (
            "megatron i32, 3 sequences a document",
            megatron_pair(["m32a", "m32b"], &wide, 4, 3),
            &llmc32,
        ),
        (
            "datatrove u16",
            datatrove_pair(["d16a.ds", "d16b.ds"], &narrow, 2),
            &llmc16,
        ),
        (
            "datatrove u32",
            datatrove_pair(["d32a.ds", "d32b.ds"], &wide, 4),
            &llmc32,
        ),
    ];
    for (what, shards, llmc) in cases {
        for order in [DocOrder::Sequential, DocOrder::Shuffled { seed: 9 }] {
            let from_index = docs_of(shards.clone(), None, order);
            assert_eq!(from_index.bos(), FILE_INDEX_BOS);
            let from_bos = docs_of(llmc.clone(), Some(BOS), order);
            same_steps_on_each_rank(what, &format!("{what}, {order:?}"), 10, |rank| {
                (
                    doc_batches(from_index.clone(), rank),
                    doc_batches(from_bos.clone(), rank),
                )
            });
        }
    }
}

#[test]
fn with_bos_given_documents_are_the_bos_walk_whatever_the_index_says() {
    let dir = TempDir::new().unwrap();
    let docs = documents(80, 7, 60_000);
    let llmc = TokenShards::open([llmc(&dir.path().join("l.bin"), &docs, true)]).unwrap();
    // Megatron documents of 20 bos documents each: its index places 4 documents.
    let mut w = MegatronWriter::new(&dir.path().join("four"), 8);
    for group in docs.chunks(20) {
        let lengths: Vec<usize> = group.iter().map(Vec::len).collect();
        w.add_document(&group.concat(), &lengths);
    }
    let shards = TokenShards::open_as([w.finalize()], Megatron).unwrap();
    let order = DocOrder::Sequential;
    let scanned = doc_batches(docs_of(shards.clone(), Some(BOS), order), 0);
    assert!(
        scanned == doc_batches(docs_of(llmc, Some(BOS), order), 0),
        "the bos walk differs"
    );
    // Without bos: the index's 4 documents, each cut at max_seq_len (128): 2 steps of 256
    // tokens on each of 2 ranks, 1 for rank 0.
    let from_index = doc_batches(docs_of(shards, None, order), 0);
    assert!(scanned.len() > 10);
    assert_eq!(from_index.len(), 1);
}

#[test]
fn documents_from_an_index_resume_from_their_state_and_refuse_another_index() {
    let dir = TempDir::new().unwrap();
    let docs = documents(120, 8, 60_000);
    let prefix = dir.path().join("corpus_text_document");
    let shards = TokenShards::open_as([megatron(&prefix, &docs, 8, 1)], Megatron).unwrap();
    assert_eq!(shards.fingerprint().format, "megatron-u16");
    let source = docs_of(shards, None, DocOrder::Shuffled { seed: 2 });
    let mut loader = Loader::builder(source.clone()).build().unwrap();
    for _ in 0..5 {
        loader.pop().unwrap().unwrap().release(Fence::Sync).unwrap();
    }
    let state = State::from_text(&loader.state().to_text()).unwrap();
    let straight = first_batches(loader, 8);
    let resumed = first_batches(Loader::builder(source).resume(&state).build().unwrap(), 8);
    assert_eq!(resumed[0].0, Some(5));
    assert!(resumed == straight, "the resumed steps differ");
    // The same .bin, another .idx (two sequences a document): the content differs.
    std::fs::remove_file(prefix.with_extension("idx")).unwrap();
    megatron(&prefix, &docs, 8, 2);
    let other = docs_of(
        TokenShards::open_as([&prefix], Megatron).unwrap(),
        None,
        DocOrder::Shuffled { seed: 2 },
    );
    let err = Loader::builder(other).resume(&state).build().unwrap_err();
    assert!(err.to_string().contains("content"), "{err}");
}

#[test]
fn a_source_of_files_with_and_without_an_index_needs_bos() {
    let dir = TempDir::new().unwrap();
    let docs = documents(30, 9, 60_000);
    let m = megatron(&dir.path().join("m"), &docs, 8, 1);
    let l = llmc(&dir.path().join("l.bin"), &docs, true);
    let (mut shards, other) = (
        TokenShards::open_as([&m], Megatron).unwrap(),
        TokenShards::open([&l]).unwrap(),
    );
    shards =
        TokenShards::from_shards(shards.shards().iter().chain(other.shards()).cloned()).unwrap();
    let err = Documents::builder(shards.clone())
        .tokens_per_batch(63)
        .max_seq_len(64)
        .build()
        .unwrap_err();
    assert_eq!(
        file_problem(&err).format_problem::<DocumentProblem>(),
        Some(&DocumentProblem::NoDocumentIndex),
        "{err}"
    );
    assert_source_error!(err, SourceError::File { path, .. } if path == &l);
    Documents::builder(shards.clone())
        .bos(BOS)
        .tokens_per_batch(63)
        .max_seq_len(64)
        .build()
        .unwrap();
    let err = Documents::builder(shards)
        .bos(FILE_INDEX_BOS)
        .tokens_per_batch(63)
        .max_seq_len(64)
        .build()
        .unwrap_err();
    assert!(
        matches!(
            file_problem(&err).format_problem::<DocumentProblem>(),
            Some(DocumentProblem::ReservedBos { .. })
        ),
        "{err}"
    );
}

/// The error opening `path` as `format`, checked to name `named`.
fn open_err(path: &Path, format: impl TokenFileFormat, named: &Path) -> Error {
    let err = TokenShards::open_as([path], format).unwrap_err();
    assert_source_error!(err, SourceError::File { path, .. } if path == named);
    err
}

fn megatron_problem(err: &Error) -> MegatronProblem {
    file_problem(err)
        .format_problem::<MegatronProblem>()
        .unwrap_or_else(|| panic!("{err}"))
        .clone()
}

/// Megatron's `.idx` of `docs` (u16, one sequence a document), edited by `edit`.
fn edited_idx(dir: &Path, name: &str, edit: impl FnOnce(&mut Vec<u8>)) -> (PathBuf, PathBuf) {
    let docs = documents(3, 10, 60_000);
    let bin = megatron(&dir.join(name), &docs, 8, 1);
    let idx = bin.with_extension("idx");
    let mut bytes = std::fs::read(&idx).unwrap();
    edit(&mut bytes);
    std::fs::write(&idx, bytes).unwrap();
    (bin, idx)
}

#[test]
fn megatron_files_that_are_not_what_the_format_says_are_named() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let problem = |name: &str, edit: fn(&mut Vec<u8>)| {
        let (bin, idx) = edited_idx(d, name, edit);
        megatron_problem(&open_err(&bin, Megatron, &idx))
    };
    assert_eq!(
        problem("short", |b| b.truncate(20)),
        MegatronProblem::TruncatedHeader { len: 20 }
    );
    assert!(
        matches!(problem("magic", |b| b[0] = b'X'), MegatronProblem::BadMagic { found } if found[..] == b"XMIDIDX\0\0"[..])
    );
    assert_eq!(
        problem("version", |b| b[9] = 2),
        MegatronProblem::BadVersion { found: 2 }
    );
    assert_eq!(
        problem("code0", |b| b[17] = 0),
        MegatronProblem::UnknownDtype { code: 0 }
    );
    assert_eq!(
        problem("float", |b| b[17] = 7),
        MegatronProblem::NotIntegerTokens {
            code: 7,
            name: "float32"
        }
    );
    assert_eq!(
        problem("int64", |b| b[17] = 5),
        MegatronProblem::UnsupportedTokenType {
            code: 5,
            name: "int64"
        }
    );
    let p = problem("cut", |b| b.truncate(b.len() - 3));
    assert!(
        matches!(
            p,
            MegatronProblem::IndexSize {
                sequences: 3,
                documents: 4,
                ..
            }
        ),
        "{p:?}"
    );
    // The .bin's size against the last sequence: named on the .bin.
    let (bin, _) = edited_idx(d, "bin", |_| {});
    let len = std::fs::metadata(&bin).unwrap().len();
    std::fs::write(&bin, vec![0u8; len as usize + 2]).unwrap();
    let err = open_err(&bin, Megatron, &bin);
    assert_eq!(
        megatron_problem(&err),
        MegatronProblem::BinSize {
            len: len + 2,
            expected: len,
            width: ShardFormat::U16
        }
    );
    // Multimodal: modes present and all text opens; an image sequence does not.
    let docs = documents(3, 11, 60_000);
    for (name, mode) in [("mm_text", 0), ("mm_image", 1)] {
        let mut w = MegatronWriter::new(&d.join(name), 8);
        w.modes = Some(Vec::new());
        for doc in &docs {
            w.add_document(doc, &[doc.len()]);
        }
        if let Some(m) = &mut w.modes {
            m[2] = mode;
        }
        let bin = w.finalize();
        let opened = TokenShards::open_as([&bin], Megatron);
        match mode {
            0 => assert_eq!(opened.unwrap().tokens(), docs.concat().len() as u64),
            _ => assert_eq!(
                megatron_problem(&opened.unwrap_err()),
                MegatronProblem::NotText {
                    sequence: 2,
                    mode: 1
                }
            ),
        }
    }
    // What documents read and check: the offsets and the document indices (the windows
    // never read them).
    let doc_problem = |name: &str, edit: fn(&mut Vec<u8>)| {
        let (bin, idx) = edited_idx(d, name, edit);
        let shards = TokenShards::open_as([&bin], Megatron).unwrap();
        let err = Documents::builder(shards)
            .tokens_per_batch(15)
            .max_seq_len(16)
            .build()
            .unwrap_err();
        assert_source_error!(err, SourceError::File { path, .. } if path == &idx);
        megatron_problem(&err)
    };
    // Header 34, lengths 12, pointers 24, document indices 32.
    let p = doc_problem("ptr", |b| b[34 + 12 + 8] ^= 1);
    assert!(
        matches!(p, MegatronProblem::Pointer { sequence: 1, .. }),
        "{p:?}"
    );
    // A first document index past 0, one that goes down: the document and its index.
    for (p, document, index) in [
        (doc_problem("doc0", |b| b[34 + 36] = 1), 0, 1),
        (doc_problem("down", |b| b[34 + 36 + 16] = 0), 2, 0),
    ] {
        assert!(
            matches!(
                p,
                MegatronProblem::DocumentIndex { document: d, index: i, .. }
                    if d == document && i == index
            ),
            "{p:?}"
        );
    }
    let p = doc_problem("past", |b| b[34 + 36 + 24] = 9);
    assert!(
        matches!(
            p,
            MegatronProblem::DocumentIndex {
                document: 3,
                index: 9,
                sequences: 3
            }
        ),
        "{p:?}"
    );
    assert!(
        p.to_string().contains("rise to the sequence count 3"),
        "{p}"
    );
    // The pair's other half missing: the error names it.
    std::fs::write(d.join("lone.bin"), [0u8; 4]).unwrap();
    let err = open_err(&d.join("lone.bin"), Megatron, &d.join("lone.idx"));
    assert!(err.to_string().contains("lone.idx"), "{err}");
}

#[test]
fn datatrove_files_that_are_not_what_the_format_says_are_named() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    let docs = documents(4, 12, 60_000);
    let problem = |err: &Error| {
        file_problem(err)
            .format_problem::<DatatroveProblem>()
            .unwrap_or_else(|| panic!("{err}"))
            .clone()
    };
    let ds = datatrove(&d.join("a.ds"), &docs, 2);
    let index = Datatrove::index_path(&ds);
    let tokens = docs.concat().len() as u64;
    std::fs::write(&index, [0u8; 12]).unwrap();
    assert_eq!(
        problem(&open_err(&ds, Datatrove, &index)),
        DatatroveProblem::PartialEnd { len: 12 }
    );
    // The last end says one token fewer than the .ds holds at either width.
    std::fs::write(&index, (tokens - 1).to_le_bytes()).unwrap();
    let bytes = 2 * tokens;
    assert_eq!(
        problem(&open_err(&ds, Datatrove, &ds)),
        DatatroveProblem::TokenSize {
            bytes,
            tokens: tokens - 1
        }
    );
    // Ends that go down: found when documents read them.
    let ends: Vec<u8> = [30, 20, tokens]
        .iter()
        .flat_map(|e: &u64| e.to_le_bytes())
        .collect();
    std::fs::write(&index, ends).unwrap();
    let shards = TokenShards::open_as([&ds], Datatrove).unwrap();
    let err = Documents::builder(shards)
        .tokens_per_batch(15)
        .max_seq_len(16)
        .build()
        .unwrap_err();
    assert_eq!(
        problem(&err),
        DatatroveProblem::Decreasing {
            document: 1,
            end: 20,
            previous: 30
        }
    );
    assert_source_error!(err, SourceError::File { path, .. } if path == &index);
    // No index beside the .ds.
    std::fs::remove_file(&index).unwrap();
    let err = open_err(&ds, Datatrove, &index);
    assert!(err.to_string().contains("a.ds.index"), "{err}");
}

#[test]
fn npy_files_that_are_not_a_1d_integer_token_array_are_named() {
    let dir = TempDir::new().unwrap();
    let path = dir.path().join("a.npy");
    let problem = |descr: &str, shape: &str, major: u8, data: &[u8]| {
        npy(&path, descr, shape, major, data);
        let err = open_err(&path, Npy, &path);
        file_problem(&err)
            .format_problem::<NpyProblem>()
            .unwrap_or_else(|| panic!("{err}"))
            .clone()
    };
    let data = [0u8; 16];
    assert_eq!(
        problem("<f4", "(4,)", 1, &data),
        NpyProblem::NotIntegerTokens {
            descr: "<f4".into()
        }
    );
    assert_eq!(
        problem(">u2", "(8,)", 1, &data),
        NpyProblem::BigEndian {
            descr: ">u2".into()
        }
    );
    assert_eq!(
        problem("<i8", "(2,)", 2, &data),
        NpyProblem::UnsupportedTokenType {
            descr: "<i8".into()
        }
    );
    assert_eq!(
        problem("|u1", "(16,)", 1, &data),
        NpyProblem::UnsupportedTokenType {
            descr: "|u1".into()
        }
    );
    assert_eq!(
        problem("<u2", "(2, 4)", 1, &data),
        NpyProblem::NotOneDimensional { shape: vec![2, 4] }
    );
    assert_eq!(
        problem("<u2", "()", 1, &data),
        NpyProblem::NotOneDimensional { shape: vec![] }
    );
    assert_eq!(problem("<u2", "(0,)", 3, &[]), NpyProblem::NoTokens);
    assert_eq!(
        problem("<u4", "(5,)", 1, &data),
        NpyProblem::DataSize {
            data: 16,
            tokens: 5,
            width: ShardFormat::U32
        }
    );
    npy(&path, "<u2", "(8,)", 4, &data);
    assert_eq!(
        file_problem(&open_err(&path, Npy, &path)).format_problem::<NpyProblem>(),
        Some(&NpyProblem::BadVersion { major: 4, minor: 0 })
    );
    std::fs::write(&path, b"\x93NUMPY\x01\x00\x40\x00{'descr'").unwrap();
    let err = open_err(&path, Npy, &path);
    assert!(
        matches!(
            file_problem(&err).format_problem::<NpyProblem>(),
            Some(NpyProblem::TruncatedHeader { .. })
        ),
        "{err}"
    );
    let mut bad = b"\x93NUMPY\x01\x00\x40\x00".to_vec();
    bad.extend(format!("{:<63}\n", "{'descr': '<u2', 'shape': (8,), }").as_bytes());
    bad.extend(data);
    std::fs::write(&path, bad).unwrap();
    let err = open_err(&path, Npy, &path);
    assert!(err.to_string().contains("'fortran_order'"), "{err}");
    // A raw file is no .npy; a .npy is no raw file.
    std::fs::write(&path, data).unwrap();
    let err = open_err(&path, Npy, &path);
    assert!(
        matches!(
            file_problem(&err).format_problem::<NpyProblem>(),
            Some(NpyProblem::BadMagic { .. })
        ),
        "{err}"
    );
    npy(&path, "<u2", "(8,)", 1, &data);
    assert!(TokenShards::open_as([&path], RawTokens::U16).is_err());
}

#[test]
fn a_mixture_of_documents_from_megatron_and_datatrove_indexes_packs_their_documents() {
    let dir = TempDir::new().unwrap();
    let (a, b) = (documents(80, 13, 60_000), documents(80, 14, 60_000));
    let m = TokenShards::open_as([megatron(&dir.path().join("m"), &a, 8, 2)], Megatron).unwrap();
    let d = TokenShards::open_as([datatrove(&dir.path().join("d.ds"), &b, 2)], Datatrove).unwrap();
    let mix = pinring::source::Mixture::documents([Documents::builder(m), Documents::builder(d)])
        .weights([1.0, 1.0])
        .tokens_per_batch(255)
        .max_seq_len(128)
        .build()
        .unwrap();
    let mut loader = Loader::builder(mix).build().unwrap();
    let lens: std::collections::HashSet<usize> =
        a.iter().chain(&b).map(|doc| doc.len().min(128)).collect();
    for _ in 0..5 {
        let batch = loader.pop().unwrap().unwrap();
        let cu = batch.field_as::<i32>("cu_seqlens").unwrap();
        let inputs = batch.field_as::<i32>("inputs").unwrap();
        let n = batch.step_tokens().unwrap();
        assert_eq!(n, 255);
        // Every document but the step's last (cut to fill it) is one of the files' own
        // documents, whole up to max_seq_len, starting at its bos.
        let ends: Vec<usize> = cu
            .iter()
            .map(|&e| e as usize)
            .take_while(|&e| e < n)
            .collect();
        for w in ends.windows(2) {
            assert_eq!(inputs[w[0]], BOS as i32);
            assert!(
                lens.contains(&(w[1] - w[0])),
                "a document of {} tokens",
                w[1] - w[0]
            );
        }
        batch.release(Fence::Sync).unwrap();
    }
}
