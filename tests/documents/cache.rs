//! The index cache across runs (`DocumentsBuilder::index_cache`): a second run loads what
//! the first scanned and walks the same; a shard rewritten (even to the same size and
//! modification time) or a damaged index file is scanned again; a cache folder that cannot
//! be written is no error.

use std::path::{Path, PathBuf};

use pinring::source::{write_shard, Cursor, DocOrder, Documents, TokenShards};
use tempfile::TempDir;

/// A shard of documents of `len` tokens, the first starting at `offset`.
fn shard(path: &Path, tokens: usize, len: usize, offset: usize) {
    let t: Vec<u16> = (0..tokens)
        .map(|i| {
            if i % len == offset {
                7
            } else {
                100 + (i % 50) as u16
            }
        })
        .collect();
    write_shard(path, &t).unwrap();
}

fn docs(paths: &[PathBuf], cache: &Path, order: DocOrder) -> Documents {
    Documents::builder(TokenShards::open(paths).unwrap())
        .bos(7)
        .tokens_per_batch(19)
        .max_seq_len(64)
        .order(order)
        .index_cache(cache)
        .build()
        .unwrap()
}

/// A temp folder holding one shard, `t.bin` (documents of 10 tokens), and the path of a
/// cache folder in it (not made yet): (the folder, the cache, the shard).
fn one_shard() -> (TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("t.bin");
    shard(&path, 1000, 10, 0);
    let cache = dir.path().join("cache");
    (dir, cache, path)
}

/// How many of `paths` a fresh sequential run over `cache` loads from it.
fn from_cache(paths: &[PathBuf], cache: &Path) -> u64 {
    docs(paths, cache, DocOrder::Sequential)
        .index_stats()
        .from_cache
}

/// The first `n` steps' starts and piece ids.
fn walk(docs: &Documents, n: usize) -> Vec<(Cursor, Vec<u64>)> {
    docs.iter()
        .take(n)
        .map(|s| (s.start().unwrap(), s.pieces().map(|p| p.doc).collect()))
        .collect()
}

/// Sets `path`'s modification time back to `modified` (a rewrite the time does not show).
fn set_modified(path: &Path, modified: std::time::SystemTime) {
    std::fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(modified)
        .unwrap();
}

/// The names of the index files in `dir`, sorted (not the lock files beside them,
/// `.NAME.lock`, nor temporary files).
fn names(dir: &Path) -> Vec<String> {
    let mut n: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    n.sort();
    n
}

#[test]
fn a_second_run_loads_what_the_first_scanned() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    let paths: Vec<PathBuf> = (0..3)
        .map(|s| dir.path().join(format!("t{s}.bin")))
        .collect();
    for p in &paths {
        shard(p, 1000, 10, 0);
    }
    let order = DocOrder::Shuffled { seed: 5 };
    let first = docs(&paths, &cache, order);
    assert_eq!(first.index_stats().from_cache, 0);
    let files = names(&cache);
    assert_eq!(files.len(), 3, "{files:?}");
    assert!(
        files
            .iter()
            .all(|f| f.starts_with('t') && f.ends_with(".bos7.index")),
        "{files:?}"
    );
    let second = docs(&paths, &cache, order);
    let stats = second.index_stats();
    assert_eq!((stats.indexed, stats.from_cache), (3, 3), "{stats:?}");
    assert_eq!(walk(&first, 40), walk(&second, 40));
    // Another bos is another index.
    let other = Documents::builder(TokenShards::open(&paths).unwrap())
        .bos(101)
        .tokens_per_batch(19)
        .max_seq_len(64)
        .order(order)
        .index_cache(&cache)
        .build()
        .unwrap();
    assert_eq!(other.index_stats().from_cache, 0);
    assert_eq!(names(&cache).len(), 6);
}

#[test]
fn a_rewritten_shard_is_scanned_again() {
    let (_dir, cache, path) = one_shard();
    let paths = [path.clone()];
    docs(&paths, &cache, DocOrder::Sequential);
    // Rewritten to another size: another key.
    shard(&path, 1200, 10, 0);
    assert_eq!(from_cache(&paths, &cache), 0);
    assert_eq!(from_cache(&paths, &cache), 1);
    // Rewritten to the same size with its modification time set back: the documents
    // moved by one token, which the sampled starts show.
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    shard(&path, 1200, 10, 1);
    set_modified(&path, modified);
    let docs = docs(&paths, &cache, DocOrder::Sequential);
    assert_eq!(docs.index_stats().from_cache, 0);
    let first = docs.iter().next().unwrap();
    assert_eq!(first.pieces().next().unwrap().start, 1, "the new walk");
}

