//! An independent model of the document walk: a line-for-line Rust port of the
//! reference generator in `python/tests/modded_reference.py` (modded-nanogpt's
//! `Shard.next_batch` and `distributed_data_generator(align_to_bos=True)`), over shards
//! held in memory, extended as the contract extends it — epochs after the last shard, and
//! the shuffled order (every document of every shard, permuted per epoch with the crate's
//! splitmix64 Fisher–Yates). Written from the reference, not from pinring's walk.

use pinring::source::{epoch_key, modded_max_docs, SplitMix64};

/// Shards of tokens (as `u32`, whatever their width on disk) and the `bos` token.
#[derive(Debug, Clone)]
pub struct Data {
    pub shards: Vec<Vec<u32>>,
    pub bos: u32,
}

/// One document piece as the reference takes it: `tokens[start:end]` of a shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub shard: usize,
    pub start: usize,
    pub end: usize,
}

/// One step of every rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelStep {
    pub step: u64,
    pub epoch: u64,
    /// Tokens of inputs per rank (`N`) and the length of cu_seqlens.
    pub tokens: usize,
    pub max_docs: usize,
    /// Each rank's pieces, in order.
    pub ranks: Vec<Vec<Span>>,
}

/// Where the model's walk stands (as pinring's cursor: shard and document, or position in
/// the epoch's permutation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct At {
    pub epoch: u64,
    pub shard: usize,
    pub doc: usize,
    pub step: u64,
}

/// How the model orders documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelOrder {
    Sequential,
    Shuffled(u64),
}

impl Data {
    /// `np.nonzero(tokens == bos_id)` of shard `s`.
    pub fn bos_idx(&self, s: usize) -> Vec<usize> {
        self.shards[s]
            .iter()
            .enumerate()
            .filter(|&(_, &t)| t == self.bos)
            .map(|(i, _)| i)
            .collect()
    }

    /// The global offset of shard `s`'s first token.
    pub fn first_token(&self, s: usize) -> u64 {
        self.shards[..s].iter().map(|t| t.len() as u64).sum()
    }

    /// A piece's document id.
    pub fn id(&self, span: Span) -> u64 {
        self.first_token(span.shard) + span.start as u64
    }

    /// The tokens of a rank's pieces, concatenated (the reference's `buf`).
    pub fn buf(&self, spans: &[Span]) -> Vec<u32> {
        spans
            .iter()
            .flat_map(|p| self.shards[p.shard][p.start..p.end].iter().copied())
            .collect()
    }

    /// Every document of every shard in order, as (shard, bos index position).
    fn all_docs(&self) -> Vec<(usize, usize)> {
        (0..self.shards.len())
            .flat_map(|s| (0..self.bos_idx(s).len()).map(move |j| (s, j)))
            .collect()
    }

    /// Shuffled epoch `epoch`'s order: dense document numbers, Fisher–Yates.
    pub fn permutation(&self, seed: u64, epoch: u64) -> Vec<(usize, usize)> {
        let docs = self.all_docs();
        let mut order: Vec<usize> = (0..docs.len()).collect();
        let mut rng = SplitMix64::new(epoch_key(seed, epoch));
        for i in (1..order.len()).rev() {
            let j = rng.below(i as u64 + 1) as usize;
            order.swap(i, j);
        }
        order.into_iter().map(|i| docs[i]).collect()
    }
}

/// `Shard.next_batch`, over a list of documents given as `(shard, start, next)` (`next`:
/// the next bos in the shard, or its size): the documents from `*i`, for `world` ranks.
fn next_batch(
    docs: &[(usize, usize, usize)],
    i: &mut usize,
    world: usize,
    num_tokens_local: usize,
    max_seq_len: usize,
) -> Option<Vec<Vec<Span>>> {
    let n = docs.len();
    let mut ranks = vec![Vec::new(); world];
    let mut idx = *i;
    for spans in ranks.iter_mut() {
        let mut cur_len = 0;
        while cur_len <= num_tokens_local {
            if idx >= n {
                return None; // "Insufficient BOS ahead; hit tail of shard."
            }
            let (shard, cur, next) = docs[idx];
            idx += 1;
            let end = next
                .min(cur + max_seq_len)
                .min(cur + num_tokens_local - cur_len + 1);
            spans.push(Span {
                shard,
                start: cur,
                end,
            });
            cur_len += end - cur;
        }
        assert_eq!(cur_len, num_tokens_local + 1);
    }
    *i = idx;
    Some(ranks)
}

