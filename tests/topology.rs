//! `Topology`: torchrun's and Slurm's variables read, bad ones named, and Megatron's layout
//! of model-parallel groups (tensor fastest, then context, then data, then pipeline).

use pinring::{ConfigError, Error, Topology};

fn vars<'a>(list: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| {
        list.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| (*v).to_owned())
    }
}

/// The variable a refused topology names, and its message.
fn named(t: pinring::Result<Topology>) -> (&'static str, String) {
    match t {
        Err(Error::Config(e @ ConfigError::Run { .. })) => (e.field(), e.to_string()),
        other => panic!("not a ConfigError::Run: {other:?}"),
    }
}

#[test]
fn torchrun_variables_give_the_ranks() {
    let t = Topology::from_vars(vars(&[
        ("RANK", "6"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "2"),
        ("LOCAL_WORLD_SIZE", "4"),
        ("SLURM_PROCID", "99"),
    ]))
    .unwrap();
    assert_eq!(
        (
            t.rank(),
            t.world_size(),
            t.local_rank(),
            t.local_world_size()
        ),
        (6, 8, 2, 4)
    );
    assert_eq!((t.dp_rank(), t.dp_size()), (6, 8));
}

#[test]
fn slurm_variables_give_the_ranks_also_in_their_compressed_form() {
    let base = [
        ("SLURM_PROCID", "9"),
        ("SLURM_NTASKS", "10"),
        ("SLURM_LOCALID", "1"),
    ];
    let with = |extra: &[(&'static str, &'static str)]| {
        let mut all = base.to_vec();
        all.extend_from_slice(extra);
        Topology::from_vars(vars(&all))
    };
    let t = with(&[("SLURM_NTASKS_PER_NODE", "4(x2),2"), ("SLURM_NODEID", "2")]).unwrap();
    assert_eq!(
        (
            t.rank(),
            t.world_size(),
            t.local_rank(),
            t.local_world_size()
        ),
        (9, 10, 1, 2)
    );
    let t = with(&[("SLURM_NTASKS_PER_NODE", "5(x2)")]).unwrap();
    assert_eq!(t.local_world_size(), 5);
    assert_eq!(
        named(with(&[("SLURM_NTASKS_PER_NODE", "4(x2),2")])).0,
        "SLURM_NODEID"
    );
    assert_eq!(
        named(with(&[("SLURM_NTASKS_PER_NODE", "four")])).0,
        "SLURM_NTASKS_PER_NODE"
    );
    assert_eq!(named(with(&[])).0, "SLURM_NTASKS_PER_NODE");
}

#[test]
fn a_missing_or_inconsistent_variable_is_named() {
    let (name, text) = named(Topology::from_vars(vars(&[
        ("RANK", "0"),
        ("WORLD_SIZE", "2"),
        ("LOCAL_RANK", "0"),
    ])));
    assert_eq!(name, "LOCAL_WORLD_SIZE");
    assert!(text.contains("torchrun sets"), "{text}");
    let full = |rank, world, local, local_world| {
        Topology::from_vars(vars(&[
            ("RANK", rank),
            ("WORLD_SIZE", world),
            ("LOCAL_RANK", local),
            ("LOCAL_WORLD_SIZE", local_world),
        ]))
    };
    assert_eq!(named(full("4", "4", "0", "2")).0, "RANK");
    assert_eq!(named(full("1", "4", "2", "2")).0, "LOCAL_RANK");
    assert_eq!(named(full("1", "4", "0", "8")).0, "LOCAL_WORLD_SIZE");
    assert_eq!(named(full("1", "0", "0", "1")).0, "WORLD_SIZE");
    assert_eq!(named(full("x", "4", "0", "1")).0, "RANK");
    assert_eq!(named(Topology::from_vars(vars(&[]))).0, "RANK");
}

#[test]
fn model_parallel_groups_follow_megatrons_order() {
    let (tp, cp, pp) = (2, 3, 2);
    let world = 24;
    let dp = world / (tp * cp * pp);
    for rank in 0..world {
        let t = Topology::new(rank, world, rank % 8, 8)
            .unwrap()
            .data_parallel(tp, cp, pp)
            .unwrap();
        // rank = tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i))
        let want = (rank / (tp * cp)) % dp;
        assert_eq!((t.dp_rank(), t.dp_size()), (want, dp), "rank {rank}");
    }
    // The ranks of one tensor group (same rank / tp) share a data-parallel rank.
    let of = |r| {
        Topology::new(r, world, 0, 1)
            .unwrap()
            .data_parallel(tp, cp, pp)
            .unwrap()
            .dp_rank()
    };
    assert_eq!(of(0), of(1));
    assert_eq!(
        named(Topology::new(0, 10, 0, 1).unwrap().data_parallel(4, 1, 1)).0,
        "tensor"
    );
    assert_eq!(
        named(Topology::new(0, 10, 0, 1).unwrap().data_parallel(1, 0, 1)).0,
        "context"
    );
}
