"""Where a run ends (issues 28 and 29): a skip_steps range past the epochs cap ends the
run after the steps before it, for every source (Documents walk their skipped steps, so
that walk stops at the cap, and at close() when there is none); a start_step past the end
of a capped run is a ConfigError saying how many steps the run has."""

import os
import time

import numpy as np
import pytest

import pinring
from conftest import BOUND, write_shard
from docs_data import write_doc_shards

HUGE = 2**62


@pytest.fixture(scope="module")
def docs(tmp_path_factory):
    return write_doc_shards(tmp_path_factory.mktemp("ends"), [30_000, 22_000])


def documents(pattern):
    return pinring.Documents(pattern, tokens_per_batch=1024, max_seq_len=256)


def steps_of(loader):
    """Every step the loader delivers (each released), to its end."""
    out = []
    while (batch := loader.pop(timeout=BOUND)) is not None:
        out.append((batch.step, batch.epoch))
        batch.release()
    return out


def feeder_threads():
    """Threads of this process named as a pipeline's feeder."""
    names = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/comm") as f:
                names.append(f.read().strip())
        except OSError:  # the thread ended meanwhile
            pass
    return names.count("pinring-feeder")


def test_a_skip_range_past_the_epochs_cap_ends_a_documents_run(docs):
    with pinring.Loader(documents(docs), device="cpu", epochs=1) as loader:
        whole = steps_of(loader)
    assert len(whole) > 5 and {e for _, e in whole} == {0}
    with pinring.Loader(documents(docs), device="cpu", epochs=1, skip_steps=[(5, HUGE)]) as loader:
        assert steps_of(loader) == [(s, 0) for s in range(5)]
        assert loader.pop(timeout=BOUND) is None
        # The state stands at the run's end: its step is the run's step count, and a run
        # resumed from it with the same cap delivers nothing more.
        state = loader.state_dict()
        assert (state["step"], state["epoch"]) == (len(whole), 1)
    with pinring.Loader(documents(docs), device="cpu", epochs=1, state=state) as loader:
        assert loader.pop(timeout=BOUND) is None
    # Two epochs: the skip runs over epoch 1 too, and ends there.
    with pinring.Loader(documents(docs), device="cpu", epochs=2, skip_steps=[(5, HUGE)]) as loader:
        assert steps_of(loader) == [(s, 0) for s in range(5)]


def test_close_ends_a_feeder_walking_over_skipped_steps(docs):
    """epochs=None: the walk over steps 5 to 2**62 has no cap, so it goes on until the
    loader closes; close() must end it (no thread outlives the loader, walking)."""
    before = feeder_threads()
    loader = pinring.Loader(documents(docs), device="cpu", skip_steps=[(5, HUGE)])
    assert [b.step for b in (loader.pop(timeout=BOUND) for _ in range(5))] == list(range(5))
    # (each batch was dropped unreleased: released conservatively on the cpu backend)
    assert feeder_threads() == before + 1  # the feeder walks the skipped steps now
    loader.close()
    deadline = time.monotonic() + BOUND
    while feeder_threads() > before and time.monotonic() < deadline:
        time.sleep(0.01)
    assert feeder_threads() == before, "a feeder thread outlived close(), walking"


def test_a_skip_range_past_the_epochs_cap_ends_a_windows_run(tmp_path):
    shard = write_shard(tmp_path / "train_000.bin", np.arange(1000))
    src = pinring.TokenWindows(shard, seq_len=9)  # 111 windows: 28 batches of 4 an epoch
    with pinring.Loader(src, batch_size=4, epochs=1, skip_steps=[(5, HUGE)]) as loader:
        assert steps_of(loader) == [(s, 0) for s in range(5)]
        assert loader.total_batches == 5
    with pinring.Loader(src, batch_size=4, epochs=3, skip_steps=[(5, HUGE)]) as loader:
        assert steps_of(loader) == [(s, 0) for s in range(5)]


def test_a_skip_range_past_a_mixtures_stop_ends_its_run(docs, tmp_path):
    """The stop rule ends the walk over skipped steps, and the state after it stands at
    the run's end (it walks no further), for both kinds of mixture."""
    mixed_docs = pinring.Mixture([documents(docs), documents(docs)], stop="first")
    with pinring.Loader(mixed_docs, device="cpu") as loader:
        n_docs = len(steps_of(loader))
    with pinring.Loader(mixed_docs, device="cpu", skip_steps=[(3, HUGE)]) as loader:
        assert [s for s, _ in steps_of(loader)] == [0, 1, 2]
        assert loader.state_dict()["step"] == n_docs
    shard = write_shard(tmp_path / "train_000.bin", np.arange(1000))
    windows = [pinring.TokenWindows(shard, seq_len=9, seed=s, order="shuffled") for s in (1, 2)]
    mixed = pinring.Mixture(windows, stop="all")
    with pinring.Loader(mixed, batch_size=4) as loader:
        n_windows = len(steps_of(loader))
    with pinring.Loader(mixed, batch_size=4, skip_steps=[(3, HUGE)]) as loader:
        assert [s for s, _ in steps_of(loader)] == [0, 1, 2]
        state = loader.state_dict()
        assert state["step"] == n_windows and state["consumed"] == 4 * n_windows
    with pinring.Loader(mixed, batch_size=4, state=state) as loader:
        assert loader.pop(timeout=BOUND) is None


