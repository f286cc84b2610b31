#!/usr/bin/env python3
"""The training thread's time per step: master's own data generator (modded-nanogpt
``train_gpt.py`` at f411b3d, its device moves pointed at the cpu) against
``pinring.modded.distributed_data_generator`` (device="cpu"), at stage 3 of the short track
(49,152 tokens a rank, W = 8: ``num_tokens`` 393,216, ``max_seq_len`` 2048), one run each,
on the same shards.

    python3 python/benches/bench_speedrun.py [--steps N] [--step-ms MS] [--folder DIR]

Each side is driven as ``train_gpt.py`` drives it: ``send(None)`` a step. Master's code
runs on torch where it is installed, else on the tests' numpy stand-in
(``python/tests/numpy_torch.py``: the same calls on numpy; what it measures is then that
code on numpy, not on torch), and so does the drop-in (its fixed views, made by
``torch.from_dlpack``, are made by ``numpy.from_dlpack`` there). The first ``--warmup`` steps of each are left out (shard
loads, the pipeline filling); the figure is the median of the rest, with p90. Between sends
the loop sleeps ``--step-ms`` (the model's step, which a loader overlaps; not counted).
"""
import argparse
import pathlib
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "tests"))
import modded_master_code  # noqa: E402
import numpy_torch  # noqa: E402
from docs_data import GPT2_BOS, write_doc_shards  # noqa: E402

import pinring  # noqa: E402
import pinring.modded  # noqa: E402

W, N_LOCAL, MAX_SEQ_LEN = 8, 49152, 2048
NUM_TOKENS = W * N_LOCAL
V = 50304 * 15 // 2


def timed(gen, steps, step_s):
    """Seconds of each ``send``, with ``step_s`` of other work (a sleep: the model's step,
    which the loader overlaps) between them, not counted."""
    out = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step = gen.send(None)
        out.append(time.perf_counter() - t0)
        del step
        time.sleep(step_s)
    gen.close()
    return out


def report(name, times, warmup):
    xs = sorted(times[warmup:])
    p50, p90 = xs[len(xs) // 2], xs[int(len(xs) * 0.9)]
    print(f"{name:<44} p50 {p50 * 1e6:9.1f} us   p90 {p90 * 1e6:9.1f} us   mean "
          f"{statistics.fmean(xs) * 1e6:9.1f} us   ({len(xs)} steps)")
    return p50


def breakdown(pattern, steps, step_s, warmup):
    """Where the drop-in's time goes, call by call, on the same loader setup: pop, the four
    device views (the loader's fixed views, as the drop-in takes them on the cpu; the first
    waits for the slot's copy, host-side), the host view and the release (cpu: a host
    ``Fence::Sync``)."""
    src = pinring.Documents(pattern, tokens_per_batch=N_LOCAL, max_seq_len=MAX_SEQ_LEN, rank=0, world_size=W,
                            targets_dtype="int64", bigram_vocab_size=V)
    names = ["pop", "inputs", "targets", "cu_seqlens", "bigram_inputs", "host", "release"]
    t = {k: [] for k in names}
    with pinring.Loader(src, device="cpu", fixed_views=np.from_dlpack) as loader:
        for _ in range(steps):
            time.sleep(step_s)
            t0 = time.perf_counter()
            b = loader.pop()
            t["pop"].append(time.perf_counter() - t0)
            for f in names[1:5]:
                t0 = time.perf_counter()
                b.view(f)
                t[f].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            b.host("bigram_inputs")
            t["host"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            b.release()
            t["release"].append(time.perf_counter() - t0)
    print("  the drop-in's calls, p50 each: " + ", ".join(
        f"{k} {sorted(v[warmup:])[len(v[warmup:]) // 2] * 1e6:.1f} us" for k, v in t.items()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--folder", default=None)
    ap.add_argument("--step-ms", type=float, default=20.0,
                    help="the model's step between sends (a sleep, not counted; both sides)")
    a = ap.parse_args()
    tmp = tempfile.TemporaryDirectory() if a.folder is None else None
    folder = pathlib.Path(a.folder or tmp.name)
    # Enough documents for the steps on both sides (each step takes 8 x 49,153 tokens and
    # drops the tails of documents longer than 2048): two shards, as master needs two.
    per_shard = (a.steps + 10) * NUM_TOKENS
    pattern = write_doc_shards(folder, [per_shard, per_shard], vocab=GPT2_BOS, mean=900)
    try:
        import torch  # noqa: F401

        which = "torch"
    except ImportError:
        pinring.modded._torch = lambda: numpy_torch
        which = "numpy stand-in (no torch installed)"
    ns, ran_on = modded_master_code.load(V, rank=0, world_size=W)
    print(f"stage 3: num_tokens {NUM_TOKENS} (W={W}, {N_LOCAL} a rank), max_seq_len {MAX_SEQ_LEN}; "
          f"torch: {which}")
    master = timed(ns["distributed_data_generator"](pattern, NUM_TOKENS, MAX_SEQ_LEN), a.steps, a.step_ms / 1e3)
    m = report(f"master's generator code ({ran_on})", master, a.warmup)
    gen = pinring.modded.distributed_data_generator(pattern, NUM_TOKENS, MAX_SEQ_LEN, rank=0, world_size=W,
                                                    device="cpu")
    # The pipeline starts with the first send; let it fill before the steps count.
    first = gen.send(None)
    del first
    time.sleep(0.5)
    ours = timed(gen, a.steps, a.step_ms / 1e3)
    p = report("pinring.modded.distributed_data_generator", ours, a.warmup)
    print(f"drop-in / master: {p / m:.1%} of master's per-step training-thread time (p50)")
    breakdown(pattern, a.steps, a.step_ms / 1e3, a.warmup)
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
