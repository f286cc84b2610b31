//! [`Blend`]: which source each position of a mixture's global sequence comes from — the
//! rule, the weights it takes, and the counts it keeps.

use crate::error::mixture::MixtureProblem;
use crate::error::{ConfigError, Result};

/// The source of each position of a mixture's global sequence, from the weights alone:
/// an endless iterator of source indices, position 0, 1, 2, ... (Apportionment's *quota
/// method* (Balinski and Young, 1975), which is earliest-deadline-first scheduling of
/// each source's samples.)
///
/// With the weights normalized to `w_s` (summing to 1) and `c_s(n)` the samples source
/// `s` got among positions `0..n`, position `n` goes to the source, among those still
/// owed a sample (`c_s(n) < w_s · (n + 1)`), whose next sample falls due first — the
/// least `(c_s(n) + 1) / w_s` (computed as `(c_s(n) + 1) · (1 / w_s)`) — ties to the
/// lowest index. So after any `n` positions every
/// source's count is within 1 of `w_s · n` (in fact `⌊w_s n⌋ ≤ c_s(n) ≤ ⌈w_s n⌉`): the
/// `j`-th sample of `s` must land at a prefix length in `[⌊(j − 1)/w_s⌋ + 1, ⌈j/w_s⌉]`
/// for that; a source is owed a sample exactly when its next one's window has opened,
/// and serving the earliest deadline first meets every deadline whenever any order does
/// (unit jobs, one slot per position), which one does: any stretch of `m` positions holds
/// the windows of at most `Σ w_s · m = m` samples. A zero weight is never owed anything.
///
/// Megatron's blend rule — the source with the largest `w_s · max(n, 1) − c_s(n)` —
/// does not keep that bound: with weights `[0.1, 0.2, 0.7]` it gives counts `[2, 3, 8]`
/// after 13 positions, where `0.7 · 13 = 9.1`.
///
/// The arithmetic is `f64` (IEEE, the same on every platform); counts are exact up to
/// 2^53.
///
/// ```
/// use pinring::source::Blend;
/// let blend = Blend::new(&[0.7, 0.2, 0.1])?;
/// let first: Vec<usize> = blend.take(10).collect();
/// assert_eq!(first, [0, 0, 0, 1, 0, 0, 1, 0, 0, 2]);
/// let mut blend = Blend::new(&[1.0, 2.0, 7.0])?; // weights need not sum to 1
/// for n in 1..=1000u64 {
///     blend.next();
///     for (s, &c) in blend.counts().iter().enumerate() {
///         assert!((c as f64 - blend.weights()[s] * n as f64).abs() < 1.0);
///     }
/// }
/// # Ok::<(), pinring::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Blend {
    /// The weights, normalized.
    weights: Vec<f64>,
    /// Their reciprocals (infinite for a zero weight): a sample's due point is a product.
    inverse: Vec<f64>,
    /// Each source's samples among the positions walked.
    counts: Vec<u64>,
    /// Positions walked.
    n: u64,
}

impl Blend {
    /// The sequence of these weights, from position 0. Weights that are negative, NaN or
    /// infinite, or all zero, or none at all, are a
    /// [`ConfigError::Mixture`](crate::ConfigError::Mixture).
    pub fn new(weights: &[f64]) -> Result<Blend> {
        let weights = normalized(weights, None).map_err(ConfigError::Mixture)?;
        let counts = vec![0; weights.len()];
        Ok(Blend::resumed(weights, counts))
    }

    /// The sequence of `weights` (normalized already) from the position where the counts
    /// since its start are `counts`.
    pub(crate) fn resumed(weights: Vec<f64>, counts: Vec<u64>) -> Blend {
        let n = counts.iter().sum();
        let inverse = weights.iter().map(|w| 1.0 / w).collect();
        Blend {
            weights,
            inverse,
            counts,
            n,
        }
    }

    /// The weights, normalized to sum to 1.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Each source's samples among the positions walked so far.
    pub fn counts(&self) -> &[u64] {
        &self.counts
    }

    /// Positions walked so far.
    pub fn position(&self) -> u64 {
        self.n
    }

    /// The source of the next position, without walking past it.
    pub fn peek(&self) -> usize {
        let target = (self.n + 1) as f64;
        let mut best: Option<(usize, f64)> = None;
        let each = self.weights.iter().zip(&self.inverse).zip(&self.counts);
        for (s, ((&w, &inverse), &c)) in each.enumerate() {
            if (c as f64) < w * target {
                let due = (c + 1) as f64 * inverse;
                if best.is_none_or(|(_, b)| due < b) {
                    best = Some((s, due));
                }
            }
        }
        match best {
            Some((s, _)) => s,
            // Rounding alone could leave no source owed one: the largest deficit then.
            None => {
                let deficit = |s: usize| self.weights[s] * target - self.counts[s] as f64;
                (0..self.weights.len()).fold(0, |b, s| if deficit(s) > deficit(b) { s } else { b })
            }
        }
    }
}

impl Blend {
    /// Walks past the next position, whose source [`peek`](Self::peek) gave as `s`.
    pub(crate) fn assign(&mut self, s: usize) {
        self.counts[s] += 1;
        self.n += 1;
    }
}

impl Iterator for Blend {
    type Item = usize;

    /// The source of the next position.
    fn next(&mut self) -> Option<usize> {
        let s = self.peek();
        self.assign(s);
        Some(s)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (usize::MAX, None)
    }
}

/// `weights` normalized to sum to 1, checked: one per source when `sources` is given,
/// each finite and at least 0, not all 0.
pub(crate) fn normalized(
    weights: &[f64],
    sources: Option<usize>,
) -> Result<Vec<f64>, MixtureProblem> {
    if let Some(sources) = sources
        && weights.len() != sources
    {
        return Err(MixtureProblem::WeightCount {
            weights: weights.len(),
            sources,
        });
    }
    if weights.is_empty() {
        return Err(MixtureProblem::NoSources);
    }
    if let Some((index, &weight)) = weights
        .iter()
        .enumerate()
        .find(|(_, w)| !w.is_finite() || **w < 0.0)
    {
        return Err(MixtureProblem::BadWeight { index, weight });
    }
    // Scaled by the largest first, so that a sum of huge weights cannot overflow.
    let max = weights.iter().copied().fold(0.0, f64::max);
    if max == 0.0 {
        return Err(MixtureProblem::AllZero);
    }
    let scaled: Vec<f64> = weights.iter().map(|w| w / max).collect();
    let sum: f64 = scaled.iter().sum();
    Ok(scaled.iter().map(|w| w / sum).collect())
}
