"""Issue 33: `pinring.Topology` from the launcher's environment (torchrun's or Slurm's
variables, as `os.environ` holds them) or given, its data-parallel groups in Megatron's
order, and sources and loaders placed by it (`topology=`) instead of rank/world_size."""

import numpy as np
import pytest

import pinring
from conftest import BOUND, write_shard

TORCHRUN = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE")
SLURM = ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "SLURM_NODEID")


@pytest.fixture
def env(monkeypatch):
    """os.environ without any launcher's variables; `env(NAME=value, ...)` sets some (None
    unsets one)."""
    for name in TORCHRUN + SLURM:
        monkeypatch.delenv(name, raising=False)

    def set_vars(**values):
        for name, value in values.items():
            if value is None:
                monkeypatch.delenv(name, raising=False)
            else:
                monkeypatch.setenv(name, str(value))

    return set_vars


def test_from_env_reads_torchrun_and_slurm(env):
    env(RANK=13, WORLD_SIZE=16, LOCAL_RANK=5, LOCAL_WORLD_SIZE=8)
    topo = pinring.Topology.from_env()
    assert (topo.rank, topo.world_size, topo.local_rank, topo.local_world_size) == (13, 16, 5, 8)
    assert (topo.dp_rank, topo.dp_size) == (13, 16)
    # Tensor parallel 2, pipeline parallel 2: rank 13 is the second tensor rank of
    # data-parallel rank 2, in pipeline stage 1 (tensor fastest, then data, then pipeline).
    dp = topo.data_parallel(tensor=2, pipeline=2)
    assert (dp.dp_rank, dp.dp_size, dp.rank, dp.world_size) == (2, 4, 13, 16)
    assert topo.data_parallel(context=4).dp_size == 4
    assert pinring.Topology(13, 16, 5, 8) == topo
    env(**{name: None for name in TORCHRUN})
    env(SLURM_PROCID=5, SLURM_NTASKS=12, SLURM_LOCALID=1, SLURM_NTASKS_PER_NODE="4(x3)")
    topo = pinring.Topology.from_env()
    assert (topo.rank, topo.world_size, topo.local_rank, topo.local_world_size) == (5, 12, 1, 4)


def test_a_missing_or_bad_variable_is_a_config_error_naming_it(env):
    with pytest.raises(pinring.ConfigError, match="torchrun") as info:
        pinring.Topology.from_env()
    assert info.value.argument == "RANK"
    env(RANK=1, WORLD_SIZE=2, LOCAL_RANK=1)
    with pytest.raises(pinring.ConfigError, match="LOCAL_WORLD_SIZE is not set") as info:
        pinring.Topology.from_env()
    assert info.value.argument == "LOCAL_WORLD_SIZE"
    env(LOCAL_WORLD_SIZE="two")
    with pytest.raises(pinring.ConfigError, match="not a whole number") as info:
        pinring.Topology.from_env()
    assert info.value.argument == "LOCAL_WORLD_SIZE"
    env(RANK=2, LOCAL_WORLD_SIZE=2)
    with pytest.raises(pinring.ConfigError, match="not below") as info:
        pinring.Topology.from_env()
    assert info.value.argument == "RANK"
    env(**{name: None for name in TORCHRUN})
    env(SLURM_PROCID=9, SLURM_NTASKS=10, SLURM_LOCALID=1, SLURM_NTASKS_PER_NODE="four")
    with pytest.raises(pinring.ConfigError, match="not a task count") as info:
        pinring.Topology.from_env()
    assert info.value.argument == "SLURM_NTASKS_PER_NODE"
    env(SLURM_NTASKS_PER_NODE="4(x2),2")
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Topology.from_env()
    assert info.value.argument == "SLURM_NODEID"
    env(SLURM_NODEID=2)
    assert pinring.Topology.from_env().local_world_size == 2
    env(SLURM_NTASKS="x")
    with pytest.raises(pinring.ConfigError, match="not a whole number") as info:
        pinring.Topology.from_env()
    assert info.value.argument == "SLURM_NTASKS"
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Topology(0, 6, 0, 1).data_parallel(tensor=4)
    assert info.value.argument == "tensor" and "does not divide" in str(info.value)
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Topology(3, 2, 0, 1)
    assert info.value.argument == "rank"


