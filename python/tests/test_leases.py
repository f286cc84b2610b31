"""Holding every device slot (issue 19 item 6): `pop()` must not hang forever when the
batches popped earlier are never released (`list(loader)`, views kept without release(),
a `for` loop with device_slots=1): after `lease_timeout` it raises AllSlotsLeased saying
which batches hold the slots and what to do."""

import gc
import threading

import numpy as np
import pytest

import pinring
from conftest import BOUND


def loader_of(shard, **kw):
    src = pinring.TokenWindows(shard, seq_len=9)
    return pinring.Loader(src, batch_size=2, decode_threads=1, **kw)


def test_list_of_a_loader_raises_all_slots_leased_instead_of_hanging(shard):
    with loader_of(shard, lease_timeout=0.01) as loader:
        with pytest.raises(pinring.AllSlotsLeased) as info:
            list(loader)  # keeps every batch: the third pop can never be served
        e = info.value
        assert isinstance(e, pinring.PopTimeout) and isinstance(e, TimeoutError)
        assert e.behind == "consumer" and sorted(seq for _, seq in e.leased) == [0, 1]
        assert str(e) == (
            "all 2 device slots are held by batches 0 and 1 that were never released: "
            "release them (or drop their views), or raise device_slots"
        )


def test_views_kept_without_release_raise_all_slots_leased(shard):
    with loader_of(shard, device_slots=1, lease_timeout=0.01) as loader:
        b = loader.pop(timeout=BOUND)
        view = np.from_dlpack(b)
        del b
        gc.collect()
        with pytest.raises(pinring.AllSlotsLeased) as info:
            loader.pop(timeout=BOUND)
        assert "the only device slot is held by batch 0" in str(info.value)
        del view  # the view was the last holder: the slot comes back
        gc.collect()
        assert loader.pop(timeout=BOUND).seq == 1


def test_the_lease_timeout_holds_across_the_wait_slices(shard):
    """Loader.pop waits in 30 ms slices (for Ctrl-C); a lease_timeout longer than a slice
    must still fire: each slice used to restart the core's lease clock, so the pop below
    waited out its own timeout (PopTimeout) instead."""
    with loader_of(shard, device_slots=1, lease_timeout=0.2) as loader:
        held = loader.pop(timeout=BOUND)
        with pytest.raises(pinring.AllSlotsLeased):
            loader.pop(timeout=5.0)
        held.release()


def test_a_release_from_another_thread_within_the_lease_timeout_lets_the_pop_go_on(shard):
    with loader_of(shard, device_slots=1, lease_timeout=BOUND) as loader:
        held = loader.pop(timeout=BOUND)
        waiting = threading.Event()

        def release_when_popping():
            waiting.wait(BOUND)
            held.release()

        t = threading.Thread(target=release_when_popping)
        t.start()
        waiting.set()
        assert loader.pop(timeout=BOUND).seq == 1
        t.join(BOUND)