def test_start_step_past_the_end_of_a_mixtures_run_is_a_config_error(docs, tmp_path):
    shard = write_shard(tmp_path / "train_000.bin", np.arange(1000))
    windows = [pinring.TokenWindows(shard, seq_len=9, seed=s, order="shuffled") for s in (1, 2)]
    mixed = pinring.Mixture(windows, stop="first")
    with pinring.Loader(mixed, batch_size=4) as loader:
        n = len(steps_of(loader))
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Loader(mixed, batch_size=4, start_step=n)
    assert info.value.argument == "start_step"
    assert f'stop="first") gives it {n} steps (0 to {n - 1})' in str(info.value), str(info.value)
    with pinring.Loader(mixed, batch_size=4, start_step=n - 1) as loader:
        assert [s for s, _ in steps_of(loader)] == [n - 1]
    with pinring.Loader(pinring.Mixture(windows), batch_size=4, start_step=10 * n) as loader:
        assert loader.pop(timeout=BOUND).step == 10 * n  # stop="never": no end
    mixed_docs = pinring.Mixture([documents(docs), documents(docs)], stop="all")
    with pinring.Loader(mixed_docs, device="cpu") as loader:
        n_docs = len(steps_of(loader))
    with pytest.raises(pinring.ConfigError, match=f"{n_docs} steps"):
        pinring.Loader(mixed_docs, device="cpu", start_step=n_docs + 5)


def test_start_step_past_the_end_of_a_capped_run_is_a_config_error(tmp_path):
    shard = write_shard(tmp_path / "train_000.bin", np.arange(1000))
    src = pinring.TokenWindows(shard, seq_len=9)  # 111 windows: 28 batches of 4 an epoch
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Loader(src, batch_size=4, start_step=1000, epochs=1)
    assert info.value.argument == "start_step"
    text = str(info.value)
    assert "start_step=1000" in text and "28 steps (0 to 27" in text and "epochs=1" in text, text
    with pytest.raises(pinring.ConfigError, match="56 steps"):  # the end itself: step 56
        pinring.Loader(src, batch_size=4, start_step=56, epochs=2)
    with pinring.Loader(src, batch_size=4, start_step=55, epochs=2) as loader:
        assert steps_of(loader) == [(55, 1)]  # the last step
    with pinring.Loader(src, batch_size=4, start_step=1000) as loader:  # no cap: no end
        b = loader.pop(timeout=BOUND)
        assert (b.step, b.epoch) == (1000, 1000 // 28)
        b.release()
    # Resumed from a state, the same.
    with pinring.Loader(src, batch_size=4, epochs=1) as loader:
        loader.pop(timeout=BOUND).release()
        state = loader.state_dict()
    with pytest.raises(pinring.ConfigError, match="28 steps"):
        pinring.Loader(src, batch_size=4, start_step=28, epochs=1, state=state)


def test_start_step_past_the_end_of_a_capped_documents_run_is_a_config_error(docs):
    with pinring.Loader(documents(docs), device="cpu", epochs=1) as loader:
        n = len(steps_of(loader))
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Loader(documents(docs), device="cpu", start_step=1000, epochs=1)
    assert info.value.argument == "start_step"
    assert f"{n} steps (0 to {n - 1})" in str(info.value), str(info.value)
    with pytest.raises(pinring.ConfigError, match=f"{2 * n} steps"):  # the end itself
        pinring.Loader(documents(docs), device="cpu", start_step=2 * n, epochs=2)
    with pinring.Loader(documents(docs), device="cpu", start_step=2 * n - 1, epochs=2) as loader:
        assert steps_of(loader) == [(2 * n - 1, 1)]
    loader = pinring.Loader(documents(docs), device="cpu", epochs=1)
    with pytest.raises(pinring.ConfigError, match=f"{n} steps"):
        pinring.Loader(documents(docs), device="cpu", start_step=n, epochs=1,
                       state=loader.state_dict())
    loader.close()
