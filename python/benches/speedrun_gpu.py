#!/usr/bin/env python3
"""The speedrun profile on a GPU (needs torch and CUDA): master's own data generator
(modded-nanogpt ``train_gpt.py`` at f411b3d, unedited: its tensors go to ``cuda`` as it
says) against ``pinring.modded.distributed_data_generator(device="cuda")`` at stage 3 of the
short track (49,152 tokens a rank, W = 8, rank 0; ``num_tokens`` 393,216, ``max_seq_len``
2048), on the same shards.

    python3 python/benches/speedrun_gpu.py [--steps N] [--step-ms MS] [--parity K]

1. Parity: the first ``--parity`` steps' 5-tuples, each output compared whole (the four device
   tensors after ``.cpu()``, the numpy host view), also after a switch to grad_accum_steps 2
   mid-run through ``send``.
2. The modded-nanogpt-shaped loop: each step ``send``, then a fixed GPU step (a bf16 matmul
   loop of about ``--step-ms`` ms, calibrated once, and an embedding read of inputs and
   bigram_inputs, reads of targets and cu_seqlens and of the host view), then a synchronize.
   Per step: the host time of ``send`` (the training thread's cost of the data) and the
   step's wall time. Rows: each side's p50 host time, pinring's as a share of master's
   (target <= 10%), and the worst 50-step window of wall time against the median one
   (target <= 1.1).
"""
import argparse
import glob
import math
import pathlib
import sys
import tempfile
import threading
import time
import types

import numpy as np
import torch

HERE = pathlib.Path(__file__).resolve()
sys.path.insert(0, str(HERE.parents[1] / "tests"))
from docs_data import GPT2_BOS, write_doc_shards  # noqa: E402

import pinring  # noqa: E402
import pinring.modded  # noqa: E402

W, N_LOCAL, MAX_SEQ_LEN = 8, 49152, 2048
NUM_TOKENS = W * N_LOCAL
V = 50304 * 15 // 2
WINDOW = 50
VENDORED = HERE.parents[1] / "tests" / "vendor" / "train_gpt_f411b3d_loader.py.txt"


def master(pattern, num_tokens, max_seq_len, grad_accum_steps=1):
    """master's generator as rank 0 of W, run as train_gpt.py runs it (on cuda)."""
    ns = {
        "torch": torch, "Tensor": torch.Tensor, "glob": glob, "math": math,
        "threading": threading, "Path": pathlib.Path,
        "dist": types.SimpleNamespace(is_initialized=lambda: True, get_rank=lambda: 0,
                                      get_world_size=lambda: W),
        "args": types.SimpleNamespace(bigram_vocab_size=V),
    }
    exec(compile(VENDORED.read_text(), str(VENDORED), "exec"), ns)
    return ns["distributed_data_generator"](pattern, num_tokens, max_seq_len, grad_accum_steps=grad_accum_steps)


def ours(pattern, num_tokens, max_seq_len, grad_accum_steps=1):
    return pinring.modded.distributed_data_generator(pattern, num_tokens, max_seq_len,
                                                     grad_accum_steps=grad_accum_steps, rank=0,
                                                     world_size=W, device="cuda")


def same(a, b):
    """Every output of two 5-tuples equal: (names that differ)."""
    names = ["inputs", "targets", "cu_seqlens", "bigram_inputs", "bigram_cpu"]
    bad = []
    for name, x, y in zip(names, a, b):
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            ok = np.array_equal(np.asarray(x), np.asarray(y)) and np.asarray(x).dtype == np.asarray(y).dtype
        else:
            ok = x.dtype == y.dtype and x.shape == y.shape and torch.equal(x.cpu(), y.cpu())
        if not ok:
            bad.append(name)
    return bad


def parity(pattern, steps):
    m, p = master(pattern, NUM_TOKENS, MAX_SEQ_LEN), ours(pattern, NUM_TOKENS, MAX_SEQ_LEN)
    wrong = 0
    for k in range(steps):
        args = (NUM_TOKENS, MAX_SEQ_LEN, 2) if k == steps // 2 else None
        a, b = m.send(args), p.send(args)
        bad = same(a, b)
        if bad:
            wrong += 1
            print(f"  step {k}: {', '.join(bad)} differ")
    m.close()
    p.close()
    print(f"RESULT\tspeedrun_parity_cuda\t{'PASS' if wrong == 0 else 'FAIL'}\t{steps} sends (grad_accum 1, "
          f"then 2 from send {steps // 2}), the five outputs of each: {wrong} differing")
    return wrong == 0