def ids_of(loader):
    out = []
    while (batch := loader.pop(timeout=BOUND)) is not None:
        out += [int(i) for i in batch.sample_ids]
        batch.release()
    return out


def test_sources_and_loaders_are_placed_by_the_data_parallel_rank(tmp_path):
    shard = write_shard(tmp_path / "train_000.bin", np.arange(4000))
    topo = pinring.Topology(5, 8, 1, 4).data_parallel(tensor=2)  # data-parallel rank 2 of 4
    src = pinring.TokenWindows(shard, seq_len=9, topology=topo)
    assert (src.rank, src.world_size) == (2, 4)
    ranked = pinring.TokenWindows(shard, seq_len=9, rank=2, world_size=4)
    assert src.epoch_len == ranked.epoch_len
    with pinring.Loader(src, batch_size=4, epochs=1) as a, pinring.Loader(ranked, batch_size=4, epochs=1) as b:
        assert ids_of(a) == ids_of(b)
    # On the Loader: the source's own rank (0 of 1) gives way to the topology's.
    plain = pinring.TokenWindows(shard, seq_len=9)
    with pinring.Loader(plain, batch_size=4, epochs=1, topology=topo) as a, \
            pinring.Loader(ranked, batch_size=4, epochs=1) as b:
        assert ids_of(a) == ids_of(b)
    for make in (
        lambda: pinring.TokenWindows(shard, seq_len=9, rank=1, world_size=4, topology=topo),
        lambda: pinring.Loader(pinring.TokenWindows(shard, seq_len=9, rank=1, world_size=4),
                               batch_size=4, topology=topo),
        lambda: pinring.Documents(shard, tokens_per_batch=64, max_seq_len=32, bos=0, world_size=3,
                                  topology=topo),
    ):
        with pytest.raises(pinring.ConfigError, match="topology= is data-parallel rank 2 of 4") as info:
            make()
        assert info.value.argument == "topology"
    # Agreeing values are no conflict.
    assert pinring.FixedRecords(shard, record_bytes=8, rank=2, world_size=4, topology=topo).rank == 2
    mix = pinring.Mixture([plain, pinring.TokenWindows(shard, seq_len=9, seed=1, order="shuffled")],
                          topology=topo)
    assert (mix.rank, mix.world_size) == (2, 4)


def test_a_loader_of_several_local_ranks_takes_its_nodes_share(tmp_path):
    """Issue 33: with topology= of 4 local ranks, decode_threads and host_budget left None
    default to a quarter of the node's cores and of the default budget; stats() shows it;
    given values stay."""
    shard = write_shard(tmp_path / "train_000.bin", np.arange(4000))
    src = pinring.TokenWindows(shard, seq_len=9)
    with pinring.Loader(src, batch_size=4) as alone:
        cores = alone.stats()["decode_threads"]  # one per core this process may use
        assert alone.stats()["node_share"] == {"local_ranks": 1, "decode_threads": cores,
                                               "host_budget": 16 << 30}
    topo = pinring.Topology(5, 8, 1, 4)
    with pinring.Loader(src, batch_size=4, topology=topo) as shared:
        share = shared.stats()["node_share"]
        assert share == {"local_ranks": 4, "decode_threads": max(1, cores // 4), "host_budget": 4 << 30}
        assert shared.stats()["decode_threads"] == share["decode_threads"]
    with pinring.Loader(src, batch_size=4, topology=topo, decode_threads=3, host_budget=1 << 30) as given:
        assert given.stats()["node_share"] == {"local_ranks": 4, "decode_threads": 3, "host_budget": 1 << 30}
