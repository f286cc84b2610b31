//! [`SkipSteps`]: the steps a run leaves out, as sorted, disjoint half-open ranges.

use crate::error::source::SourceError;

/// Steps a run leaves out of its stream ([`SamplerBuilder::skip_steps`](crate::source::SamplerBuilder::skip_steps),
/// [`MixtureBuilder::skip_steps`](crate::source::MixtureBuilder::skip_steps)): half-open
/// ranges `a..b` of step numbers, kept sorted, disjoint and apart (ranges that overlap or
/// touch are merged; empty ones dropped), so that the step after a skipped one is found
/// by one binary search.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct SkipSteps {
    ranges: Vec<(u64, u64)>,
}

impl SkipSteps {
    /// The half-open ranges `(start, end)` given, checked: a range whose start is past its
    /// end is [`SourceError::BadSkip`].
    pub(crate) fn new(ranges: impl IntoIterator<Item = (u64, u64)>) -> Result<Self, SourceError> {
        let list: Vec<(u64, u64)> = ranges.into_iter().collect();
        if let Some(&(start, end)) = list.iter().find(|(a, b)| a > b) {
            return Err(SourceError::BadSkip { start, end });
        }
        Ok(Self::merged(list))
    }

    /// `list` sorted and merged (a saved state's ranges are trusted to be ranges; any
    /// empty or reversed one is dropped).
    pub(crate) fn merged(mut list: Vec<(u64, u64)>) -> Self {
        list.retain(|&(a, b)| a < b);
        list.sort_unstable();
        let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(list.len());
        for (a, b) in list {
            match ranges.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => ranges.push((a, b)),
            }
        }
        SkipSteps { ranges }
    }

    /// These ranges and `more`, merged.
    pub(crate) fn union(&self, more: &[(u64, u64)]) -> Self {
        Self::merged(self.ranges.iter().chain(more).copied().collect())
    }

    /// The ranges, sorted and disjoint.
    pub(crate) fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges
    }

    /// Whether no step is skipped.
    pub(crate) fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether a run whose first step is `first` delivers step `step`: not before `first`,
    /// not skipped.
    pub(crate) fn delivers(&self, first: u64, step: u64) -> bool {
        step >= first && self.next_kept(step) == step
    }

    /// `step` if it is kept, else the first kept step after it (the end of its range).
    pub(crate) fn next_kept(&self, step: u64) -> u64 {
        let i = self.ranges.partition_point(|&(_, b)| b <= step);
        match self.ranges.get(i) {
            Some(&(a, b)) if a <= step => b,
            _ => step,
        }
    }

    /// The kept stretches of steps from `first` on, in order: `(x, Some(y))` keeps steps
    /// `x..y`, the last `(x, None)` every step from `x`.
    pub(crate) fn kept_from(&self, first: u64) -> impl Iterator<Item = (u64, Option<u64>)> + '_ {
        let first = self.next_kept(first);
        let later = self.ranges.partition_point(|&(a, _)| a <= first);
        let starts = std::iter::once(first).chain(self.ranges[later..].iter().map(|&(_, b)| b));
        let ends = self.ranges[later..]
            .iter()
            .map(|&(a, _)| Some(a))
            .chain(std::iter::once(None));
        starts.zip(ends)
    }

    /// The step at which `n` kept steps from `first` on have passed: the first kept step
    /// after them (or `first`'s next kept step for `n = 0`).
    pub(crate) fn after_kept(&self, first: u64, mut n: u64) -> u64 {
        for (x, y) in self.kept_from(first) {
            match y {
                Some(y) if y - x <= n => n -= y - x,
                _ => return x.saturating_add(n),
            }
        }
        unreachable!("the last kept stretch is endless")
    }
}

#[cfg(test)]
mod tests {
    use super::SkipSteps;

    #[test]
    fn ranges_merge_and_steps_skip() {
        let s = SkipSteps::new([(5, 7), (1, 2), (6, 9), (9, 10), (3, 3)]).unwrap();
        assert_eq!(s.ranges(), &[(1, 2), (5, 10)]);
        assert_eq!(
            (0..12).map(|k| s.next_kept(k)).collect::<Vec<_>>(),
            [0, 2, 2, 3, 4, 10, 10, 10, 10, 10, 10, 11]
        );
        let kept: Vec<_> = s.kept_from(0).collect();
        assert_eq!(kept, [(0, Some(1)), (2, Some(5)), (10, None)]);
        let kept: Vec<_> = s.kept_from(6).collect();
        assert_eq!(kept, [(10, None)]);
        assert_eq!(
            (0..6).map(|n| s.after_kept(0, n)).collect::<Vec<_>>(),
            [0, 2, 3, 4, 10, 11]
        );
        assert!(SkipSteps::new([(4, 2)]).is_err());
    }
}
