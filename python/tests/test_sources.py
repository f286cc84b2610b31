"""Shapes, dtypes and every byte of what a Loader delivers, against a pure-numpy reader;
orders, ranks, short last batches, drop_last and epochs."""

import glob
import os

import numpy as np
import pytest

import pinring
from conftest import BOUND, drain, grid_windows, read_shard, write_shard
from docs_data import write_doc_shards


@pytest.mark.parametrize("dtype", ["uint16", "int32", "int64"])
def test_every_byte_of_a_sequential_epoch_matches_the_numpy_reader(shards, dtype):
    seq_len = 31
    src = pinring.TokenWindows(shards, seq_len=seq_len, dtype=dtype)
    reference = grid_windows([read_shard(p) for p in shards], seq_len)
    assert src.epoch_len == len(reference) == len(src)
    assert src.dtype == dtype and src.seq_len == seq_len
    assert src.files == shards
    with pinring.Loader(src, batch_size=8, device="cpu", decode_threads=2) as loader:
        assert loader.shape == (8, seq_len + 1) and loader.dtype == dtype
        seen = []
        for k, batch in enumerate(loader):
            assert batch.seq == k
            assert batch.shape == (batch.samples, seq_len + 1)
            assert batch.dtype == dtype and batch.device == "cpu"
            assert batch.nbytes == batch.samples * (seq_len + 1) * np.dtype(dtype).itemsize
            x = np.from_dlpack(batch)
            assert x.dtype == np.dtype(dtype) and x.shape == batch.shape
            assert x.ctypes.data == batch.ptr  # zero copy: the view is the slot
            seen.extend(x.copy())
            batch.release()
    assert len(seen) == len(reference)
    for got, want in zip(seen, reference):
        np.testing.assert_array_equal(got, want.astype(dtype))


def test_paths_globs_and_lists(shards, tmp_path):
    pattern = str(tmp_path / "train_*.bin")
    by_glob = pinring.TokenWindows(pattern, seq_len=15)
    by_list = pinring.TokenWindows(shards, seq_len=15)
    by_pathlike = pinring.TokenWindows([tmp_path / os.path.basename(p) for p in shards], seq_len=15)
    mixed = pinring.TokenWindows([shards[0], str(tmp_path / "train_001.bi?"), shards[2]], seq_len=15)
    assert by_glob.files == sorted(glob.glob(pattern)) == shards
    assert by_list.files == shards == by_pathlike.files == mixed.files
    assert by_glob.epoch_len == by_list.epoch_len
    one = pinring.TokenWindows(shards[1], seq_len=15)
    assert one.files == [shards[1]] and one.tokens == 1000


def _epoch_rows(src, batch_size=7, **kw):
    with pinring.Loader(src, batch_size=batch_size, device="cpu", decode_threads=2, **kw) as loader:
        return [row for b in drain(loader) for row in b]


def test_shuffled_order_is_a_permutation_per_epoch_and_repeats_with_its_seed(shards):
    seq_len = 20
    reference = {tuple(w) for w in grid_windows([read_shard(p) for p in shards], seq_len)}
    src = pinring.TokenWindows(shards, seq_len=seq_len, dtype="int64", order="shuffled", seed=7)
    n = src.epoch_len
    rows = _epoch_rows(src, epochs=2)
    assert len(rows) == 2 * n
    first, second = [tuple(r) for r in rows[:n]], [tuple(r) for r in rows[n:]]
    assert set(first) == reference and len(set(first)) == n
    assert set(second) == reference
    assert first != second, "a fresh order each epoch"
    sequential = [tuple(w) for w in grid_windows([read_shard(p) for p in shards], seq_len)]
    assert first != sequential
    again = _epoch_rows(pinring.TokenWindows(shards, seq_len=seq_len, dtype="int64", order="shuffled", seed=7))
    assert [tuple(r) for r in again] == first
    other = _epoch_rows(pinring.TokenWindows(shards, seq_len=seq_len, dtype="int64", order="shuffled", seed=8))
    assert [tuple(r) for r in other] != first


def test_random_order_draws_windows_at_any_offset_inside_one_shard(shards):
    seq_len = 9
    all_tokens = [read_shard(p) for p in shards]
    src = pinring.TokenWindows(shards, seq_len=seq_len, dtype="int32", order="random", seed=3)
    rows = _epoch_rows(src)
    assert len(rows) == src.epoch_len
    off_grid = 0
    for row in rows:
        # Tokens are distinct across shards: the first token names shard and offset.
        (shard,) = [s for s in all_tokens if s[0] <= row[0] <= s[-1]]
        start = int(row[0] - shard[0])
        np.testing.assert_array_equal(row, shard[start : start + seq_len + 1])
        off_grid += start % seq_len != 0
    assert off_grid > 0, "random offsets are not confined to the grid"
    assert [tuple(r) for r in _epoch_rows(src)] == [tuple(r) for r in rows]


@pytest.mark.parametrize("order", ["sequential", "shuffled"])
def test_ranks_share_an_epoch_disjointly(shards, order):
    seq_len, world = 16, 3
    reference = [tuple(w) for w in grid_windows([read_shard(p) for p in shards], seq_len)]
    per_rank = []
    for rank in range(world):
        src = pinring.TokenWindows(
            shards, seq_len=seq_len, order=order, seed=5, rank=rank, world_size=world, even_ranks=False
        )
        assert (src.rank, src.world_size) == (rank, world)
        per_rank.append([tuple(r) for r in _epoch_rows(src, batch_size=4)])
    union = [w for rows in per_rank for w in rows]
    assert len(set(union)) == len(union), "the ranks' shares are disjoint"
    assert set(union) <= set(reference)
    # A Loader gives every rank the same number of samples: together the ranks see the
    # whole epoch but for fewer than `world` windows of its tail.
    assert len({len(rows) for rows in per_rank}) == 1
    assert 0 <= len(reference) - len(union) < world
    # even_ranks: every rank gets the same count, the epoch less its remainder.
    lens = [
        pinring.TokenWindows(shards, seq_len=seq_len, rank=r, world_size=world).epoch_len
        for r in range(world)
    ]
    assert len(set(lens)) == 1 and lens[0] == len(reference) // world


