//! The sampling arguments both sources take: order, seed, rank, world_size, even_ranks;
//! and the Python attributes that give them back ([`sampling_attributes`]).

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
        let seed = args::seed(py, seed)?;
        let (rank, world) = args::rank_in_world(py, rank, world_size)?;
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

/// The attributes `order`, `seed`, `rank`, `world_size`, `even_ranks`, `epoch_len` and
/// `__len__` of a source class that holds `sampling: Sampling`, `spec: Spec` and `row: Row`:
/// declared once for `TokenWindows` and `FixedRecords`, as a second `#[pymethods]` block of
/// each (pyo3's `multiple-pymethods`); and the class's `spec()`, what a loader takes from
/// it.
macro_rules! sampling_attributes {
    ($class:ident) => {
        impl $class {
            /// The source as a loader needs it, and its row shape.
            pub(crate) fn spec(&self) -> ($crate::source::spec::Spec, $crate::source::dtype::Row) {
                (self.spec.clone(), self.row)
            }
        }

        #[$crate::stub_attrs::gen_stub_pymethods]
        #[pyo3::pymethods]
        impl $class {
            /// "sequential", "shuffled" or "random".
            #[getter]
            fn order(&self) -> &str {
                &self.sampling.order
            }

            /// The seed of "shuffled" and "random".
            #[getter]
            fn seed(&self) -> u64 {
                self.sampling.seed
            }

            /// This process's rank.
            #[getter]
            fn rank(&self) -> u64 {
                self.sampling.rank
            }

            /// Ranks the epoch is split over.
            #[getter]
            fn world_size(&self) -> u64 {
                self.sampling.world_size
            }

            /// Whether this source's `epoch_len` is the same on every rank. (A Loader always
            /// gives every rank the same number of batches, whatever this says.)
            #[getter]
            fn even_ranks(&self) -> bool {
                self.sampling.even_ranks
            }

            /// Samples per epoch for this rank.
            #[getter]
            fn epoch_len(&self) -> u64 {
                self.spec.epoch_len().unwrap_or(0)
            }

            /// Samples per epoch for this rank (as `epoch_len`).
            fn __len__(&self) -> usize {
                usize::try_from(self.spec.epoch_len().unwrap_or(0)).unwrap_or(usize::MAX)
            }
        }
    };
}
pub(crate) use sampling_attributes;
