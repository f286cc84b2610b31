"""GPU checks of the cuda backend through PyTorch (and CuPy where installed).

Skipped unless torch is importable and sees a CUDA device. What they show:
- torch.from_dlpack(batch) is a zero-copy view: its data_ptr() is the slot's address, and
  its content equals the numpy reader's;
- damacy's two patterns (seed 000) stay correct under a kernel that holds the slot
  (torch.cuda._sleep), checked on the device, 10,000 batches each, 0 wrong: deferred
  release on torch.cuda.current_stream(), and a dedicated copy stream with the destination
  allocated on the default stream;
- the check can fail: a release whose fence does not cover the reads corrupts;
- the fence is captured at release time (re-recording the caller's event later does not
  move it);
- __dlpack__(stream=...) returns while the copy stream is still busy (stream-side wait);
- every release form frees the slot; cupy consumes a batch;
- packed documents (issue 21): every field of every step, read on the device, equals the
  faithful modded-nanogpt generator's; a 10,000-step soak (a kernel holding each slot, a
  device-side comparison with the generator's values, a schedule change at step 5,000)
  has 0 wrong; and the same comparison sees a release that does not cover the reads;
- modded-nanogpt's drop-in (issue 31, pinring.modded.distributed_data_generator): a
  3,000-send soak (G=2, then a change of every size by .send()) and 1,000 sends of
  validation's walk, a kernel holding each step, all five outputs equal to master's own
  generator code's (four compared on the device, the numpy host view on the host), 0
  wrong; and the same comparison sees steps one send off.

Every check of data runs on the device and is read back once, at the end of a run.
"""

import threading
import time
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch sees no CUDA device", allow_module_level=True)

import pinring  # noqa: E402
from conftest import BOUND, grid_windows, popped, read_shard, write_shard  # noqa: E402

DEV = torch.device("cuda", 0)
T = 127  # seq_len: windows of 128 tokens
B = 8
VOCAB = 1 << 16  # token i of the shard is i % 65536
N_TOKENS = 1_000_003
BATCHES = 10_000


@pytest.fixture(scope="module")
def shard(tmp_path_factory):
    path = tmp_path_factory.mktemp("gpu") / "train_000.bin"
    return write_shard(path, np.arange(N_TOKENS, dtype=np.int64) % VOCAB)


@pytest.fixture(scope="module")
def cycles_per_ms():
    """torch.cuda._sleep's cycles per millisecond on this GPU (measured once)."""
    torch.cuda._sleep(1000)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(20_000_000)
    end.record()
    end.synchronize()
    return int(20_000_000 / start.elapsed_time(end))


def windows_source(shard, **kw):
    return pinring.TokenWindows(shard, seq_len=T, dtype="int32", **kw)


