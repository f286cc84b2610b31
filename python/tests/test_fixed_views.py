"""Issue 23, the Python half, on the cpu backend: Loader(stream=...) (its forms, and its
refusal on cpu), fixed views (Loader(fixed_views=...), batch.view(): one object per slot,
the same every time the slot comes round; a short batch narrowed; a view read after the
release shows the poison pattern), and the per-batch path (sample ids read lazily, before
the release). The GPU half is in test_gpu.py."""

import inspect

import numpy as np
import pytest

import pinring
from conftest import BOUND, grid_windows, read_shard, write_shard
from docs_data import write_doc_shards

T = 9  # seq_len: windows of 10 tokens


def windows(shard, **kw):
    return pinring.TokenWindows(shard, seq_len=T, **kw)


class CountingConsumer:
    """A DLPack consumer (numpy's) that counts its calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, producer):
        self.calls += 1
        return np.from_dlpack(producer)


# stream=


class TorchLikeStream:
    cuda_stream = 1234


class ProtocolStream:
    def __cuda_stream__(self):
        return (0, 4321)


class CupyLikeStream:
    ptr = 99

    def record(self):
        pass

    def wait_event(self, event):
        pass


class CupyLikeEvent:
    ptr = 7

    def record(self, stream=None):
        pass


class TorchLikeEvent:
    cuda_event = 5


@pytest.mark.parametrize(
    "stream, form",
    [(0, "raw CUstream"), (7, "raw CUstream"), (TorchLikeStream(), "torch.cuda.Stream"),
     (ProtocolStream(), "protocol"), (CupyLikeStream(), "cupy.cuda.Stream")],
)
def test_a_stream_is_refused_on_the_cpu_backend_naming_its_form(shard, stream, form):
    with pytest.raises(pinring.ConfigError, match="cpu backend") as info:
        pinring.Loader(windows(shard), batch_size=4, stream=stream)
    assert info.value.argument == "stream" and form in str(info.value)


@pytest.mark.parametrize(
    "stream, message",
    [("cuda", "not a stream"), (True, "not a stream"), (TorchLikeEvent(), "is an event"),
     (CupyLikeEvent(), "is an event"), (-1, "not a valid CUstream")],
)
def test_what_is_not_a_stream_is_a_type_error_saying_what_is(shard, stream, message):
    with pytest.raises((TypeError, ValueError), match=message) as info:
        pinring.Loader(windows(shard), batch_size=4, device="cpu", stream=stream)
    assert "torch.cuda.Stream" in str(info.value)


def test_a_bad_stream_protocol_answer_is_a_type_error(shard):
    class Bad:
        def __cuda_stream__(self):
            return 5

    with pytest.raises(TypeError, match="not a \\(version, handle\\) pair"):
        pinring.Loader(windows(shard), batch_size=4, stream=Bad())


def test_stream_none_is_the_default_and_every_new_parameter_is_documented(shard):
    sig = inspect.signature(pinring.Loader)
    assert sig.parameters["stream"].default is None
    assert sig.parameters["fixed_views"].default is None
    assert sig.parameters["stream"].kind == inspect.Parameter.KEYWORD_ONLY
    for name in ("stream", "fixed_views"):
        assert f"    {name}: " in pinring.Loader.__doc__, name
    assert "field" in inspect.signature(pinring.Batch.view).parameters
    assert "    field: " in pinring.Batch.view.__doc__
    with pinring.Loader(windows(shard), batch_size=4, epochs=1, stream=None) as loader:
        b = loader.pop(timeout=BOUND)
        b.release()


# fixed_views=


def test_fixed_views_must_be_callable(shard):
    with pytest.raises(TypeError, match="not callable"):
        pinring.Loader(windows(shard), batch_size=4, fixed_views=3)


def test_view_without_fixed_views_is_a_config_error_naming_the_argument(shard):
    with pinring.Loader(windows(shard), batch_size=4) as loader:
        b = loader.pop(timeout=BOUND)
        with pytest.raises(pinring.ConfigError, match="fixed_views=torch.from_dlpack") as info:
            b.view()
        assert info.value.argument == "fixed_views"
        b.release()


def test_a_fixed_view_is_the_same_object_every_time_its_slot_comes_round(shard):
    """One view per slot, made once (the consumer is called device_slots times in all), at
    the slot's address; every batch of the slot reads through it, and it holds the batch."""
    reference = np.array(grid_windows([read_shard(shard)], T), dtype=np.int32)
    consumer = CountingConsumer()
    per_slot = {}
    with pinring.Loader(windows(shard, dtype="int32"), batch_size=4, device_slots=3, epochs=2,
                        drop_last=True, fixed_views=consumer) as loader:
        for k in range(2 * loader.epoch_batches):
            b = loader.pop(timeout=BOUND)
            v = b.view()
            assert b.view() is v and b.slot in range(3)
            first = per_slot.setdefault(b.slot, v)
            assert v is first, f"batch {k}: slot {b.slot} gave another object"
            assert v.shape == (4, T + 1) and v.dtype == np.int32
            assert v.ctypes.data == b.ptr, "a view of the slot itself"
            row = k % loader.epoch_batches
            np.testing.assert_array_equal(v, reference[4 * row : 4 * row + 4])
            b.release()
    assert sorted(per_slot) == [0, 1, 2]
    assert consumer.calls == 3, f"the consumer was called {consumer.calls} times for 3 slots"


