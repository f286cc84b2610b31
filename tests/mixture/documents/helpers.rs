//! What the tests of mixtures of documents share: datasets written as shards, their
//! sources and mixtures, pinring's steps as the model's pieces, and the strategies.

use std::path::{Path, PathBuf};

use pinring::source::{
    write_shard, DocOrder, DocumentMixtureBuilder, Documents, MixedDocStep, Mixture, TokenShards,
};
use proptest::prelude::*;
use tempfile::TempDir;

use super::data::{Data, ModelOrder, Span};
use super::model::{MixModel, ModelPiece};

/// The bos of the test datasets (GPT-2's).
pub const BOS: u32 = 50256;

/// A document of `len` tokens: `bos`, then tokens below 1000 that name the source.
pub fn document(len: usize, salt: u32) -> Vec<u32> {
    let mut d = vec![BOS];
    d.extend((1..len).map(|i| (i as u32 * 7 + salt * 13) % 1000));
    d
}

/// A shard of `lead` tokens before its first document, then documents of these lengths.
pub fn shard(lead: usize, lens: &[usize], salt: u32) -> Vec<u32> {
    let mut t: Vec<u32> = (0..lead as u32).map(|i| 900 + i).collect();
    for (k, &len) in lens.iter().enumerate() {
        t.extend(document(len, salt + k as u32));
    }
    t
}

/// The lengths `1 + (i * step + offset) % modulus` of documents `i` in `0..count`: 1 to
/// `modulus` tokens each, a source's own for its own `offset`.
pub fn doc_lens(count: usize, step: usize, offset: usize, modulus: usize) -> Vec<usize> {
    (0..count)
        .map(|i| 1 + (i * step + offset) % modulus)
        .collect()
}

/// Sources `0..n` of [`BOS`] documents, source `s` in the shards and the order `source(s)`
/// gives.
pub fn sources_of(
    n: usize,
    source: impl Fn(usize) -> (Vec<Vec<u32>>, ModelOrder),
) -> Vec<(Data, ModelOrder)> {
    (0..n)
        .map(|s| {
            let (shards, order) = source(s);
            (Data { shards, bos: BOS }, order)
        })
        .collect()
}

/// Writes source `s`'s shards into `dir` as `source{s}_000.bin`, ... (`u16`).
pub fn write(dir: &Path, s: usize, data: &Data) -> Vec<PathBuf> {
    data.shards
        .iter()
        .enumerate()
        .map(|(i, tokens)| {
            let path = dir.join(format!("source{s}_{i:03}.bin"));
            let t: Vec<u16> = tokens.iter().map(|&t| t as u16).collect();
            write_shard(&path, &t).unwrap();
            path
        })
        .collect()
}

/// pinring's order for the model's.
pub fn order(order: ModelOrder) -> DocOrder {
    match order {
        ModelOrder::Sequential => DocOrder::Sequential,
        ModelOrder::Shuffled(seed) => DocOrder::Shuffled { seed },
    }
}

/// The model's sources written into a temporary folder; each source's shard paths.
pub struct Written {
    pub dir: TempDir,
    pub paths: Vec<Vec<PathBuf>>,
    pub model: MixModel,
}

impl Written {
    pub fn new(sources: &[(Data, ModelOrder)], seed: u64) -> Self {
        let dir = TempDir::new().unwrap();
        let paths = sources
            .iter()
            .enumerate()
            .map(|(s, (data, _))| write(dir.path(), s, data))
            .collect();
        Written {
            dir,
            paths,
            model: MixModel::new(sources.to_vec(), seed),
        }
    }

    /// Source `s`'s builder, its order as the model's.
    pub fn source(&self, s: usize) -> pinring::source::DocumentsBuilder {
        Documents::builder(TokenShards::open(&self.paths[s]).unwrap())
            .order(order(self.model.sources[s].1))
    }

    /// A mixture builder over every source, the model's seed.
    pub fn mixture(&self) -> DocumentMixtureBuilder {
        Mixture::documents((0..self.paths.len()).map(|s| self.source(s))).seed(self.model.seed)
    }

    /// Rank `rank` of `world`'s mixture builder, with these (tokens_per_batch,
    /// max_seq_len).
    pub fn mixture_of_rank(
        &self,
        rank: u64,
        world: u64,
        sizes: (u64, u64),
    ) -> DocumentMixtureBuilder {
        self.mixture()
            .shard(rank, world)
            .tokens_per_batch(sizes.0)
            .max_seq_len(sizes.1)
    }
}

/// A step's pieces as the model's, each id checked against its document's.
pub fn pieces(written: &Written, step: &MixedDocStep) -> Vec<ModelPiece> {
    assert!(
        step.error().is_none(),
        "step {}: {:?}",
        step.step(),
        step.error()
    );
    step.pieces()
        .iter()
        .map(|p| {
            let span = Span {
                shard: p.piece.shard,
                start: p.piece.start as usize,
                end: (p.piece.start + p.piece.len) as usize,
            };
            let data = &written.model.sources[usize::from(p.source)].0;
            assert_eq!(
                p.piece.doc,
                data.id(span),
                "a piece's id is its bos's offset in its source"
            );
            (p.source, span)
        })
        .collect()
}

/// A random source: 1 to 3 shards, each a few tokens before its first document, then
/// documents of 1 to 40 tokens, a few far longer; sequential or shuffled.
pub fn source() -> impl Strategy<Value = (Data, ModelOrder)> {
    let doc_len = prop_oneof![8 => 1usize..40, 1 => 60usize..200];
    let shard_lens = (0usize..3, prop::collection::vec(doc_len, 1..25));
    let order = prop_oneof![
        Just(ModelOrder::Sequential),
        any::<u64>().prop_map(ModelOrder::Shuffled)
    ];
    (prop::collection::vec(shard_lens, 1..4), order, 0u32..50).prop_map(|(shards, order, salt)| {
        let data = Data {
            shards: shards
                .into_iter()
                .enumerate()
                .map(|(i, (lead, lens))| shard(lead, &lens, salt * 31 + i as u32))
                .collect(),
            bos: BOS,
        };
        (data, order)
    })
}

/// 1 to 3 random sources ([`source`]), and what `per_sources(n)` draws for `n` of them.
pub fn sources_and<S: Strategy>(
    per_sources: fn(usize) -> S,
) -> impl Strategy<Value = (Vec<(Data, ModelOrder)>, S::Value)> {
    prop::collection::vec(source(), 1..4).prop_flat_map(move |sources| {
        let n = sources.len();
        (Just(sources), per_sources(n))
    })
}

/// Weights for `n` sources: positive, some sources at 0 (not all).
pub fn weights(n: usize) -> impl Strategy<Value = Vec<f64>> {
    prop::collection::vec(prop_oneof![1 => Just(0.0), 4 => 0.05f64..5.0], n)
        .prop_filter("not all zero", |w| w.iter().any(|&x| x > 0.0))
}
