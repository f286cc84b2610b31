"""Epochs in the PyTorch idiom (issue 19 item 11): each `iter(loader)` yields one epoch
and the next `iter()` goes on with the next, so `for epoch in range(E): for batch in
loader:` trains E epochs with the defaults; with `epochs=N`, iterating past the cap
raises instead of yielding nothing; `pop()` goes on across epochs."""

import numpy as np
import pytest

import pinring
from conftest import BOUND


def source(shard):
    return pinring.TokenWindows(shard, seq_len=99)  # 10 windows an epoch


def test_each_iter_yields_one_epoch_and_the_next_goes_on(shard):
    with pinring.Loader(source(shard), batch_size=4) as loader:  # epochs=None: no cap
        assert loader.epochs is None and len(loader) == 3
        seen = []
        for epoch in range(3):
            assert loader.epoch == epoch
            rows = []
            for batch in loader:
                assert batch.epoch == epoch
                rows.append(np.from_dlpack(batch)[:, 0].copy())
                batch.release()
            seen.append(np.concatenate(rows))
        assert [len(r) for r in seen] == [10, 10, 10]
        np.testing.assert_array_equal(seen[0], seen[1])  # sequential: the same windows
        # pop() goes on across epochs, where the iterators stopped.
        b = loader.pop(timeout=BOUND)
        assert (b.epoch, b.seq) == (3, 9)
        b.release()


def test_a_loop_broken_mid_epoch_is_finished_by_the_next_iter(shard):
    with pinring.Loader(source(shard), batch_size=4) as loader:
        for batch in loader:
            batch.release()
            break
        rest = []
        for batch in loader:  # the rest of epoch 0
            rest.append((batch.epoch, batch.samples))
            batch.release()
        assert rest == [(0, 4), (0, 2)]
        assert next(iter(loader)).epoch == 1


def test_iterating_past_the_epochs_cap_raises(shard):
    with pinring.Loader(source(shard), batch_size=4, epochs=2) as loader:
        assert loader.total_batches == 6
        for epoch in range(2):
            got = [b.epoch for b in loader]
            assert got == [epoch] * 3
        with pytest.raises(pinring.StoppedError) as info:
            for _ in loader:
                pass
        assert "epochs=2" in str(info.value) and "epochs=None" in str(info.value)
        assert loader.pop(timeout=BOUND) is None  # pop() says the end as before
