//! The sampling arguments both sources take: order, seed, rank, world_size, even_ranks.

use pyo3::prelude::*;

use pinring::source::{Order, SamplerBuilder, Segmented};

use crate::args;
use crate::errors::classes::config;

/// Sampling settings shared by both sources.
#[derive(Debug, Clone)]
pub(crate) struct Sampling {
    /// "sequential", "shuffled" or "random".
    pub(crate) order: String,
    /// The seed of "shuffled" and "random".
    pub(crate) seed: u64,
    /// This process's rank.
    pub(crate) rank: u64,
    /// Ranks the epoch is split over.
    pub(crate) world_size: u64,
    /// Whether every rank's epoch_len is the same.
    pub(crate) even_ranks: bool,
}

impl Sampling {
    /// Checks the arguments.
    pub(crate) fn parse(
        py: Python<'_>,
        order: &str,
        seed: i128,
        rank: i128,
        world_size: i128,
        even_ranks: bool,
    ) -> PyResult<Self> {
        let seed = u64::try_from(seed)
            .map_err(|_| config(py, "seed", format!("seed must be in 0..2**64, got {seed}")))?;
        let world = args::at_least_one(py, "world_size", world_size)?;
        let rank = u64::try_from(rank)
            .ok()
            .filter(|&r| r < world)
            .ok_or_else(|| {
                config(
                    py,
                    "rank",
                    format!("rank must be in 0..world_size ({world}), got {rank}"),
                )
            })?;
        let order = order.trim().to_ascii_lowercase();
        if !matches!(order.as_str(), "sequential" | "shuffled" | "random") {
            return Err(config(
                py,
                "order",
                format!("order {order:?} is not one of \"sequential\", \"shuffled\", \"random\""),
            ));
        }
        Ok(Sampling {
            order,
            seed,
            rank,
            world_size: world,
            even_ranks,
        })
    }

    fn order(&self) -> Order {
        match self.order.as_str() {
            "shuffled" => Order::Shuffled { seed: self.seed },
            "random" => Order::Random { seed: self.seed },
            _ => Order::Sequential,
        }
    }

    /// `builder` with these settings.
    pub(crate) fn apply<S: Segmented>(&self, builder: SamplerBuilder<S>) -> SamplerBuilder<S> {
        builder
            .order(self.order())
            .shard(self.rank, self.world_size)
            .even_ranks(self.even_ranks)
    }

    /// `order='...', rank=r/w`, for a source's repr.
    pub(crate) fn describe(&self) -> String {
        format!(
            "order='{}', rank={}/{}",
            self.order, self.rank, self.world_size
        )
    }
}