def count_wrong(x, seq, epoch_len, batch_size=B):
    """A device tensor: rows of batch `seq` that differ from what the sequential source
    puts there. A batch never spans two epochs: each epoch is ceil(epoch_len / batch_size)
    batches, the last one short; sample j of an epoch starts at token j * T. Runs on the
    current stream."""
    per_epoch = -(-epoch_len // batch_size)
    rows = torch.arange(x.shape[0], device=x.device, dtype=torch.int64)
    start = ((seq % per_epoch) * batch_size + rows) * T
    expected = (start[:, None] + torch.arange(T + 1, device=x.device)[None, :]) % VOCAB
    return (x.to(torch.int64) != expected).any(dim=1).sum()


def test_zero_copy_and_content_equal_to_the_numpy_reader(shard):
    reference = np.array(grid_windows([read_shard(shard)], T))
    for device in ["cuda:0", "cuda", 0, torch.device("cuda", 0)]:
        with pinring.Loader(windows_source(shard), B, device=device) as loader:
            assert loader.device == "cuda:0"
            for k in range(20):
                b = loader.pop(timeout=BOUND)
                assert b.device == "cuda:0" and b.__dlpack_device__() == (2, 0)
                x = torch.from_dlpack(b)
                assert x.device == DEV and x.dtype == torch.int32 and tuple(x.shape) == b.shape
                assert x.data_ptr() == b.ptr, "a view of the slot, not a copy"
                np.testing.assert_array_equal(x.cpu().numpy(), reference[k * B : (k + 1) * B])
                b.release(event=torch.cuda.current_stream())
    for dtype, torch_dtype in [("int64", torch.int64), ("uint16", torch.uint16)]:
        src = pinring.TokenWindows(shard, seq_len=T, dtype=dtype)
        with pinring.Loader(src, B, device="cuda:0") as loader:
            b = loader.pop(timeout=BOUND)
            x = torch.from_dlpack(b)
            assert x.dtype == torch_dtype and x.data_ptr() == b.ptr
            got = x.view(torch.int16).cpu().numpy().view(np.uint16) if dtype == "uint16" else x.cpu().numpy()
            np.testing.assert_array_equal(got, reference[:B].astype(dtype))
            b.release(event=torch.cuda.current_stream())


def prefetched(fetch, n):
    """`n` results of `fetch()`, each next one fetched on a worker thread while the caller
    works on the one before; none is kept here once handed out (the caller's `del` frees
    it)."""
    with ThreadPoolExecutor(1) as pool:
        future = pool.submit(fetch)
        for i in range(n):
            ready = [future.result()]
            future = pool.submit(fetch) if i + 1 < n else None
            yield ready.pop()


def run_deferred_release(loader, n, cycles):
    """Seed 000's preferred pattern: a prefetch thread pops and views the batch; the
    training step (here a kernel holding the slot, then the check) runs on the current
    stream; the batch is released after the step is enqueued, fenced on that stream."""
    wrong = torch.zeros((), dtype=torch.int64, device=DEV)
    epoch_len = loader.epoch_len

    def prefetch():
        batch = loader.pop(timeout=BOUND)
        return torch.from_dlpack(batch), batch  # zero-copy view of the slot

    for x, batch in prefetched(prefetch, n):
        torch.cuda._sleep(cycles)  # the step: holds the slot ...
        wrong += count_wrong(x, batch.seq, epoch_len)  # ... then reads it
        del x
        batch.release(event=torch.cuda.current_stream())  # no host sync
    torch.cuda.synchronize()
    return int(wrong)


def run_copy_stream(loader, n, cycles):
    """Seed 000's dedicated-copy-stream pattern: the destination is allocated on the
    default stream, the D2D copy runs on a side stream (which waits for the batch), the
    slot is released fenced on that stream as soon as the copy is enqueued. A kernel on the
    copy stream before the copy holds the slot."""
    wrong = torch.zeros((), dtype=torch.int64, device=DEV)
    epoch_len = loader.epoch_len
    copy_stream = torch.cuda.Stream()

    def prefetch():
        batch = loader.pop(timeout=BOUND)
        tensor = torch.empty(batch.shape, dtype=torch.int32, device=DEV)  # default stream's pool
        with torch.cuda.stream(copy_stream):
            view = torch.from_dlpack(batch)  # copy_stream waits for the batch, stream-side
            torch.cuda._sleep(cycles)  # holds the slot: the copy reads it late
            tensor.copy_(view)
        batch.release(event=copy_stream)  # slot reuse waits for copy_stream
        seq = batch.seq
        del view
        copy_stream.synchronize()
        return tensor, seq

    for tensor, seq in prefetched(prefetch, n):
        wrong += count_wrong(tensor, seq, epoch_len)
    torch.cuda.synchronize()
    return int(wrong)


def run_unfenced(loader, n, cycles):
    """Released with an event recorded *before* the kernel that reads the slot: the fence
    covers none of the reads, so the slot may be refilled while the step still holds it.
    The batch is declared to a side stream that only waits for it (every declared stream
    is fenced at release: declaring the reading stream would cover the reads), and the
    reading stream waits for that side stream."""
    wrong = torch.zeros((), dtype=torch.int64, device=DEV)
    epoch_len = loader.epoch_len
    side = torch.cuda.Stream()
    for _ in range(n):
        batch = loader.pop(timeout=BOUND)
        x = torch.from_dlpack(batch.__dlpack__(stream=side.cuda_stream))
        torch.cuda.current_stream().wait_stream(side)
        early = torch.cuda.Event()
        early.record()  # before the hold and the check
        torch.cuda._sleep(cycles)
        wrong += count_wrong(x, batch.seq, epoch_len)
        del x
        batch.release(event=early)
    torch.cuda.synchronize()
    return int(wrong)


def run_rerecorded_event(loader, n, cycles):
    """Released with the caller's event recorded after the reads, then re-recorded at once
    on an idle stream: the fence is the event as it stood at release time."""
    wrong = torch.zeros((), dtype=torch.int64, device=DEV)
    epoch_len = loader.epoch_len
    idle = torch.cuda.Stream()
    event = torch.cuda.Event()
    for _ in range(n):
        batch = loader.pop(timeout=BOUND)
        x = torch.from_dlpack(batch)
        torch.cuda._sleep(cycles)
        wrong += count_wrong(x, batch.seq, epoch_len)
        del x
        event.record()
        batch.release(event=event)  # the int handle, via .cuda_event
        event.record(idle)  # moving the event now must not move the fence
    torch.cuda.synchronize()
    return int(wrong)


@pytest.mark.parametrize(
    "run", [run_deferred_release, run_copy_stream], ids=["deferred_release", "copy_stream"]
)
def test_seed_patterns_hold_the_slot_and_read_it_right(shard, cycles_per_ms, run):
    cycles = cycles_per_ms // 20  # a 50 us hold per batch
    with pinring.Loader(windows_source(shard), B, device="cuda:0", epochs=None) as loader:
        wrong = run(loader, BATCHES, cycles)
        stats = loader.stats()
    print(f"{run.__name__}: {BATCHES} batches, {wrong} wrong; stats {stats}")
    assert stats["batches"] >= BATCHES
    assert wrong == 0


def test_the_check_can_fail_a_release_that_does_not_cover_the_reads_corrupts(shard, cycles_per_ms):
    with pinring.Loader(windows_source(shard), B, device="cuda:0", epochs=None) as loader:
        wrong = run_unfenced(loader, 200, cycles_per_ms)  # a 1 ms hold per batch
    print(f"unfenced: {wrong} wrong rows of 1600")
    assert wrong > 0, "the device check must see the slot refilled under the reading kernel"


def test_the_fence_is_captured_at_release_time(shard, cycles_per_ms):
    with pinring.Loader(windows_source(shard), B, device="cuda:0", epochs=None) as loader:
        wrong = run_rerecorded_event(loader, 1000, cycles_per_ms // 10)
    assert wrong == 0


def test_dlpack_returns_while_the_copy_stream_is_busy(shard, cycles_per_ms):
    """Batch 0's slot is released fenced on a stream busy for ~1 s, so the copy of batch 2
    into it waits on the copy stream for that long. Its token is handed out as soon as the
    copy is enqueued: pop and __dlpack__ return at once, the consumer stream waits on the
    device, and the data is right once it has waited."""
    side = torch.cuda.Stream()
    consumer = torch.cuda.Stream()
    with pinring.Loader(windows_source(shard), B, device="cuda:0", device_slots=2) as loader:
        b0 = loader.pop(timeout=BOUND)
        b1 = loader.pop(timeout=BOUND)
        with torch.cuda.stream(side):
            torch.cuda._sleep(cycles_per_ms * 1000)  # ~1 s
        b0.release(event=side)
        b1.release(event=torch.cuda.current_stream())
        b2 = loader.pop(timeout=BOUND)
        assert b2.slot == b0.slot
        start = time.perf_counter()
        capsule = b2.__dlpack__(stream=consumer.cuda_stream, max_version=(1, 0))
        returned = time.perf_counter() - start
        after = torch.cuda.Event()
        after.record(consumer)
        assert not after.query(), "the consumer stream waits for the copy on the device"
        assert not side.query(), "the side stream still holds the copy back"
        assert returned < 0.1, f"__dlpack__ took {returned:.3f} s: it blocked on the copy"
        del capsule
        with torch.cuda.stream(consumer):
            x = torch.from_dlpack(b2)
            wrong = count_wrong(x, b2.seq, loader.epoch_len)
        consumer.synchronize()
        assert int(wrong) == 0
        del x
        b2.release(event=consumer)


def test_every_release_form_frees_the_slot(shard):
    """With one device slot, the next pop is served only once the release took effect."""
    stream = torch.cuda.Stream()
    with pinring.Loader(windows_source(shard), B, device="cuda:0", device_slots=1) as loader:

        def step(release):
            b = loader.pop(timeout=BOUND)
            x = torch.from_dlpack(b)
            x.sum()
            release(b)
            return b

        step(lambda b: b.release(event=torch.cuda.current_stream()))  # torch Stream
        step(lambda b: b.release(event=stream))
        ev = torch.cuda.Event()

        def with_event(b):
            ev.record()
            b.release(event=ev)  # torch Event (.cuda_event)

        step(with_event)

        def with_int(b):
            ev.record()
            b.release(event=ev.cuda_event)  # raw CUevent

        step(with_int)
        step(lambda b: b.release())  # fenced on the stream declared to __dlpack__
        b = step(lambda b: b.__exit__(None, None, None))  # `with batch:`
        assert b.released
        b = loader.pop(timeout=BOUND)
        b.__dlpack__(stream=-1)  # nothing declared: release() is conservative (a sync)
        b.release()
        b = loader.pop(timeout=BOUND)
        with pytest.raises(ValueError, match="never created or recorded"):
            b.release(event=torch.cuda.Event())
        assert not b.released
        with pytest.raises(TypeError, match="accepts None"):
            b.release(event="stream")
        del b  # dropping the last reference releases
        assert loader.pop(timeout=BOUND) is not None


def test_release_from_another_thread_and_after_close(shard):
    loader = pinring.Loader(windows_source(shard), B, device="cuda:0", device_slots=2)
    b0, b1 = loader.pop(timeout=BOUND), loader.pop(timeout=BOUND)
    x1 = torch.from_dlpack(b1)
    t = threading.Thread(target=lambda: b0.release(event=torch.cuda.current_stream()))
    t.start()
    t.join(BOUND)
    assert b0.released
    loader.close()
    del loader
    torch.cuda.synchronize()
    wrong = count_wrong(x1, b1.seq, windows_source(shard).epoch_len)
    assert int(wrong) == 0, "the view stays valid after close"
    b1.release(event=torch.cuda.current_stream())


def test_cupy_consumes_a_batch(shard):
    cupy = pytest.importorskip("cupy")
    reference = np.array(grid_windows([read_shard(shard)], T))
    with pinring.Loader(windows_source(shard), B, device="cuda:0", device_slots=1) as loader:
        b = loader.pop(timeout=BOUND)
        a = cupy.from_dlpack(b)
        assert a.data.ptr == b.ptr and a.shape == b.shape and a.dtype == np.int32
        np.testing.assert_array_equal(cupy.asnumpy(a), reference[:B])
        b.release(event=cupy.cuda.get_current_stream())  # cupy Stream
        b = loader.pop(timeout=BOUND)
        a = cupy.from_dlpack(b)
        np.testing.assert_array_equal(cupy.asnumpy(a), reference[B : 2 * B])
        ev = cupy.cuda.Event()
        ev.record()
        b.release(event=ev)  # cupy Event (has .record() too: must not be taken for a stream)
        s = cupy.cuda.Stream(non_blocking=True)
        b = loader.pop(timeout=BOUND)
        with s:
            a = cupy.from_dlpack(b)  # s waits for the batch
            total = int(a.astype(cupy.int64).sum())
        assert total == int(reference[2 * B : 3 * B].astype(np.int64).sum())
        b.release(event=s)
        assert loader.pop(timeout=BOUND) is not None


# Issue 19, items 2, 3 and 8.


def test_every_declared_stream_is_fenced_by_release_and_by_the_last_view(shard, cycles_per_ms):
    """Item 2: two consumers view one batch on two streams; the first reads it late (a
    kernel holds its stream first). Both `release()` without an event and the release
    when the last view dies must fence the slot on both streams: the slot's next copy
    waits for the late reader. Only the last declared stream used to be fenced, and the
    late reader saw the next batch's bytes."""
    s1, s2 = torch.cuda.Stream(), torch.cuda.Stream()
    for how in ["release", "last view"]:
        with pinring.Loader(windows_source(shard), B, device="cuda:0", device_slots=1, epochs=None) as loader:
            epoch_len = loader.epoch_len
            wrong = torch.zeros((), dtype=torch.int64, device=DEV)
            for _ in range(20):
                b = loader.pop(timeout=BOUND)
                seq = b.seq
                with torch.cuda.stream(s1):
                    x1 = torch.from_dlpack(b)  # declares s1
                    torch.cuda._sleep(cycles_per_ms * 5)  # holds s1: it reads late
                    w1 = count_wrong(x1, seq, epoch_len)
                with torch.cuda.stream(s2):
                    x2 = torch.from_dlpack(b)  # declares s2, last
                    w2 = count_wrong(x2, seq, epoch_len)
                if how == "release":
                    b.release()
                    del x1, x2
                else:
                    del b, x1, x2  # the last holder goes: its release fences
                with torch.cuda.stream(s1):
                    wrong += w1
                with torch.cuda.stream(s2):
                    wrong += w2
            torch.cuda.synchronize()
        assert int(wrong) == 0, f"{how}: {int(wrong)} rows read after the slot was refilled"


def test_release_from_another_thread_after_the_per_thread_stream(shard, cycles_per_ms):
    """Item 3: a thread views a batch on its per-thread default stream (`__dlpack__`
    stream=2) and reads it late; another thread calls `release()`. The fence must cover
    the declaring thread's stream (it used to be recorded on the releasing thread's own,
    idle, per-thread stream, and the slot was refilled under the reader)."""
    per_thread = torch.cuda.ExternalStream(2)  # cudaStreamPerThread: the calling thread's
    with pinring.Loader(windows_source(shard), B, device="cuda:0", device_slots=1, epochs=None) as loader:
        epoch_len = loader.epoch_len
        results = []
        for _ in range(10):
            b = loader.pop(timeout=BOUND)
            read = threading.Event()

            def reader():
                with torch.cuda.stream(per_thread):
                    capsule = b.__dlpack__(stream=2)
                    x = torch.from_dlpack(capsule)
                    torch.cuda._sleep(cycles_per_ms * 5)
                    results.append(count_wrong(x, b.seq, epoch_len))
                    done = torch.cuda.Event()
                    done.record()
                    results.append(done)
                read.set()

            t = threading.Thread(target=reader)
            t.start()
            read.wait(BOUND)
            b.release()  # from this thread, not the one that declared stream 2
            t.join(BOUND)
        nxt = loader.pop(timeout=BOUND)  # the slot's next copy came after the fence
        nxt.release()
        for done in results[1::2]:
            done.synchronize()
        wrong = sum(int(w) for w in results[0::2])
    assert wrong == 0, f"{wrong} rows read after the slot was refilled"


GIL_CHILD = """
import ctypes, sys, threading
import torch, pinring

sys.setswitchinterval(1000)  # the helper below runs only when the GIL is released
path, mode = sys.argv[1], sys.argv[2]
libcuda = ctypes.CDLL("libcuda.so.1")
flag = torch.zeros(1, dtype=torch.int32, pin_memory=True)  # host memory the GPU polls
stream = torch.cuda.current_stream()
# The stream waits until the host writes 1 into `flag` (cuStreamWaitValue32, GEQ).
rc = libcuda.cuStreamWaitValue32_v2(ctypes.c_void_p(stream.cuda_stream), ctypes.c_uint64(flag.data_ptr()), ctypes.c_uint32(1), ctypes.c_uint(0))
if rc != 0:
    print("UNSUPPORTED", rc, flush=True)
    sys.exit(0)
go = threading.Event()

def helper():
    go.wait()
    # Runs only once the main thread released the GIL inside the blocking drop.
    ctypes.c_int32.from_address(flag.data_ptr()).value = 1

loader = pinring.Loader(pinring.TokenWindows(path, seq_len=127), 8, device="cuda:0", device_slots=2)
b = loader.pop(timeout=30)
threading.Thread(target=helper, daemon=True).start()
if mode == "del":
    b.__dlpack__(stream=-1)  # nothing declared: the drop is conservative, a context sync
    go.set()
    del b
elif mode == "deleter":
    x = torch.from_dlpack(b.__dlpack__(stream=-1))  # the tensor holds the lease
    del b
    go.set()
    del x  # torch calls the DLPack deleter: the last holder
elif mode == "loader":
    b.release(event=stream)  # fenced behind the wait: the pipeline's teardown waits too
    del b
    go.set()
    del loader  # the last holder of the pipeline
torch.cuda.synchronize()
print("DONE", flush=True)
"""


@pytest.mark.parametrize("mode", ["del", "deleter", "loader"])
def test_blocking_drops_release_the_gil(shard, tmp_path, mode):
    """Item 8: a drop that blocks (an unbound batch's conservative release, by `del` or by
    a DLPack deleter; the last holder's pipeline teardown) must release the GIL. The GPU
    here waits for a flag only another Python thread sets: holding the GIL in the drop
    deadlocks the child (the parent gives up after a bound); releasing it lets the helper
    run and the drop end. No timing: the helper cannot run at all without the GIL."""
    import subprocess
    import sys

    script = tmp_path / "child.py"
    script.write_text(GIL_CHILD)
    try:
        run = subprocess.run([sys.executable, str(script), shard, mode], capture_output=True, text=True, timeout=BOUND * 2)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{mode}: the child deadlocked: a blocking drop held the GIL")
    if run.stdout.startswith("UNSUPPORTED"):
        pytest.skip(f"cuStreamWaitValue32 unsupported here: {run.stdout.strip()}")
    assert run.returncode == 0 and run.stdout.strip().endswith("DONE"), (run.stdout, run.stderr[-2000:])


# Issue 21: packed documents on the device.

import modded_reference  # noqa: E402
from docs_data import GPT2_BOS, write_doc_shards  # noqa: E402

DOC_STEPS = 10_000
DOC_N, DOC_MSL = 384, 128  # tokens per step and max_seq_len before the schedule's change
DOC_SCHEDULE = [(DOC_STEPS // 2, 512, 256)]  # the change, in the middle of the soak


@pytest.fixture(scope="module")
def doc_shards(tmp_path_factory):
    """Five shards, 11.2 M tokens of documents: 10,000 steps of one rank (11,327) fit in one
    epoch, so the reference, which stops after the last shard, covers every step."""
    sizes = [2_600_000, 1_800_000, 3_000_000, 2_200_000, 1_600_000]
    return write_doc_shards(tmp_path_factory.mktemp("gpu-docs"), sizes)


def reference_steps(pattern, limit, rank=0, world=1, **kw):
    return list(modded_reference.steps(pattern, rank=rank, world_size=world, bos_id=GPT2_BOS, limit=limit, **kw))


def test_packed_fields_on_the_device_equal_the_reference(doc_shards):
    """Every field of every step, read on the device (zero copy), equals the faithful
    generator's: rank 0 and 1 of 2, over a schedule change at step 50."""
    for rank in (0, 1):
        want = reference_steps(doc_shards, 200, rank, 2, tokens_per_batch=DOC_N, max_seq_len=DOC_MSL,
                               schedule=[(50, 512, 256)])
        src = pinring.Documents(doc_shards, tokens_per_batch=DOC_N, max_seq_len=DOC_MSL,
                                schedule=[(50, 512, 256)], rank=rank, world_size=2, positions=True)
        with pinring.Loader(src, device="cuda:0") as loader:
            for k, (wi, wt, wc) in enumerate(want):
                b = loader.pop(timeout=BOUND)
                assert b.step == k and b.device == "cuda:0"
                f = {name: torch.from_dlpack(b[name]) for name in b.fields}
                for name, t in f.items():
                    assert t.device == DEV and t.data_ptr() == b[name].ptr, name
                assert f["inputs"].dtype == torch.int32 and f["cu_seqlens"].dtype == torch.int32
                np.testing.assert_array_equal(f["inputs"].cpu().numpy(), wi)
                np.testing.assert_array_equal(f["targets"].long().cpu().numpy(), wt)
                np.testing.assert_array_equal(f["cu_seqlens"].cpu().numpy(), wc)
                lengths = np.diff(wc)[: len(b.doc_ids)]
                np.testing.assert_array_equal(f["positions"].cpu().numpy(),
                                              np.concatenate([np.arange(n) for n in lengths]))
                assert b.max_seqlen == int(np.diff(wc).max())
                b.release(event=torch.cuda.current_stream())


def staged(steps):
    """Steps given as (inputs, targets, cu_seqlens, max_seqlen), in soak's form: staged on
    the device once, every step's inputs, targets and cu_seqlens end to end (int64), with
    offsets, and each step's max_seqlen."""
    def joined(i):
        return torch.from_numpy(np.concatenate([s[i] for s in steps]).astype(np.int64)).to(DEV)

    tok_at = np.concatenate([[0], np.cumsum([len(s[0]) for s in steps])])
    cu_at = np.concatenate([[0], np.cumsum([len(s[2]) for s in steps])])
    return joined(0), joined(1), joined(2), tok_at, cu_at, [s[3] for s in steps]


def expected_on_device(pattern, steps):
    """The faithful generator's steps, computed on the host (numpy) and staged on the
    device once (`staged`)."""
    want = reference_steps(pattern, steps, tokens_per_batch=DOC_N, max_seq_len=DOC_MSL, schedule=DOC_SCHEDULE)
    assert len(want) == steps, f"the data holds {len(want)} steps, not {steps}"
    return staged([(wi, wt, wc, int(np.diff(wc).max())) for wi, wt, wc in want])


def soak(loader, expected, n, cycles, early_fence=False, each=None):
    """Each step: a kernel holds the slot (torch.cuda._sleep), then a comparison kernel
    reads every field on the device and counts its elements that differ from the expected
    values (a device counter: no host sync per step); release fenced on the current stream
    (or, to show the check can fail, on an event recorded before the reads). `each(k, b)`,
    if given, checks step k's batch on the host and returns how many of its checks failed
    (counted with the wrong step numbers)."""
    inputs, targets, cu, tok_at, cu_at, max_seqlen = expected
    wrong = torch.zeros((), dtype=torch.int64, device=DEV)
    host_wrong = 0
    side = torch.cuda.Stream()
    for k in range(n):
        b = loader.pop(timeout=BOUND)
        host_wrong += (b.step != k) + (b.max_seqlen != max_seqlen[k])
        if each is not None:
            host_wrong += each(k, b)
        early = torch.cuda.Event()
        early.record()
        if early_fence:
            # Declared to a side stream that only waits for the step (every declared
            # stream is fenced at release: declaring the reading stream would cover the
            # reads); the reading stream waits for the side stream.
            views = [torch.from_dlpack(b[f].__dlpack__(stream=side.cuda_stream))
                     for f in ("inputs", "targets", "cu_seqlens", "tokens")]
            torch.cuda.current_stream().wait_stream(side)
            x, y, c, tok = views
            del views
        else:
            x = torch.from_dlpack(b["inputs"])
            y = torch.from_dlpack(b["targets"])
            c = torch.from_dlpack(b["cu_seqlens"])
            tok = torch.from_dlpack(b["tokens"])
        torch.cuda._sleep(cycles)  # the step holds the slot ...
        a, e = int(tok_at[k]), int(tok_at[k + 1])  # ... then every field is read
        wrong += (x.long() != inputs[a:e]).sum() + (y.long() != targets[a:e]).sum()
        wrong += (tok[:-1].long() != inputs[a:e]).sum() + (tok[-1].long() != targets[e - 1])
        wrong += (c.long() != cu[int(cu_at[k]) : int(cu_at[k + 1])]).sum()
        del x, y, c, tok
        b.release(event=early if early_fence else torch.cuda.current_stream())
    torch.cuda.synchronize()
    return int(wrong), host_wrong


def test_packed_soak_10000_steps_checked_on_the_device(doc_shards, cycles_per_ms):
    """10,000 packed steps with a kernel holding each slot, each field compared on the
    device with the faithful generator's values (computed independently on the host), a
    schedule change at step 5,000: 0 wrong."""
    expected = expected_on_device(doc_shards, DOC_STEPS)
    src = pinring.Documents(doc_shards, tokens_per_batch=DOC_N, max_seq_len=DOC_MSL, schedule=DOC_SCHEDULE)
    with pinring.Loader(src, device="cuda:0") as loader:
        wrong, host_wrong = soak(loader, expected, DOC_STEPS, cycles_per_ms // 20)  # 50 us holds
        stats = loader.stats()
    print(f"packed soak: {DOC_STEPS} steps, {wrong} wrong elements on the device, {host_wrong} wrong "
          f"step numbers or max_seqlen; index {src.index_stats()}; stats {stats['verdict']}")
    assert (wrong, host_wrong) == (0, 0)
    assert src.index_stats()["on_walk"] == 0, "no step waited for a shard's index"


def test_the_packed_check_can_fail(doc_shards, cycles_per_ms):
    """Released on an event recorded before the reads: the slot is refilled under the
    reading kernel, and the device comparison sees it."""
    expected = expected_on_device(doc_shards, 300)
    src = pinring.Documents(doc_shards, tokens_per_batch=DOC_N, max_seq_len=DOC_MSL, schedule=DOC_SCHEDULE)
    with pinring.Loader(src, device="cuda:0") as loader:
        wrong, _ = soak(loader, expected, 300, cycles_per_ms, early_fence=True)  # 1 ms holds
    print(f"packed, unfenced: {wrong} wrong elements in 300 steps")
    assert wrong > 0


# Issue 22: a mixture of packed documents on the device.

MIX_STEPS = 3000


@pytest.fixture(scope="module")
def mix_corpora(tmp_path_factory):
    """Two corpora of documents (a web-like and a code-like one): 3,000 steps of 384 tokens
    mixed 0.7 / 0.3 fit in the smaller one's epoch."""
    root = tmp_path_factory.mktemp("gpu-docmix")
    return [write_doc_shards(root / "web", [900_000, 700_000], seed=11, mean=150),
            write_doc_shards(root / "code", [450_000, 350_000], seed=12, mean=90)]


def packed_mixture(corpora):
    return pinring.Mixture([pinring.Documents(p, tokens_per_batch=DOC_N, max_seq_len=DOC_MSL) for p in corpora],
                           weights=[0.7, 0.3])


def test_packed_mixture_soak_checked_on_the_device(mix_corpora, cycles_per_ms):
    """A Mixture of two Documents sources (0.7 / 0.3) on the device: 3,000 steps with a
    kernel holding each slot, every field compared on the device with the same mixture's
    steps read on the cpu backend, each step's sources, document ids, step number and
    max_seqlen compared on the host: 0 wrong."""
    with pinring.Loader(packed_mixture(mix_corpora), device="cpu") as loader:
        want = popped(loader, MIX_STEPS, lambda b: (np.from_dlpack(b["tokens"]).copy(),
                                                    np.from_dlpack(b["cu_seqlens"]).copy(),
                                                    b.sources.copy(), b.doc_ids.copy(), b.max_seqlen))
    assert len(want) == MIX_STEPS, f"the cpu run ended after {len(want)} steps"
    # The cpu run's steps in soak's form.
    expected = staged([(tokens[:-1], tokens[1:], cu, max_seqlen) for tokens, cu, _, _, max_seqlen in want])
    docs = np.zeros(2, dtype=np.int64)

    def sources_and_ids(k, b):
        nonlocal docs
        docs += np.bincount(b.sources, minlength=2)
        _, _, sources, ids, _ = want[k]
        return (not np.array_equal(b.sources, sources)) + (not np.array_equal(b.doc_ids, ids))

    with pinring.Loader(packed_mixture(mix_corpora), device="cuda:0") as loader:
        wrong, host_wrong = soak(loader, expected, MIX_STEPS, cycles_per_ms // 20, each=sources_and_ids)  # 50 us holds
        verdict = loader.stats()["verdict"]
    share = docs / docs.sum()
    print(f"packed mixture soak: {MIX_STEPS} steps, {wrong} wrong elements on the device, {host_wrong} "
          f"wrong step numbers, max_seqlen, sources or document ids; documents per source "
          f"{docs.tolist()} (shares {share[0]:.4f} / {share[1]:.4f}); {verdict}")
    assert (wrong, host_wrong) == (0, 0)


# Issue 23: the consumer stream declared once (Loader(stream=...)), fixed views
# (Loader(fixed_views=...), batch.view()) and CUDA graphs over them.


class ProtocolStream:
    """A stream of the CUDA stream protocol (as cuda.core's), over a torch stream."""

    def __init__(self, stream):
        self.stream = stream

    def __cuda_stream__(self):
        return (0, self.stream.cuda_stream)


def declared_soak(loader, n, cycles, read_on=None):
    """Each batch: the step on the declared (current) stream holds the slot, then checks
    its fixed view on the device; release() with no argument, fenced on the declared stream
    (Fence::Bound). With `read_on`, the hold and the check run on that other stream instead,
    which neither waits for the batch nor is fenced: the check must see it."""
    wrong = torch.zeros((), dtype=torch.int64, device=DEV)
    epoch_len = loader.epoch_len
    for _ in range(n):
        batch = loader.pop(timeout=BOUND)
        x = batch.view()
        with torch.cuda.stream(read_on or torch.cuda.current_stream()):
            torch.cuda._sleep(cycles)
            wrong += count_wrong(x, batch.seq, epoch_len)
        batch.release()
    torch.cuda.synchronize()
    return int(wrong)


def test_declared_stream_forms_order_every_batch(shard, cycles_per_ms):
    """stream= as a torch.cuda.Stream, its raw handle, an object of the CUDA stream protocol,
    a cupy stream (where installed) and 0 (the default stream, named relative to the
    thread): each pop makes the stream wait for its batch, release() fences on it; 1,000
    batches each read through the fixed views on that stream, with a hold per batch, 0
    wrong on the device."""
    s = torch.cuda.Stream()
    forms = {"torch": s, "raw": s.cuda_stream, "protocol": ProtocolStream(s)}
    try:
        import cupy

        forms["cupy"] = cupy.cuda.ExternalStream(s.cuda_stream)
    except ImportError:
        pass
    for name, form in list(forms.items()) + [("default stream 0", 0)]:
        on = s if name != "default stream 0" else torch.cuda.default_stream()
        with torch.cuda.stream(on), pinring.Loader(
            windows_source(shard), B, device="cuda:0", epochs=None, stream=form,
            fixed_views=torch.from_dlpack,
        ) as loader:
            wrong = declared_soak(loader, 1000, cycles_per_ms // 20)
        assert wrong == 0, f"stream={name}: {wrong} wrong rows"


def test_release_fences_on_the_declared_stream_10000_batches(shard, cycles_per_ms):
    """10,000 batches, a 50 us kernel holding each slot on the declared stream before the
    device check; release() names no stream: 0 wrong. The copy into a slot waits for the
    declared stream's work on the batch before it."""
    s = torch.cuda.Stream()
    with torch.cuda.stream(s), pinring.Loader(
        windows_source(shard), B, device="cuda:0", epochs=None, stream=s,
        fixed_views=torch.from_dlpack,
    ) as loader:
        wrong = declared_soak(loader, BATCHES, cycles_per_ms // 20)
        stats = loader.stats()
    print(f"declared stream: {BATCHES} batches, {wrong} wrong; {stats['verdict']}")
    assert wrong == 0


def test_the_fixed_view_check_can_fail_read_off_the_declared_stream(shard, cycles_per_ms):
    """A fixed view read on another stream (which neither waits for the batch nor is
    fenced) with a 1 ms hold: the slot is refilled under the reading kernel, and the device
    check sees it."""
    s, other = torch.cuda.Stream(), torch.cuda.Stream()
    with torch.cuda.stream(s), pinring.Loader(
        windows_source(shard), B, device="cuda:0", epochs=None, stream=s,
        fixed_views=torch.from_dlpack,
    ) as loader:
        wrong = declared_soak(loader, 200, cycles_per_ms, read_on=other)
    print(f"read off the declared stream: {wrong} wrong rows of 1600")
    assert wrong > 0


def test_fixed_views_are_one_tensor_per_slot_at_its_address(shard):
    """One tensor per device slot, made by the consumer once: batch.view() is that object
    each time the slot comes round, its data_ptr the slot's address; a short batch is a
    narrow of it."""
    calls = []

    def consumer(producer):
        calls.append(producer)
        return torch.from_dlpack(producer)

    s = torch.cuda.Stream()
    per_slot = {}
    src = windows_source(shard)
    with torch.cuda.stream(s), pinring.Loader(src, B, device="cuda:0", device_slots=3, epochs=1,
                                              stream=s, fixed_views=consumer) as loader:
        wrong = torch.zeros((), dtype=torch.int64, device=DEV)
        short = 0
        while (b := loader.pop(timeout=BOUND)) is not None:
            v = b.view()
            assert v.device == DEV and v.dtype == torch.int32 and v.data_ptr() == b.ptr
            if b.samples == B:
                assert v is per_slot.setdefault(b.slot, v)
            else:
                short += 1
                assert v.shape == (b.samples, T + 1) and v.data_ptr() == per_slot[b.slot].data_ptr()
            wrong += count_wrong(v, b.seq, loader.epoch_len)
            b.release()
        torch.cuda.synchronize()
    assert int(wrong) == 0 and short == (1 if loader.epoch_len % B else 0)
    assert len(calls) == 3 and sorted(per_slot) == [0, 1, 2]


def test_fixed_views_need_a_declared_stream_on_cuda(shard):
    with pytest.raises(pinring.ConfigError, match="needs stream=") as info:
        pinring.Loader(windows_source(shard), B, device="cuda:0", fixed_views=torch.from_dlpack)
    assert info.value.argument == "stream"


def test_cuda_graphs_per_slot_replay_every_batch_right(shard):
    """python/examples/cuda_graphs.py's run, shorter: a graph per slot over its fixed view
    against one graph fed by static.copy_(batch.view()); rows, checksums and losses
    compared on the device, 0 wrong."""
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / "cuda_graphs.py"
    spec = importlib.util.spec_from_file_location("cuda_graphs", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    r = example.run(torch, pinring, shard, 1000, 3)
    print(f"cuda graphs: {r['n']} batches; graph {r['graph']['wall_us']:.1f} us/step, "
          f"static.copy_ {r['static']['wall_us']:.1f} us/step; max loss diff {r['max_loss_diff']:.3g}")
    assert example.wrong_of(r) == 0, r
    assert r["graph"]["graphs"] == 3


STREAM_DROPPED_WITHOUT_THE_GIL = r'''
import ctypes, gc, sys, weakref
import numpy as np
import torch
import pinring

api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)  # the call releases the GIL


class Declared:
    """The loader's declared stream, by the CUDA stream protocol (a weakref-able object)."""

    def __init__(self, stream):
        self.stream = stream

    def __cuda_stream__(self):
        return (0, self.stream.cuda_stream)


shard = sys.argv[1]
declared = Declared(torch.cuda.Stream())
alive = weakref.ref(declared)
loader = pinring.Loader(pinring.TokenWindows(shard, seq_len=9, dtype="int32"), batch_size=3,
                        device="cuda:0", stream=declared)
del declared
b = loader.pop(timeout=30)
capsule = b.__dlpack__(stream=alive().stream.cuda_stream)
ptr = api.PyCapsule_GetPointer(capsule, b"dltensor")
api.PyCapsule_SetName(capsule, b"used_dltensor")  # taken: the deleter is ours to call
del b, capsule
loader.close()
del loader
gc.collect()
assert alive() is not None, "the capsule's lease holds the pipeline, and the pipeline the stream"


def consumer(export):
    # Called by another loader's pop (inside a pinring call): the deleter of the last
    # holder of the first pipeline runs with the GIL released.
    DELETER(ctypes.c_void_p.from_address(ptr + 56).value)(ptr)
    return np.from_dlpack(export)


other = pinring.Loader(pinring.TokenWindows(shard, seq_len=9, dtype="int32"), batch_size=3,
                       device="cpu", fixed_views=consumer)
other.pop(timeout=30).release()
kept = alive() is not None  # not released without the GIL: kept for later
other.close()
pinring.Loader(pinring.TokenWindows(shard, seq_len=9, dtype="int32"), batch_size=3, device="cpu").close()
print("kept", kept, "then released", alive() is None)
'''


def test_the_declared_stream_object_is_released_with_the_gil_also_by_a_deleter_without_it(shard, tmp_path):
    """The last holder of a loader made with stream= can be a DLPack deleter run where C
    code let the GIL go inside a pinring call (here a ctypes call from another loader's
    fixed_views consumer): the stream object it kept alive is not released there (pyo3
    would decrement its count without the GIL) but kept, and released by the next Loader."""
    import subprocess
    import sys

    script = tmp_path / "stream_dropped_without_the_gil.py"
    script.write_text(STREAM_DROPPED_WITHOUT_THE_GIL)
    run = subprocess.run([sys.executable, str(script), shard], capture_output=True, text=True, timeout=BOUND * 4)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert run.stdout.strip() == "kept True then released True"


# Issue 31: modded-nanogpt's drop-in (pinring.modded.distributed_data_generator) on the
# device, all five outputs against master's own generator code (dropin_soak).

import dropin_soak  # noqa: E402
import pinring.modded  # noqa: E402

# (optimizer steps, num_tokens, max_seq_len, grad_accum_steps), rank 1 of 2: the short
# track's sizes scaled down 32 times (512 then 1,024 tokens a rank a send); G=2 for the
# first half, then a .send() changes every size (G to 1) in the middle: 3,000 sends. And
# validation's walk (align_to_bos=False, master passes max_seq_len -1): 1,000 sends.
DROPIN_TRAIN = [(1000, 2 * 2 * 512, 256, 2), (1000, 2 * 1024, 512, 1)]
DROPIN_VALIDATION = [(500, 2 * 2 * 1024, -1, 2)]

TORCH_ON_DEVICE = types.SimpleNamespace(
    stage=lambda a: torch.from_numpy(a).to(DEV),
    wide=lambda x: x.long(),
    zero=lambda: torch.zeros((), dtype=torch.int64, device=DEV),
    on_device=lambda x: x.device == DEV,
)


@pytest.fixture(scope="module")
def speedrun_shards(tmp_path_factory):
    """Five shards, 9 M tokens of documents over the GPT-2 vocabulary (so the bigram hash's
    products wrap): the soak's sends fit in them, and shard ends fall mid-step."""
    sizes = [2_100_000, 1_500_000, 2_400_000, 1_800_000, 1_200_000]
    return write_doc_shards(tmp_path_factory.mktemp("gpu-speedrun"), sizes, seed=31, vocab=GPT2_BOS)


def dropin_on_device(pattern, phases, align, expected, hold, sends=None):
    gen = pinring.modded.distributed_data_generator(pattern, *dropin_soak.start_args(phases), align, rank=1,
                                                    world_size=2, device="cuda:0")
    got = dropin_soak.compare(gen, dropin_soak.plan(phases) if sends is None else sends, expected,
                              TORCH_ON_DEVICE, hold=hold)
    torch.cuda.synchronize()
    return got


@pytest.mark.parametrize("align,phases", [(True, DROPIN_TRAIN), (False, DROPIN_VALIDATION)],
                         ids=["train", "validation"])
def test_drop_in_soak_five_outputs_checked_on_the_device(speedrun_shards, cycles_per_ms, align, phases):
    """The drop-in on cuda, driven as master's loop drives its generator (G=2, a change of
    sizes by .send() in the middle; validation's walk): every send's inputs, targets,
    cu_seqlens and bigram_inputs compared on the device with master's own code's (run on
    the cpu, staged on the device once), a kernel holding each step first (50 us), and
    the numpy host view compared on the host: 0 wrong."""
    steps = dropin_soak.master_steps(speedrun_shards, phases, align, 1, 2, pinring.modded.BIGRAM_VOCAB_SIZE)
    dropin_soak.assert_steps_differ(steps)
    expected = dropin_soak.Expected(steps, TORCH_ON_DEVICE)
    cycles = cycles_per_ms // 20
    got = dropin_on_device(speedrun_shards, phases, align, expected, lambda: torch.cuda._sleep(cycles))
    print(f"drop-in soak ({'train' if align else 'validation'}): {len(steps)} sends; counts {got}")
    assert got == dict.fromkeys(got, 0), got


def test_the_drop_in_soak_check_can_fail(speedrun_shards, cycles_per_ms):
    """The same device comparison against master's steps one send ahead: every output is
    counted wrong."""
    phases = [(150, 2 * 2 * 512, 256, 2)]
    steps = dropin_soak.master_steps(speedrun_shards, phases, True, 1, 2, pinring.modded.BIGRAM_VOCAB_SIZE)
    ahead = dropin_soak.Expected(steps[1:], TORCH_ON_DEVICE)
    cycles = cycles_per_ms // 20
    got = dropin_on_device(speedrun_shards, phases, True, ahead, lambda: torch.cuda._sleep(cycles),
                           sends=dropin_soak.plan(phases)[:-1])
    print(f"drop-in soak against the next send's data: {got}")
    assert all(got[name] > 0 for name in (*dropin_soak.NAMES, "bigram_cpu")), got
    assert (got["dtype"], got["device"], got["shape"]) == (0, 0, 0), got