#[test]
fn a_damaged_index_file_is_not_trusted() {
    let (_dir, cache, path) = one_shard();
    let paths = [path];
    let clean = walk(&docs(&paths, &cache, DocOrder::Sequential), 10);
    let file = cache.join(&names(&cache)[0]);
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.len() - 20;
    bytes[at] ^= 1; // a position
    std::fs::write(&file, &bytes).unwrap();
    let again = docs(&paths, &cache, DocOrder::Sequential);
    assert_eq!(again.index_stats().from_cache, 0);
    assert_eq!(walk(&again, 10), clean);
    // Rewritten whole: trusted again.
    assert_eq!(from_cache(&paths, &cache), 1);
    // A truncated file.
    std::fs::write(&file, &bytes[..10]).unwrap();
    assert_eq!(from_cache(&paths, &cache), 0);
    assert_eq!(
        names(&cache).len(),
        1,
        "no temporary file left: {:?}",
        names(&cache)
    );
}

#[test]
fn a_cache_folder_that_cannot_be_written_is_no_error() {
    let (dir, _, path) = one_shard();
    // A file where the folder should be.
    let cache = dir.path().join("not-a-folder");
    std::fs::write(&cache, b"x").unwrap();
    let docs = docs(&[path], &cache, DocOrder::Sequential);
    assert_eq!(docs.index_stats().from_cache, 0);
    assert_eq!(docs.iter().take(3).count(), 3);
}

/// The reviewer's case behind the packer's check: an index the cache trusts (same path,
/// size and modification time, every sampled start still a `bos`) that no longer fits the
/// shard — a document start rewritten in place, the time set back. Each piece the packer
/// reads must start with `bos`: the step that meets it is a `SourceError` from `pop` naming
/// the cache entry (after the steps before it, which are right), the entry is removed, and
/// the next build scans the shard and packs what it holds.
#[test]
fn a_cached_index_that_does_not_fit_the_shard_is_an_error_naming_it_and_is_removed() {
    use pinring::source::{DocumentProblem, FileProblem, SourceError};
    use pinring::{Error, Fence, Pipeline};

    let (_dir, cache, path) = one_shard();
    let paths = [path.clone()];
    docs(&paths, &cache, DocOrder::Sequential);
    let entry = cache.join(&names(&cache)[0]);
    // 100 documents of 10 tokens; the cache samples documents 0, 6, 13, ... 99: document
    // 3 (token 30) is not among them. Its bos becomes an ordinary token.
    let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
    let mut tokens: Vec<u16> = (0..1000)
        .map(|i| {
            if i % 10 == 0 {
                7
            } else {
                100 + (i % 50) as u16
            }
        })
        .collect();
    tokens[30] = 130;
    write_shard(&path, &tokens).unwrap();
    set_modified(&path, modified);
    let source = docs(&paths, &cache, DocOrder::Sequential);
    assert_eq!(source.index_stats().from_cache, 1, "the cache trusts it");
    let config = source.config().decode_threads(1).build().unwrap();
    let mut pipeline = Pipeline::new(config, source.decoder(), source.iter()).unwrap();
    // Step 0 packs documents 0 and 1 (tokens 0..20): right.
    let batch = pipeline.pop().unwrap().expect("step 0");
    let want: Vec<i64> = tokens[..20].iter().map(|&t| i64::from(t)).collect();
    assert_eq!(crate::field_values::values(&batch, "tokens"), want);
    batch.release(Fence::Sync).map_err(|e| e.error).unwrap();
    // Step 1 packs documents 2 and 3: document 3 does not start with bos.
    let err = match pipeline.pop() {
        Err(e) => e,
        Ok(b) => panic!(
            "step 1 was delivered from an index that does not fit: {:?}",
            b.map(|b| b.seq())
        ),
    };
    let Error::Source(SourceError::File { path: p, problem }) = &err else {
        panic!("expected a source error naming the shard, got {err:?}")
    };
    assert_eq!(p, &path);
    assert_eq!(
        problem.format_problem::<DocumentProblem>(),
        Some(&DocumentProblem::NotADocumentStart {
            at: 30,
            found: 130,
            bos: 7,
            cache: Some(entry.clone()),
        }),
        "{err}"
    );
    assert!(matches!(problem, FileProblem::Format(_)));
    let text = err.to_string();
    assert!(
        text.contains(&*entry.to_string_lossy()) && text.contains("removed"),
        "{text}"
    );
    assert!(!entry.exists(), "the entry is removed from the cache");
    drop(pipeline);
    // The next build scans the shard: document 3 is part of document 2 now.
    let again = docs(&paths, &cache, DocOrder::Sequential);
    assert_eq!(again.index_stats().from_cache, 0);
    let step1: Vec<u64> = again
        .iter()
        .nth(1)
        .unwrap()
        .pieces()
        .map(|p| p.start)
        .collect();
    assert_eq!(step1, [20], "{step1:?}");
}
