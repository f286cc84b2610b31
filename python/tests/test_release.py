"""Release: every form of release(event=...) (duck-typed fakes), idempotence, `with
batch:`, dropping the last reference, release from another thread and after close(), and
the slot staying leased while a DLPack view of it lives."""

import gc
import threading

import numpy as np
import pytest

import pinring
from conftest import BOUND


def one_slot_loader(shard, **kw):
    """A loader with a single device slot: the next pop is served only after the batch
    before it was released, so a pop tells whether a release happened."""
    src = pinring.TokenWindows(shard, seq_len=9)
    return pinring.Loader(src, batch_size=2, device="cpu", device_slots=1, decode_threads=1, **kw)


def assert_held(loader):
    """The only device slot is still leased: a short pop times out naming the consumer."""
    with pytest.raises(pinring.PopTimeout) as info:
        loader.pop(timeout=0.05)
    assert info.value.behind == "consumer"


def test_release_is_idempotent_and_frees_the_slot(shard):
    with one_slot_loader(shard) as loader:
        b = loader.pop(timeout=BOUND)
        assert not b.released
        assert_held(loader)
        b.release()
        assert b.released
        b.release()
        b.release(None)
        nxt = loader.pop(timeout=BOUND)
        assert nxt.seq == 1
        nxt.release()


def test_with_batch_releases_at_exit(shard):
    with one_slot_loader(shard) as loader:
        with loader.pop(timeout=BOUND) as b:
            assert not b.released
            x = np.from_dlpack(b)
            assert x.shape == (2, 10)
        assert b.released
        with pytest.raises(BufferError):
            np.from_dlpack(b)
        assert loader.pop(timeout=BOUND).seq == 1


def test_dropping_the_last_reference_releases(shard):
    with one_slot_loader(shard) as loader:
        b = loader.pop(timeout=BOUND)
        del b
        gc.collect()
        b = loader.pop(timeout=BOUND)
        assert b.seq == 1
        b.release()


def test_a_dlpack_view_keeps_the_slot_leased_until_it_goes(shard):
    with one_slot_loader(shard) as loader:
        b = loader.pop(timeout=BOUND)
        x = np.from_dlpack(b)
        first = x.copy()
        del b
        gc.collect()
        assert_held(loader)  # the view still reads the slot
        np.testing.assert_array_equal(x, first)
        del x
        gc.collect()
        assert loader.pop(timeout=BOUND).seq == 1


def test_an_unconsumed_capsule_keeps_the_slot_until_it_is_destroyed(shard):
    with one_slot_loader(shard) as loader:
        b = loader.pop(timeout=BOUND)
        capsule = b.__dlpack__()
        del b
        gc.collect()
        assert_held(loader)
        del capsule  # its destructor runs the DLPack deleter
        gc.collect()
        assert loader.pop(timeout=BOUND).seq == 1


def test_an_explicit_release_frees_the_slot_while_a_view_lives(shard):
    with one_slot_loader(shard) as loader:
        b = loader.pop(timeout=BOUND)
        x = np.from_dlpack(b)
        b.release()  # the caller promises it is done reading
        assert loader.pop(timeout=BOUND).seq == 1
        del x


def test_release_from_another_thread(shard):
    with one_slot_loader(shard) as loader:
        b = loader.pop(timeout=BOUND)
        handed = threading.Event()
        errors = []

        def worker():
            handed.wait(BOUND)
            try:
                b.release()
            except BaseException as e:  # surfaced in the main thread
                errors.append(e)

        t = threading.Thread(target=worker)
        t.start()
        handed.set()
        nxt = loader.pop(timeout=BOUND)  # served once the worker released batch 0
        t.join(BOUND)
        assert not errors and b.released and nxt.seq == 1
        nxt.release()


def test_many_batches_released_out_of_order_from_threads(shard):
    src = pinring.TokenWindows(shard, seq_len=9)
    with pinring.Loader(src, batch_size=3, device="cpu", device_slots=4, epochs=4) as loader:
        held = []
        seqs = []
        for b in (b for _ in range(4) for b in loader):
            seqs.append(b.seq)
            held.append(b)
            if len(held) == 4:
                threads = [threading.Thread(target=h.release) for h in reversed(held)]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join(BOUND)
                held.clear()
        for h in held:
            h.release()
    assert seqs == list(range(len(seqs))) and len(seqs) == loader.total_batches


