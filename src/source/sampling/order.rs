//! [`Order`]: the order in which an epoch visits windows.

/// The order in which an epoch visits windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    /// The window grid in file order: window `i` of a segment starts at unit
    /// `i × stride`. Every epoch is the same.
    #[default]
    Sequential,
    /// The same window grid, in a fresh order each epoch: a Fisher–Yates shuffle
    /// (Durstenfeld's: for `i` from `n-1` down to 1, swap `i` with
    /// [`below`](crate::source::SplitMix64::below)`(i+1)`) of the `n` grid windows, drawn from
    /// `SplitMix64::new(epoch_key(seed, epoch))`. The whole epoch's permutation is held
    /// (4 bytes a window while the grid has fewer than 2^32 windows, 8 above).
    Shuffled {
        /// The run's seed.
        seed: u64,
    },
    /// Windows at uniformly random offsets, drawn with replacement and not on the grid:
    /// draw `j` of epoch `e` starts at unit `SplitMix64::new(mix64(epoch_key(seed, e) ^
    /// j)).below(starts)` of the concatenated list of every possible start. An epoch has
    /// as many draws as the grid has windows. Needs no memory, and any draw is found in
    /// O(log segments).
    Random {
        /// The run's seed.
        seed: u64,
    },
}

impl Order {
    /// The order's name, as a [`Checkpoint`](crate::source::Checkpoint) records it: `"sequential"`, `"shuffled"` or
    /// `"random"`.
    ///
    /// ```
    /// use pinring::source::Order;
    /// assert_eq!(Order::Random { seed: 5 }.name(), "random");
    /// assert_eq!(Order::Sequential.name(), "sequential");
    /// ```
    pub const fn name(self) -> &'static str {
        match self {
            Order::Sequential => "sequential",
            Order::Shuffled { .. } => "shuffled",
            Order::Random { .. } => "random",
        }
    }

    /// The seed, or 0 for [`Order::Sequential`] (which has none).
    ///
    /// ```
    /// use pinring::source::Order;
    /// assert_eq!((Order::Shuffled { seed: 5 }.seed(), Order::Sequential.seed()), (5, 0));
    /// ```
    pub const fn seed(self) -> u64 {
        match self {
            Order::Sequential => 0,
            Order::Shuffled { seed } | Order::Random { seed } => seed,
        }
    }

    /// The order of this [`name`](Self::name) and seed (ignored for `"sequential"`);
    /// `None` for an unknown name.
    ///
    /// ```
    /// use pinring::source::Order;
    /// let order = Order::Shuffled { seed: 1337 };
    /// assert_eq!(Order::from_name(order.name(), order.seed()), Some(order));
    /// assert_eq!(Order::from_name("sorted", 0), None);
    /// ```
    pub fn from_name(name: &str, seed: u64) -> Option<Self> {
        match name {
            "sequential" => Some(Order::Sequential),
            "shuffled" => Some(Order::Shuffled { seed }),
            "random" => Some(Order::Random { seed }),
            _ => None,
        }
    }
}