def test_a_short_batch_is_a_narrow_of_its_slots_view(shard):
    """111 windows in batches of 4: the epoch's last batch has 3 rows. Its view is
    view[:3] of the slot's cached view (the same address, another object); the slot's next
    full batch gets the cached object again."""
    reference = np.array(grid_windows([read_shard(shard)], T), dtype=np.int32)
    per_slot = {}
    with pinring.Loader(windows(shard, dtype="int32"), batch_size=4, device_slots=2, epochs=2,
                        fixed_views=np.from_dlpack) as loader:
        per_epoch = loader.epoch_batches
        assert per_epoch == 28
        short_seen = full_after_short = False
        for k in range(2 * per_epoch):
            b = loader.pop(timeout=BOUND)
            v = b.view()
            row = k % per_epoch
            if b.samples < 4:
                assert b.samples == 3 and v.shape == (3, T + 1)
                cached = per_slot[b.slot]
                assert v is not cached and v.ctypes.data == cached.ctypes.data == b.ptr
                assert np.shares_memory(v, cached)
                short_seen = True
            else:
                assert v is per_slot.setdefault(b.slot, v)
                full_after_short |= short_seen
            np.testing.assert_array_equal(v, reference[4 * row : 4 * row + b.samples])
            b.release()
        assert short_seen and full_after_short


def test_a_view_read_after_release_shows_the_poison_pattern(tmp_path):
    """One batch, so nothing copies into its slot after it: with poison_released=True the
    view kept past release() reads -1 (0xFF bytes), and the batch's bytes without it. A
    view asked for after the release is a BufferError."""
    shard = write_shard(tmp_path / "one.bin", np.arange(4 * T + 1))
    for poison in (True, False):
        with pinring.Loader(windows(shard, dtype="int32"), batch_size=4, epochs=1,
                            poison_released=poison, fixed_views=np.from_dlpack) as loader:
            b = loader.pop(timeout=BOUND)
            v = b.view()
            kept = v.copy()
            assert kept[0, 0] == 0 and kept[3, T] == 4 * T
            b.release()
            with pytest.raises(BufferError, match="released"):
                b.view()
            if poison:
                assert (v == -1).all(), f"not poisoned: {v}"
            else:
                np.testing.assert_array_equal(v, kept)
            assert loader.pop(timeout=BOUND) is None


def test_fixed_views_of_fields_are_per_slot_and_narrowed_to_the_step(tmp_path):
    """A Documents step: one view per field and slot, `(max_len,)`; steps 0-3 (1024 tokens)
    are narrows of the room the schedule's later steps (1536, from step 4) fill, which get
    the cached object itself. Each equals the field's own export."""
    shards = write_doc_shards(tmp_path, [30_000, 22_000])
    src = pinring.Documents(shards, tokens_per_batch=1024, max_seq_len=256,
                            schedule=[(4, 1536, 512)])
    consumer = CountingConsumer()
    cached = {}
    with pinring.Loader(src, device="cpu", device_slots=2, fixed_views=consumer) as loader:
        for k in range(12):
            b = loader.pop(timeout=BOUND)
            assert b.step == k
            for name in b.fields:
                v = b.view(name)
                want = np.from_dlpack(b[name])
                np.testing.assert_array_equal(v, want)
                assert v.ctypes.data == b[name].ptr and v.shape == b[name].shape
                key = (b.slot, name)
                if k >= 4 or name == "cu_seqlens":
                    assert v is cached.setdefault(key, v), (k, name)
                else:
                    assert v.shape[0] < 1536 and key not in cached
            with pytest.raises(KeyError, match="several fields"):
                b.view()
            with pytest.raises(KeyError, match="no field"):
                b.view("nope")
            b.release()
    assert consumer.calls == 2 * len(src.fields)


def test_close_lets_the_fixed_views_go_and_a_view_kept_stays_readable(shard):
    """close() drops the loader's views (so that the pipeline can be freed with the last
    batch); a view the caller kept keeps the slot's memory alive: readable (the batch,
    while it is leased) after close, and memory still after the batch's release."""
    with pinring.Loader(windows(shard, dtype="int32"), batch_size=4,
                        fixed_views=np.from_dlpack) as loader:
        b = loader.pop(timeout=BOUND)
        v = b.view()
        want = v.copy()
    assert loader.closed
    np.testing.assert_array_equal(v, want)
    b.release()
    del b, loader
    assert v.shape == (4, T + 1) and int(v.sum()) == int(v.astype(np.int64).sum())


# The per-batch path.


def test_sample_ids_are_read_once_and_kept_past_the_release(shard):
    with pinring.Loader(windows(shard), batch_size=4, epochs=1) as loader:
        b = loader.pop(timeout=BOUND)
        ids = b.sample_ids
        b.release()
        np.testing.assert_array_equal(b.sample_ids, ids)  # kept once read
        assert list(ids) == [0, 1, 2, 3]
        b = loader.pop(timeout=BOUND)
        b.release()  # an explicit release keeps the rows too (sources, locate() after a step)
        assert list(b.sample_ids) == [4, 5, 6, 7]
        assert len(b.locate()) == 4


def test_a_ready_batch_and_a_waited_one_count_the_same(shard):
    """pop() takes a ready batch at once and waits for one that is not; both count in the
    state: after every batch of the epoch the state says so."""
    with pinring.Loader(windows(shard), batch_size=4, epochs=1) as loader:
        n = 0
        while (b := loader.pop(timeout=BOUND)) is not None:
            b.release()
            n += 1
        assert n == loader.epoch_batches
        state = loader.state_dict()
        assert (state["epoch"], state["consumed"]) == (1, 0), state
