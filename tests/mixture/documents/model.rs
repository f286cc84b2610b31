//! An independent model of a mixture of packed documents, written from the contract: the
//! global document sequence (the blend rule over the weights' history — pinring's public
//! `Blend`, whose bound has tests of its own — and each source's own walk by count: its
//! documents shard by shard, or its shuffled permutation per epoch, epoch after epoch),
//! the stop rules, and the packing of that sequence into steps of every rank.

use std::collections::HashMap;

use pinring::source::{mix64, Blend, Stop};

use super::data::{Data, ModelOrder, Span};

/// One piece of a step: its source and its span of that source's shard.
pub type ModelPiece = (u16, Span);

/// A mixture's sources and seed.
#[derive(Debug, Clone)]
pub struct MixModel {
    pub sources: Vec<(Data, ModelOrder)>,
    pub seed: u64,
    /// Each source's epochs as whole documents, once made.
    epochs: HashMap<(usize, u64), Vec<Span>>,
}

/// One step: every rank's pieces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelStep {
    pub step: u64,
    pub ranks: Vec<Vec<ModelPiece>>,
}

impl MixModel {
    pub fn new(sources: Vec<(Data, ModelOrder)>, seed: u64) -> Self {
        MixModel {
            sources,
            seed,
            epochs: HashMap::new(),
        }
    }

    /// Source `s`'s documents in one epoch.
    pub fn epoch_len(&self, s: usize) -> u64 {
        let data = &self.sources[s].0;
        (0..data.shards.len())
            .map(|i| data.bos_idx(i).len() as u64)
            .sum()
    }

    /// Source `s`'s epoch `e` as whole documents, in its walk's order.
    fn epoch(&mut self, s: usize, e: u64) -> &[Span] {
        let (data, order) = &self.sources[s];
        let seed = self.seed;
        self.epochs.entry((s, e)).or_insert_with(|| {
            let extent = |shard: usize, j: usize| {
                let b = data.bos_idx(shard);
                Span {
                    shard,
                    start: b[j],
                    end: b.get(j + 1).copied().unwrap_or(data.shards[shard].len()),
                }
            };
            match *order {
                ModelOrder::Sequential => (0..data.shards.len())
                    .flat_map(|shard| (0..data.bos_idx(shard).len()).map(move |j| (shard, j)))
                    .map(|(shard, j)| extent(shard, j))
                    .collect(),
                ModelOrder::Shuffled(q) => data
                    .permutation(q ^ mix64(seed), e)
                    .into_iter()
                    .map(|(shard, j)| extent(shard, j))
                    .collect(),
            }
        })
    }

    /// Document `n` of source `s`'s walk: position `n mod D` of epoch `n / D`.
    pub fn doc(&mut self, s: usize, n: u64) -> Span {
        let d = self.epoch_len(s);
        self.epoch(s, n / d)[(n % d) as usize]
    }

    /// The global document sequence — each document's source and its count in that source
    /// — under `history` (`(from, weights)`: the weights from document `from` on, the first
    /// from 0), for at most `limit` documents, or until `stop` ends it.
    pub fn sequence(
        &self,
        history: &[(u64, Vec<f64>)],
        stop: Stop,
        limit: usize,
    ) -> Vec<(u16, u64)> {
        let n = self.sources.len();
        let lens: Vec<u64> = (0..n).map(|s| self.epoch_len(s)).collect();
        let mut counts = vec![0u64; n];
        let mut out = Vec::new();
        let mut span = 0;
        let mut blend = Blend::new(&history[0].1).unwrap();
        for g in 0..limit as u64 {
            while span + 1 < history.len() && history[span + 1].0 <= g {
                span += 1;
                blend = Blend::new(&history[span].1).unwrap();
            }
            let weights = &history[span].1;
            if stop == Stop::All && (0..n).all(|s| weights[s] == 0.0 || counts[s] >= lens[s]) {
                break;
            }
            let s = blend.peek();
            if stop == Stop::First && counts[s] >= lens[s] {
                break;
            }
            blend.next();
            out.push((s as u16, counts[s]));
            counts[s] += 1;
        }
        out
    }

    /// The steps packed from `sequence`, steps `first..` for `world` ranks (`sizes(k)`: step
    /// `k`'s `(N, max_seq_len)`), until the sequence runs out inside a step (that step is
    /// dropped) or `limit` steps are made. Each rank takes the next documents until it
    /// holds `N + 1` tokens, each cut at `max_seq_len`, the last cut to fill.
    pub fn steps(
        &mut self,
        sequence: &[(u16, u64)],
        world: usize,
        sizes: &dyn Fn(u64) -> (usize, usize),
        first: u64,
        limit: usize,
    ) -> Vec<ModelStep> {
        let mut out = Vec::new();
        let mut g = 0;
        let mut k = first;
        'steps: while out.len() < limit {
            let (n, msl) = sizes(k);
            let mut ranks = vec![Vec::new(); world];
            let mut at = g;
            for pieces in ranks.iter_mut() {
                let mut cur = 0;
                while cur <= n {
                    let Some(&(s, count)) = sequence.get(at) else {
                        break 'steps;
                    };
                    at += 1;
                    let d = self.doc(usize::from(s), count);
                    let end = d.end.min(d.start + msl).min(d.start + n - cur + 1);
                    pieces.push((s, Span { end, ..d }));
                    cur += end - d.start;
                }
            }
            g = at;
            out.push(ModelStep { step: k, ranks });
            k += 1;
        }
        out
    }
}
