//! [`Walk`]: a mixture's global sequence walked position by position — which source each
//! position takes, and which of that source's samples — and where the stop rule ends it.

use super::blend::Blend;
use super::stop::Stop;

/// The global sequence from some position on, under the weights in force there.
#[derive(Debug, Clone)]
pub(crate) struct Walk {
    /// The blend of the weights in force, over the counts since they took over.
    blend: Blend,
    /// Each source's count when they took over.
    base: Vec<u64>,
    /// The global position of the next sample.
    at: u64,
    stop: Stop,
    /// Each source's epoch length.
    epoch_lens: Vec<u64>,
    /// With [`Stop::All`]: sources of positive weight still in their first epoch.
    unfinished: usize,
    /// Whether the stop rule has ended the sequence.
    ended: bool,
}

impl Walk {
    /// The walk from global position `at`, where each source's count is `counts`, under
    /// `weights` (normalized) that took over when the counts were `base`.
    pub(crate) fn new(
        weights: Vec<f64>,
        base: Vec<u64>,
        counts: &[u64],
        at: u64,
        stop: Stop,
        epoch_lens: Vec<u64>,
    ) -> Self {
        let since = counts
            .iter()
            .zip(&base)
            .map(|(c, b)| c.saturating_sub(*b))
            .collect();
        let unfinished = (0..counts.len())
            .filter(|&s| weights[s] > 0.0 && counts[s] < epoch_lens[s])
            .count();
        Walk {
            blend: Blend::resumed(weights, since),
            base,
            at,
            ended: stop == Stop::All && unfinished == 0,
            stop,
            epoch_lens,
            unfinished,
        }
    }

    /// The global position of the next sample.
    pub(crate) fn position(&self) -> u64 {
        self.at
    }

    /// Source `s`'s samples before the next position.
    fn count(&self, s: usize) -> u64 {
        self.base[s] + self.blend.counts()[s]
    }

    /// Each source's samples before the next position.
    pub(crate) fn counts(&self) -> Vec<u64> {
        (0..self.base.len()).map(|s| self.count(s)).collect()
    }

    /// The next position's source and its sample's index in that source's walk (its
    /// count so far); `None` once the stop rule ends the sequence (then for good).
    pub(crate) fn next(&mut self) -> Option<(usize, u64)> {
        if self.ended {
            return None;
        }
        let s = self.blend.peek();
        let n = self.count(s);
        if self.stop == Stop::First && n >= self.epoch_lens[s] {
            self.ended = true;
            return None;
        }
        self.blend.assign(s);
        self.at += 1;
        if self.stop == Stop::All && n + 1 == self.epoch_lens[s] {
            self.unfinished -= 1;
            self.ended = self.unfinished == 0;
        }
        Some((s, n))
    }

    /// Walks up to `n` positions, as [`next`](Self::next) does: stops where the stop rule
    /// ends the sequence. Returns how many it walked.
    pub(crate) fn skip_within(&mut self, n: u64) -> u64 {
        let mut walked = 0;
        while walked < n && self.next().is_some() {
            walked += 1;
        }
        walked
    }

    /// Walks `n` positions whatever the stop rule says (to find the counts at a later
    /// position).
    pub(crate) fn skip(&mut self, n: u64) {
        for _ in 0..n {
            self.blend.next();
        }
        self.at += n;
    }
}
