//! The sampling arguments TokenWindows and FixedRecords take: order, seed, even_ranks
//! (their rank and world size are [`given::placement`](crate::source::given::placement)'s).

use pyo3::prelude::*;

use pinring::source::{Order, SamplerBuilder, Segmented};

use crate::args;
use crate::errors::classes::config;

/// Sampling settings shared by both sources.
#[derive(Debug, Clone)]
pub(crate) struct Sampling {
    /// The order (its name: "sequential", "shuffled" or "random").
    pub(crate) order: Order,
    /// The seed of "shuffled" and "random".
    pub(crate) seed: u64,
    /// Whether every rank's epoch_len is the same.
    pub(crate) even_ranks: bool,
}

impl Sampling {
    /// Checks the arguments.
    pub(crate) fn parse(
        py: Python<'_>,
        order: &str,
        seed: i128,
        even_ranks: bool,
    ) -> PyResult<Self> {
        let seed = args::seed(py, seed)?;
        let name = order.trim().to_ascii_lowercase();
        let Some(order) = Order::from_name(&name, seed) else {
            return Err(config(
                py,
                "order",
                format!("order {name:?} is not one of \"sequential\", \"shuffled\", \"random\""),
            ));
        };
        Ok(Sampling {
            order,
            seed,
            even_ranks,
        })
    }

    /// `builder` with these settings (no rank: the loader's).
    pub(crate) fn apply<S: Segmented>(&self, builder: SamplerBuilder<S>) -> SamplerBuilder<S> {
        builder.order(self.order).even_ranks(self.even_ranks)
    }

    /// Builds the source of `builder` (without a rank), and this rank's samples an epoch:
    /// the rank's share checked now, as the loader will shard it.
    pub(crate) fn build<S: Segmented + Clone>(
        &self,
        builder: SamplerBuilder<S>,
        (rank, world): (u64, u64),
    ) -> pinring::Result<(pinring::source::Sampler<S>, u64)> {
        let sampler = self.apply(builder).build()?;
        let epoch_len = sampler.to_builder().shard(rank, world).build()?.epoch_len();
        Ok((sampler, epoch_len))
    }

    /// `order='...', rank=r/w`, for a source's repr.
    pub(crate) fn describe(&self, (rank, world): (u64, u64)) -> String {
        format!("order='{}', rank={rank}/{world}", self.order.name())
    }
}
