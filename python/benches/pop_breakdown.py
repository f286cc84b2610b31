#!/usr/bin/env python3
"""Where the Python consumer's per-batch time goes: p50 and p90 per call of
loader.pop(), the DLPack consumer's from_dlpack(batch), batch.view() (fixed views) and
batch.release(), with the pipeline ahead (only pops that found their batch ready count).

    python3 python/benches/pop_breakdown.py [--device cpu|cuda] [--iters N] [--between-us U]

--device cpu (the default without torch and a CUDA device; needs numpy only): the cpu
backend, numpy.from_dlpack as the consumer; batches of 16 x 129 int32, small enough that
the pipeline stays ahead of the loop. Rows:
  pop                 loader.pop(timeout=0) that found a batch ready
  from_dlpack         numpy.from_dlpack(batch)
  release             batch.release()
  pop+from_dlpack+release
  fixed: pop / view / release / pop+view+release   a Loader(fixed_views=numpy.from_dlpack)
  getattrs            (batch.seq, batch.slot, batch.samples)
  busy thread: pop / release   pop + release with another Python thread running beside
                      (a pure-Python loop): a call that releases the GIL waits up to the
                      interpreter's switch interval (5 ms) to get it back

--device cuda (needs torch): 16 x 4097 int32 on cuda:0, torch.from_dlpack as the consumer,
at the default slots and at H64 D16, on a stream of its own (torch.cuda.Stream(), made
current: the default stream, handle 0, is one relative to the thread, whose release may
synchronize): the same rows, release(event=stream) for the from_dlpack path and that
stream declared (Loader(stream=...), release()) for the fixed views; and, for reference,
what torch itself costs for from_dlpack of a torch tensor, an event record and
torch.cuda.current_stream().cuda_stream.

--between-us U: U microseconds of busy host work between two batches, not timed (what
bench_loader.py's latency rows do: 100), so that each call runs as in a trainer's loop
rather than back to back.

"""
import argparse
import os
import pathlib
import sys
import tempfile
import time

import numpy as np

import pinring  # noqa: E402

# The tests' shard writer (numpy only).
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "tests"))
from docs_data import write_tokens as write_shard  # noqa: E402


def pct(xs):
    xs = sorted(xs)
    return f"p50 {xs[len(xs) // 2] * 1e6:6.2f} us  p90 {xs[int(len(xs) * 0.9)] * 1e6:6.2f} us"


def ready_pop(loader):
    """(batch, seconds) of a pop(timeout=0) that found its batch ready; retries (untimed)
    while the pipeline is behind."""
    while True:
        t0 = time.perf_counter()
        try:
            b = loader.pop(timeout=0)
        except pinring.PopTimeout:
            time.sleep(50e-6)
            continue
        return b, time.perf_counter() - t0


class BusyThread:
    """Another Python thread that always wants the GIL (a pure-Python loop)."""

    def __enter__(self):
        import threading

        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.spin, daemon=True)
        self.thread.start()
        return self

    def spin(self):
        n = 0
        while not self.stop.is_set():
            n += 1

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join()


def pop_release(loader, iters):
    """Per-call seconds of pop (ready) and release()."""
    T = {"pop": [], "release": []}
    for _ in range(iters):
        b, t_pop = ready_pop(loader)
        t0 = time.perf_counter()
        b.release()
        T["pop"].append(t_pop)
        T["release"].append(time.perf_counter() - t0)
    return T


BETWEEN = 0.0  # seconds of untimed host work between two batches (--between-us)


def work_between():
    until = time.perf_counter() + BETWEEN
    while time.perf_counter() < until:
        pass


def breakdown(loader, consume, release, iters, fixed):
    """Per-call seconds of each step over `iters` batches."""
    for _ in range(200):
        b, _ = ready_pop(loader)
        x = b.view() if fixed else consume(b)
        release(b)
        del x
    names = ["pop", "view" if fixed else "from_dlpack", "release", "all", "getattrs"]
    T = {k: [] for k in names}
    for _ in range(iters):
        work_between()
        b, t_pop = ready_pop(loader)
        t1 = time.perf_counter()
        x = b.view() if fixed else consume(b)
        t2 = time.perf_counter()
        release(b)
        t3 = time.perf_counter()
        _ = (b.seq, b.slot, b.samples)
        t4 = time.perf_counter()
        del x
        T["pop"].append(t_pop)
        T[names[1]].append(t2 - t1)
        T["release"].append(t3 - t2)
        T["all"].append(t_pop + t3 - t1)
        T["getattrs"].append(t4 - t3)
    return T