/// The documents the walk goes through in `at`'s shard (sequential) or epoch (shuffled).
fn docs_of(data: &Data, order: ModelOrder, at: At) -> Vec<(usize, usize, usize)> {
    let extent = |s: usize, j: usize| {
        let b = data.bos_idx(s);
        (
            s,
            b[j],
            b.get(j + 1).copied().unwrap_or(data.shards[s].len()),
        )
    };
    match order {
        ModelOrder::Sequential => (0..data.bos_idx(at.shard).len())
            .map(|j| extent(at.shard, j))
            .collect(),
        ModelOrder::Shuffled(seed) => data
            .permutation(seed, at.epoch)
            .into_iter()
            .map(|(s, j)| extent(s, j))
            .collect(),
    }
}

/// The generator from `at`, `limit` steps (or fewer: `None` in the list when no step fits
/// in a whole epoch, and the walk stops there). `sizes(k)` is step `k`'s (N, max_seq_len);
/// `max_docs` fixed, or modded-nanogpt's rule.
pub fn steps(
    data: &Data,
    order: ModelOrder,
    world: usize,
    sizes: &dyn Fn(u64) -> (usize, usize),
    max_docs: Option<usize>,
    from: At,
    limit: usize,
) -> (Vec<ModelStep>, At, bool) {
    let mut at = from;
    let mut out = Vec::new();
    let mut docs = docs_of(data, order, at);
    while out.len() < limit {
        let (n, msl) = sizes(at.step);
        let start_epoch = at.epoch;
        loop {
            let mut i = at.doc;
            if let Some(ranks) = next_batch(&docs, &mut i, world, n, msl) {
                out.push(ModelStep {
                    step: at.step,
                    epoch: at.epoch,
                    tokens: n,
                    max_docs: max_docs.unwrap_or(modded_max_docs(n as u64) as usize),
                    ranks,
                });
                at.doc = i;
                at.step += 1;
                break;
            }
            // The shard (epoch) is exhausted: the next one (modded-nanogpt loads the next
            // file; past the last, a new epoch from the first).
            match order {
                ModelOrder::Sequential if at.shard + 1 < data.shards.len() => at.shard += 1,
                _ => {
                    at.shard = 0;
                    at.epoch += 1;
                }
            }
            at.doc = 0;
            docs = docs_of(data, order, at);
            if at.epoch > start_epoch + 1 {
                return (out, at, false);
            }
        }
    }
    (out, at, true)
}

/// The reference's `cu_seqlens` of a rank's pieces: `end_idxs[-1] -= 1`, the cumulative
/// lengths after a 0, padded with `N` to `max_docs` (`None` when they do not fit: the
/// reference's numpy assignment fails).
pub fn cu_seqlens(spans: &[Span], n: usize, max_docs: usize) -> Option<Vec<i32>> {
    let mut lens: Vec<usize> = spans.iter().map(|p| p.end - p.start).collect();
    *lens.last_mut()? -= 1;
    if lens.len() + 1 > max_docs {
        return None;
    }
    let mut cum = vec![n as i32; max_docs];
    cum[0] = 0;
    let mut c = 0;
    for (i, l) in lens.iter().enumerate() {
        c += l;
        cum[i + 1] = c as i32;
    }
    Some(cum)
}

/// The lengths of the first `rows` rows of a step whose `cu_seqlens` are `cu`: the
/// differences of consecutive boundaries (the row lengths a batch gives its pieces).
pub fn row_lens<T: Copy + Into<i64>>(cu: &[T], rows: usize) -> Vec<u32> {
    cu[1..=rows]
        .iter()
        .zip(&cu[..rows])
        .map(|(&b, &a)| (b.into() - a.into()) as u32)
        .collect()
}
