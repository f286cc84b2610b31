//! One shuffled epoch's order of every document: a Fisher–Yates permutation of the dense
//! document numbers (shard by shard, document by document), made once per epoch.

use crate::source::sampling::rng::{epoch_key, SplitMix64};

/// The order of shuffled epoch [`epoch`](Self::epoch): position `i` holds a dense document
/// number (document `j` of shard `s` is `first_doc[s] + j`). 4 bytes a document while
/// there are fewer than 2^32, 8 above.
#[derive(Debug)]
pub(super) struct Permutation {
    epoch: u64,
    order: Order,
}

#[derive(Debug)]
enum Order {
    Small(Box<[u32]>),
    Large(Box<[u64]>),
}

impl Permutation {
    /// Epoch `epoch`'s permutation of `n` documents under `seed`: Durstenfeld's
    /// Fisher–Yates (for `i` from `n - 1` down to 1, swap `i` with `below(i + 1)`) from
    /// `SplitMix64::new(epoch_key(seed, epoch))`, as the window sampler shuffles.
    pub(super) fn new(n: u64, seed: u64, epoch: u64) -> Self {
        let mut rng = SplitMix64::new(epoch_key(seed, epoch));
        let order = if n <= u64::from(u32::MAX) + 1 {
            let mut v: Box<[u32]> = (0..n).map(|i| i as u32).collect();
            fisher_yates(&mut v, &mut rng);
            Order::Small(v)
        } else {
            let mut v: Box<[u64]> = (0..n).collect();
            fisher_yates(&mut v, &mut rng);
            Order::Large(v)
        };
        Permutation { epoch, order }
    }

    /// The epoch it orders.
    pub(super) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The dense document number at position `i`; `None` past the end.
    pub(super) fn get(&self, i: u64) -> Option<u64> {
        let i = usize::try_from(i).ok()?;
        match &self.order {
            Order::Small(v) => v.get(i).map(|&d| u64::from(d)),
            Order::Large(v) => v.get(i).copied(),
        }
    }
}

fn fisher_yates<T>(v: &mut [T], rng: &mut SplitMix64) {
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
}

#[cfg(test)]
mod tests {
    use crate::source::documents::permutation::Permutation;

    #[test]
    fn a_permutation_per_epoch() {
        let a = Permutation::new(1000, 7, 0);
        let mut seen: Vec<u64> = (0..1000).map(|i| a.get(i).unwrap()).collect();
        assert_ne!(seen[..10], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
        seen.sort_unstable();
        assert_eq!(seen, (0..1000).collect::<Vec<_>>());
        assert_eq!(a.get(1000), None);
        let b = Permutation::new(1000, 7, 1);
        assert!((0..1000).any(|i| a.get(i) != b.get(i)));
        let again = Permutation::new(1000, 7, 0);
        assert!((0..1000).all(|i| a.get(i) == again.get(i)));
    }
}
