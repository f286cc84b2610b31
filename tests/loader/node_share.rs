//! A loader given a topology of several local ranks takes its node's share: the decode
//! threads and host budget not given default to the cores and the default budget split
//! among the node's ranks, and `stats()` shows the share; given values stay.

use pinring::source::Order;
use pinring::{Config, Loader, NodeShare, Topology};

use crate::helpers::{shards, windows};

#[test]
fn a_topology_of_four_local_ranks_takes_a_quarter_of_the_node() {
    let (_dir, paths) = shards(&[4000]);
    let src = windows(&paths, 16, Order::Sequential);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let alone = Loader::builder(src.clone()).batch_size(2).build().unwrap();
    assert_eq!(
        alone.stats().node_share,
        NodeShare {
            local_ranks: 1,
            decode_threads: cores,
            host_budget: Config::DEFAULT_HOST_BUDGET
        }
    );
    // Rank 5 of 8, local rank 1 of 4 on its node.
    let topo = Topology::new(5, 8, 1, 4).unwrap();
    let shared = Loader::builder(src.clone())
        .batch_size(2)
        .topology(&topo)
        .build()
        .unwrap();
    let share = shared.stats().node_share;
    assert_eq!(share.local_ranks, 4);
    assert_eq!(share.decode_threads, (cores / 4).max(1));
    assert_eq!(share.host_budget, Config::DEFAULT_HOST_BUDGET / 4);
    assert_eq!(shared.config().node_share(), share);
    assert!(
        shared
            .stats()
            .to_string()
            .contains("share of 1 of 4 local ranks"),
        "{}",
        shared.stats()
    );
    assert_eq!((shared.run().rank, shared.run().world_size), (5, 8));
    // Given values are kept.
    let given = Loader::builder(src)
        .batch_size(2)
        .topology(&topo)
        .decode_threads(3)
        .host_budget(1 << 30)
        .build()
        .unwrap();
    assert_eq!(
        given.stats().node_share,
        NodeShare {
            local_ranks: 4,
            decode_threads: 3,
            host_budget: 1 << 30
        }
    );
}