def test_release_and_views_after_close(shard):
    loader = one_slot_loader(shard, host_slots=2)
    b = loader.pop(timeout=BOUND)
    x = np.from_dlpack(b)
    want = x.copy()
    loader.close()
    assert loader.closed
    del loader
    gc.collect()
    # The batch (and the view) keep the slot's memory alive after the loader is gone.
    np.testing.assert_array_equal(x, want)
    np.testing.assert_array_equal(np.from_dlpack(b), want)
    b.release()
    b.release()
    assert b.released
    # The view outlives the release too: its memory stays mapped (its bytes are no longer
    # promised), so reading it is not a crash.
    assert x.shape == want.shape and int(x.sum()) >= 0


class TorchEvent:
    """Looks like torch.cuda.Event (which also has .record())."""

    cuda_event = 0x1234

    def record(self, stream=None):
        raise AssertionError("release must not re-record the caller's event")


class TorchStream:
    """Looks like torch.cuda.Stream."""

    cuda_stream = 0x5678

    def record_event(self, event=None):
        raise AssertionError("not called on the cpu backend")


class CupyStream:
    """Looks like cupy.cuda.Stream: .record(), .ptr and .wait_event()."""

    ptr = 0x9ABC

    def record(self, event=None):
        raise AssertionError("not called on the cpu backend")

    def wait_event(self, event):
        pass


class Event:
    """Looks like cupy.cuda.Event: .ptr, and a .record(stream=None) of its own."""

    ptr = 0xDEF0

    def record(self, stream=None):
        raise AssertionError("release must not re-record the caller's event")


class BareStream:
    """Only .record() (the stream form, as documented)."""

    def record(self, event=None):
        raise AssertionError("not called on the cpu backend")


class BareEvent:
    """Only .ptr (the cupy Event form)."""

    ptr = 0x1111


@pytest.mark.parametrize(
    "fence, form",
    [
        (0x1234, "raw CUevent (an int)"),
        (TorchEvent(), "torch.cuda.Event"),
        (TorchStream(), "torch.cuda.Stream"),
        (CupyStream(), "cupy.cuda.Stream"),
        (Event(), "cupy.cuda.Event"),
        (BareStream(), "cupy.cuda.Stream"),
        (BareEvent(), "cupy.cuda.Event"),
    ],
)
def test_cuda_fences_are_recognised_and_refused_on_the_cpu_backend(shard, fence, form):
    with one_slot_loader(shard) as loader:
        b = loader.pop(timeout=BOUND)
        with pytest.raises(TypeError) as info:
            b.release(event=fence)
        assert "cpu backend" in str(info.value) and form in str(info.value)
        assert not b.released, "a refused release leaves the batch leased"
        assert_held(loader)
        b.release()
        assert loader.pop(timeout=BOUND).seq == 1


@pytest.mark.parametrize("fence", ["stream", 1.5, True, object(), [1]])
def test_anything_else_is_a_type_error_naming_the_accepted_forms(shard, fence):
    with one_slot_loader(shard) as loader:
        b = loader.pop(timeout=BOUND)
        with pytest.raises(TypeError) as info:
            b.release(event=fence)
        for name in ["None", "int", "torch.cuda.Event", "torch.cuda.Stream", "cupy.cuda.Stream", "cupy.cuda.Event"]:
            assert name in str(info.value)
        assert not b.released
        b.release()


def test_rows_read_first_after_release_are_the_batchs(shard):
    """Issue 29 item 4: a batch's ids, sources and locations read for the first time
    after release() are its own (release copies them), as help() and the README say."""
    with pinring.Loader(pinring.TokenWindows(shard, seq_len=99), batch_size=4, epochs=1) as loader:
        first = loader.pop(timeout=BOUND)
        first.release()
        second = loader.pop(timeout=BOUND)
        second.release()  # nothing read before
        assert second.released
        assert first.sample_ids.tolist() == [0, 1, 2, 3]
        assert second.sample_ids.tolist() == [4, 5, 6, 7]
        assert second.sources.tolist() == [0, 0, 0, 0]
        assert [loc.offset for loc in second.locate()] == [396, 495, 594, 693]
    for name in ("sample_ids", "doc_ids", "sources"):
        doc = getattr(pinring.Batch, name).__doc__
        assert "after `release()`" in doc and "BufferError" not in doc, (name, doc)
    assert "BufferError" not in pinring.Batch.locate.__doc__