def test_short_last_batch_and_drop_last(shard):
    seq_len = 9  # 1000 tokens: 111 windows
    src = pinring.TokenWindows(shard, seq_len=seq_len)
    assert src.epoch_len == 111
    with pinring.Loader(src, batch_size=10, device="cpu") as loader:
        assert len(loader) == 12
        sizes = [b.shape[0] for b in drain(loader)]
    assert sizes == [10] * 11 + [1]
    with pinring.Loader(src, batch_size=10, device="cpu", drop_last=True) as loader:
        assert len(loader) == 11 and loader.drop_last
        sizes = [b.shape[0] for b in drain(loader)]
    assert sizes == [10] * 11


def test_epochs_count_and_endless(shard):
    src = pinring.TokenWindows(shard, seq_len=99)  # 10 windows an epoch
    with pinring.Loader(src, batch_size=4, device="cpu", epochs=3) as loader:
        batches = drain(loader)
        # A batch never spans two epochs: 4 + 4 + 2 per epoch.
        assert loader.total_batches == 9 and loader.epochs == 3
        assert len(loader) == loader.epoch_batches == 3
    assert [len(b) for b in batches] == [4, 4, 2] * 3
    rows = [r for b in batches for r in b]
    assert len(rows) == 30
    np.testing.assert_array_equal(np.array(rows[:10]), np.array(rows[10:20]))
    with pinring.Loader(src, batch_size=4, device="cpu", epochs=None) as loader:
        assert loader.total_batches is None and len(loader) == 3
        for i in range(30):  # ten epochs, and it keeps going
            b = loader.pop(timeout=BOUND)
            assert b is not None and (b.epoch, b.samples) == (i // 3, [4, 4, 2][i % 3])
            b.release()


def test_fixed_records_bytes(tmp_path):
    rb = 24
    files = []
    for i, n in enumerate([5, 9]):
        data = np.random.default_rng(i).integers(0, 256, size=n * rb, dtype=np.uint8)
        path = tmp_path / f"rec_{i}.bin"
        path.write_bytes(data.tobytes())
        files.append(str(path))
    reference = np.concatenate([np.fromfile(f, dtype=np.uint8) for f in files]).reshape(-1, rb)
    src = pinring.FixedRecords(files, record_bytes=rb)
    assert src.records == 14 == src.epoch_len and src.dtype == "uint8" and src.record_bytes == rb
    with pinring.Loader(src, batch_size=4, device="cpu") as loader:
        assert loader.shape == (4, rb) and loader.dtype == "uint8"
        batches = drain(loader)
    assert [b.shape for b in batches] == [(4, rb)] * 3 + [(2, rb)]
    np.testing.assert_array_equal(np.concatenate(batches), reference)
    shuffled = pinring.FixedRecords(str(tmp_path / "rec_*.bin"), rb, order="shuffled", seed=1)
    with pinring.Loader(shuffled, batch_size=4, device="cpu") as loader:
        rows = np.concatenate(drain(loader))
    assert sorted(map(bytes, rows)) == sorted(map(bytes, reference))


def test_every_source_is_a_source_and_the_sampled_ones_samplers(shards, tmp_path):
    windows = pinring.TokenWindows(shards, seq_len=31, order="shuffled", seed=5, rank=1, world_size=2)
    (tmp_path / "rec.bin").write_bytes(bytes(range(48)))
    records = pinring.FixedRecords(str(tmp_path / "rec.bin"), record_bytes=8, rank=0, world_size=3)
    doc_shards = write_doc_shards(tmp_path, [20_000])
    docs = pinring.Documents(doc_shards, tokens_per_batch=512, max_seq_len=256, rank=1, world_size=2)
    member = pinring.TokenWindows(shards, seq_len=31)
    mix = pinring.Mixture([member, member], rank=1, world_size=2)
    for src, (rank, world, dtype) in [
        (windows, (1, 2, "int32")),
        (records, (0, 3, "uint8")),
        (docs, (1, 2, "int32")),
        (mix, (1, 2, "int32")),
    ]:
        assert isinstance(src, pinring.Source)
        assert (src.rank, src.world_size, src.dtype) == (rank, world, dtype)
        assert f"rank={rank}/{world}" in repr(src)
    assert isinstance(windows, pinring.Sampler) and isinstance(records, pinring.Sampler)
    assert not isinstance(docs, pinring.Sampler) and not isinstance(mix, pinring.Sampler)
    assert (windows.order, windows.seed, windows.even_ranks) == ("shuffled", 5, True)
    assert len(windows) == windows.epoch_len > 0 and len(records) == records.epoch_len == 2
    assert f"epoch_len={windows.epoch_len}" in repr(windows)
    for base in [pinring.Source, pinring.Sampler]:
        with pytest.raises(TypeError):
            base()


def test_device_forms_for_the_cpu_backend(shard):
    src = pinring.TokenWindows(shard, seq_len=99)

    class TorchDevice:  # duck-typed torch.device("cpu")
        type, index = "cpu", None

    for device in ["cpu", " CPU ", TorchDevice(), None]:
        with pinring.Loader(src, 2, device=device) as loader:
            assert loader.device == "cpu"
            b = loader.pop(timeout=BOUND)
            assert b.__dlpack_device__() == (1, 0)
            b.release()
