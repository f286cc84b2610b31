//! [`DocOrder`]: the order in which an epoch visits documents.

/// The order in which an epoch of packed documents visits its documents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DocOrder {
    /// modded-nanogpt's walk: shard by shard, document by document; a shard whose
    /// documents run out mid-step drops that partial step, and the step starts over at
    /// the next shard's first document. Every epoch is the same.
    #[default]
    Sequential,
    /// Every document of every shard, in a fresh order each epoch: a Fisher–Yates shuffle
    /// (for `i` from `n-1` down to 1, swap `i` with
    /// [`below`](crate::source::SplitMix64::below)`(i+1)`) of the `n` documents numbered
    /// shard by shard, drawn from `SplitMix64::new(epoch_key(seed, epoch))`, as the window
    /// sampler's [`Order::Shuffled`](crate::source::Order::Shuffled). Only the epoch's last
    /// partial step is dropped. Needs every shard's index up front, and holds the epoch's
    /// permutation (4 bytes a document while there are fewer than 2^32, 8 above).
    Shuffled {
        /// The run's seed.
        seed: u64,
    },
}

impl DocOrder {
    /// The order's name, as a [`DocumentsCheckpoint`](crate::source::DocumentsCheckpoint)
    /// records it: `"sequential"` or `"shuffled"`.
    ///
    /// ```
    /// use pinring::source::DocOrder;
    /// assert_eq!(DocOrder::Shuffled { seed: 3 }.name(), "shuffled");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            DocOrder::Sequential => "sequential",
            DocOrder::Shuffled { .. } => "shuffled",
        }
    }

    /// The seed, or 0 for [`DocOrder::Sequential`] (which has none).
    pub const fn seed(self) -> u64 {
        match self {
            DocOrder::Sequential => 0,
            DocOrder::Shuffled { seed } => seed,
        }
    }

    /// The order of this [`name`](Self::name) and seed (ignored for `"sequential"`);
    /// `None` for an unknown name.
    ///
    /// ```
    /// use pinring::source::DocOrder;
    /// let order = DocOrder::Shuffled { seed: 1337 };
    /// assert_eq!(DocOrder::from_name(order.name(), order.seed()), Some(order));
    /// assert_eq!(DocOrder::from_name("random", 0), None);
    /// ```
    pub fn from_name(name: &str, seed: u64) -> Option<Self> {
        match name {
            "sequential" => Some(DocOrder::Sequential),
            "shuffled" => Some(DocOrder::Shuffled { seed }),
            _ => None,
        }
    }
}
