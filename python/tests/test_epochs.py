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


def test_each_iter_over_documents_yields_one_epoch_of_the_walk(tmp_path):
    """Documents (issue 29 item 9): each `for batch in loader` is one epoch of the walk,
    as for windows, with no step lost at the epoch's end: the step that ended it (popped
    to see its epoch) is the next loop's first, and state_dict() does not count it."""
    from docs_data import write_doc_shards

    pattern = write_doc_shards(tmp_path, [30_000, 22_000])
    src = pinring.Documents(pattern, tokens_per_batch=1024, max_seq_len=256)
    with pinring.Loader(src, device="cpu", epochs=3) as loader:
        whole = [(b.step, b.epoch) for b in iter(loader.pop, None)]
    n = len(whole) // 3
    assert n > 5 and whole == [(s, s // n) for s in range(3 * n)]
    with pinring.Loader(src, device="cpu") as loader:  # epochs=None: no cap
        seen = []
        for epoch in range(3):
            it = iter(loader)
            steps = []
            for batch in it:
                assert batch.epoch == epoch == it.epoch
                steps.append(batch.step)
                batch.release()
            assert steps == list(range(epoch * n, (epoch + 1) * n))
            assert loader.epoch == epoch + 1  # the next step, seen and kept
            assert loader.state_dict()["step"] == (epoch + 1) * n  # not counted
            seen += steps
        b = loader.pop(timeout=BOUND)  # pop() gets the kept step
        assert (b.step, b.epoch) == (3 * n, 3)
        b.release()
    # A loop broken mid-epoch is finished by the next; past the cap, StoppedError.
    with pinring.Loader(src, device="cpu", epochs=2) as loader:
        for batch in loader:
            batch.release()
            break
        assert [b.step for b in loader] == list(range(1, n))
        assert [b.epoch for b in loader] == [1] * n
        with pytest.raises(pinring.StoppedError, match="epochs=2"):
            iter(loader)
        assert loader.pop(timeout=BOUND) is None


def test_one_iter_over_a_mixture_is_its_run_to_its_stop(tmp_path):
    from docs_data import write_doc_shards

    pattern = write_doc_shards(tmp_path, [9000, 6000], mean=60)
    src = [pinring.Documents(pattern, tokens_per_batch=256, max_seq_len=96, order="shuffled", seed=s)
           for s in (1, 2)]
    with pinring.Loader(pinring.Mixture(src, stop="first"), device="cpu") as loader:
        steps = [b.step for b in loader]
        assert len(steps) > 5 and steps == list(range(len(steps)))
        assert [b.step for b in loader] == []  # the run has ended