def report(label, T):
    for k, v in T.items():
        what = k if k != "all" else ("pop+view+release" if "view" in T else "pop+from_dlpack+release")
        print(f"{label:<28} {what:<26} {pct(v)}")


def fixed_views_supported():
    import inspect

    return "fixed_views" in inspect.signature(pinring.Loader).parameters


def run_cpu(iters):
    d = tempfile.mkdtemp()
    path = write_shard(os.path.join(d, "s.bin"), np.arange(2_000_000) % 50000)
    src = pinring.TokenWindows(path, seq_len=128, dtype="int32", order="random", seed=1)
    kw = dict(batch_size=16, device="cpu", epochs=None, host_slots=16, device_slots=8)
    with pinring.Loader(src, **kw) as loader:
        report("cpu, from_dlpack", breakdown(loader, np.from_dlpack, lambda b: b.release(), iters, False))
    if fixed_views_supported():
        with pinring.Loader(src, fixed_views=np.from_dlpack, **kw) as loader:
            report("cpu, fixed views", breakdown(loader, None, lambda b: b.release(), iters, True))
    else:
        print("cpu, fixed views: not in this build (no Loader(fixed_views=...))")
    with pinring.Loader(src, **kw) as loader, BusyThread():
        report("cpu, busy thread beside", pop_release(loader, max(200, iters // 10)))
    os.remove(path)
    os.rmdir(d)


def run_cuda(iters):
    import torch

    d = tempfile.mkdtemp()
    path = write_shard(os.path.join(d, "s.bin"), np.arange(4_000_000) % 50000)
    src = pinring.TokenWindows(path, seq_len=4096, dtype="int32", order="random", seed=1)
    stream = torch.cuda.Stream()
    for hs, ds in [(4, 2), (64, 16)]:
        kw = dict(batch_size=16, device="cuda:0", epochs=None, host_slots=hs, device_slots=ds)
        with torch.cuda.stream(stream), pinring.Loader(src, **kw) as loader:
            T = breakdown(loader, torch.from_dlpack, lambda b: b.release(event=stream), iters, False)
            report(f"H{hs} D{ds}, from_dlpack", T)
        if fixed_views_supported():
            with torch.cuda.stream(stream), pinring.Loader(
                src, stream=stream, fixed_views=torch.from_dlpack, **kw
            ) as loader:
                report(f"H{hs} D{ds}, fixed+stream", breakdown(loader, None, lambda b: b.release(), iters, True))
    t = torch.zeros(16, 4097, dtype=torch.int32, device="cuda")
    ref = []
    for _ in range(iters):
        t0 = time.perf_counter()
        torch.from_dlpack(t)
        ref.append(time.perf_counter() - t0)
    print(f"{'torch':<28} {'from_dlpack(tensor)':<26} {pct(ref)}")
    ev, ref = torch.cuda.Event(), []
    for _ in range(iters):
        t0 = time.perf_counter()
        ev.record(stream)
        ref.append(time.perf_counter() - t0)
    print(f"{'torch':<28} {'Event.record(stream)':<26} {pct(ref)}")
    ref = []
    for _ in range(iters):
        t0 = time.perf_counter()
        torch.cuda.current_stream().cuda_stream
        ref.append(time.perf_counter() - t0)
    print(f"{'torch':<28} {'current_stream().cuda_stream':<26} {pct(ref)}")
    os.remove(path)
    os.rmdir(d)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", choices=["cpu", "cuda"])
    ap.add_argument("--iters", type=int, default=5000)
    ap.add_argument("--between-us", type=float, default=0.0)
    args = ap.parse_args()
    global BETWEEN
    BETWEEN = args.between_us * 1e-6
    device = args.device
    if device is None:
        try:
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        except ImportError:
            device = "cpu"
    print(
        f"pinring {pinring.__version__} ({pinring.__file__}), {device}, {args.iters} calls a row, "
        f"{args.between_us:g} us of work between batches"
    )
    (run_cuda if device == "cuda" else run_cpu)(args.iters)


if __name__ == "__main__":
    main()