class Step:
    """A fixed GPU step of about `ms` ms reading every output."""

    def __init__(self, ms):
        dev = torch.device("cuda", 0)
        self.a = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
        self.b = torch.randn(2048, 2048, device=dev, dtype=torch.bfloat16)
        self.table = torch.randn(50304, 64, device=dev, dtype=torch.bfloat16)
        self.bigram = torch.randn(V, 8, device=dev, dtype=torch.bfloat16)
        self.acc = torch.zeros((), device=dev, dtype=torch.float32)
        self.loops = 1
        self.loops = max(1, round(ms / self.time_ms(20) * 20))

    def time_ms(self, loops):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(2):
            s.record()
            for _ in range(loops):
                torch.mm(self.a, self.b)
            e.record()
            e.synchronize()
        return s.elapsed_time(e)

    def __call__(self, out):
        inputs, targets, cu, bigram, host = out
        for _ in range(self.loops):
            torch.mm(self.a, self.b)
        self.acc += (self.table.index_select(0, inputs).float().mean()
                     + self.bigram.index_select(0, bigram).float().mean()
                     + (targets % 7).float().mean() + cu.float().mean())
        return int(host[-1])  # the trainer reads the host view before the forward pass


def loop(gen, step, steps, warm=20):
    host, wall = [], []
    for i in range(warm + steps):
        t0 = time.perf_counter()
        out = gen.send(None)
        t1 = time.perf_counter()
        step(out)
        del out
        torch.cuda.current_stream().synchronize()
        if i >= warm:
            host.append(t1 - t0)
            wall.append(time.perf_counter() - t0)
    gen.close()
    return np.array(host), np.array(wall)


def window_ratio(wall):
    sums = np.convolve(wall, np.ones(WINDOW), mode="valid")
    return float(sums.max() / np.median(sums))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--step-ms", type=float, default=2.0)
    ap.add_argument("--parity", type=int, default=40)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        per_shard = 40 * NUM_TOKENS
        n_shards = max(3, (a.steps + a.parity + 60) * NUM_TOKENS // per_shard + 2)
        pattern = write_doc_shards(tmp, [per_shard] * n_shards, vocab=GPT2_BOS, mean=900)
        print(f"GPU: {torch.cuda.get_device_name(0)}; stage 3: num_tokens {NUM_TOKENS} (W={W}), "
              f"max_seq_len {MAX_SEQ_LEN}; {n_shards} shards of {per_shard} tokens")
        ok = parity(pattern, a.parity)
        step = Step(a.step_ms)
        print(f"GPU step: {step.loops} bf16 matmuls of 2048^3, {step.time_ms(step.loops):.3f} ms")
        results = {}
        for name, make in (("master", master), ("pinring", ours)):
            host, wall = loop(make(pattern, NUM_TOKENS, MAX_SEQ_LEN), step, a.steps)
            results[name] = (float(np.median(host)), window_ratio(wall), float(np.median(wall)))
            print(f"{name:<8} send p50 {np.median(host) * 1e6:8.1f} us  p90 {np.percentile(host, 90) * 1e6:8.1f} us;"
                  f" step p50 {np.median(wall) * 1e3:.3f} ms; worst {WINDOW}-step window / median "
                  f"{window_ratio(wall):.3f}")
        mh, ph = results["master"][0], results["pinring"][0]
        share = ph / mh
        print(f"ROW\tspeedrun host overhead per step (synced)\t{ph * 1e6:.1f} us\tmaster's generator "
              f"{mh * 1e6:.1f} us: pinring is {share:.1%} of it\t<= 10%\t{'yes' if share <= 0.10 else 'NO'}")
        r = results["pinring"][1]
        print(f"ROW\tspeedrun worst {WINDOW}-step window / median\t{r:.3f}\tmaster {results['master'][1]:.3f}"
              f"\t<= 1.1\t{'yes' if r <= 1.1 else 'NO'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
