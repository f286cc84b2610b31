#!/usr/bin/env python3
"""CUDA graphs over pinring's fixed device slots: no copy into a static buffer.

A CUDA graph replays kernels on fixed addresses, so graph users copy every batch into a
static input buffer first (Megatron's StaticBufferLoader does). pinring's device slots are
fixed addresses already: with Loader(fixed_views=torch.from_dlpack, stream=s) each slot has
one tensor, `batch.view()`, the same object every time the slot comes round. This example
captures one graph per device slot over that slot's view and trains by

    batch = loader.pop()                  # s waits for the batch's copy, stream-side
    graphs[batch.slot].replay()           # the step, on s, reading the slot in place
    batch.release()                       # the slot's reuse waits for s

then runs the same model fed the usual way, `static.copy_(batch.view())` and one graph over
`static`, and compares the two on the device: every step's loss and input checksum, and
each batch's rows against what the source puts there (a device-side counter inside the
graphs tells which batch each replay reads), over 10,000 batches. It prints both step times
(the graph path saves the copy) and a RESULT and a ROW line for scripts/python-gpu.sh.

    python3 python/examples/cuda_graphs.py [--batches 10000] [--device-slots 3]

The model: a one-hot embedding (a matmul, deterministic), a matmul to the vocabulary, cross
entropy on the next token, plain SGD; all of it, the check and the step counter included,
inside the graph. Without torch or a CUDA device it prints SKIP and exits 0.
"""

import argparse
import os
import sys
import tempfile
import time

B = 16  # samples per batch
T = 1023  # seq_len: windows of 1024 tokens (64 KiB batches of int32)
VOCAB_SHARD = 1 << 16  # token i of the shard is i % 65536
N_TOKENS = 1_000_003
V = 512  # the model's vocabulary: tokens % 512
D = 64  # embedding width
LR = 0.1


def write_shard(path, n_tokens):
    """An llm.c shard whose token i is i % 65536."""
    import numpy as np

    header = np.zeros(256, dtype="<i4")
    header[:3] = [20240520, 1, n_tokens]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write((np.arange(n_tokens, dtype=np.int64) % VOCAB_SHARD).astype("<u2").tobytes())
    return path


class Step:
    """One training step over an input of shape (B, T + 1), int32, on the device, and its
    device-side bookkeeping: which batch it is (`counter`), its loss and checksum (written
    at `counter`), and rows that differ from what the source puts there (`wrong`). Every
    op is graph-safe (no host sync)."""

    def __init__(self, torch, init, n, per_epoch):
        dev = init[0].device
        self.torch = torch
        self.params = [p.clone().requires_grad_(True) for p in init]
        self.counter = torch.zeros((), dtype=torch.int64, device=dev)
        self.losses = torch.zeros(n, dtype=torch.float32, device=dev)
        self.sums = torch.zeros(n, dtype=torch.int64, device=dev)
        self.wrong = torch.zeros((), dtype=torch.int64, device=dev)
        self.rows = torch.arange(B, dtype=torch.int64, device=dev)
        self.cols = torch.arange(T + 1, dtype=torch.int64, device=dev)
        self.vocab = torch.arange(V, dtype=torch.int64, device=dev)
        self.per_epoch = per_epoch

    def __call__(self, v):
        torch = self.torch
        F = torch.nn.functional
        E, W = self.params
        tokens = v.long()
        # Batch k holds windows (k % per_epoch) * B + row of a sequential epoch; window j
        # starts at token j * T.
        start = ((self.counter % self.per_epoch) * B + self.rows) * T
        expected = (start[:, None] + self.cols[None, :]) % VOCAB_SHARD
        self.wrong.add_((tokens != expected).any(dim=1).sum())
        x, y = tokens[:, :-1] % V, tokens[:, 1:] % V
        one_hot = (x.unsqueeze(-1) == self.vocab).to(torch.float32)
        logits = (one_hot @ E) @ W
        loss = F.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
        loss.backward()
        with torch.no_grad():
            for p in self.params:
                p.sub_(LR * p.grad)
                p.grad.zero_()
            at = self.counter.view(1)
            self.losses.index_copy_(0, at, loss.detach().view(1))
            self.sums.index_copy_(0, at, tokens.sum().view(1))
            self.counter.add_(1)

    def warm_up(self, example):
        """Runs the step eagerly a few times on a side stream (as graph capture wants:
        autograd and cuBLAS set up), then restores the parameters and the bookkeeping."""
        torch = self.torch
        saved = [p.detach().clone() for p in self.params]
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                self(example)
        torch.cuda.current_stream().wait_stream(side)
        with torch.no_grad():
            for p, s in zip(self.params, saved):
                p.copy_(s)
                p.grad.zero_()
            for t in (self.counter, self.losses, self.sums, self.wrong):
                t.zero_()

    def capture(self, v):
        """A graph of one step reading `v` (its address is baked in)."""
        torch = self.torch
        graph = torch.cuda.CUDAGraph()
        # thread_local: pinring's copy thread keeps calling the driver meanwhile.
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            self(v)
        return graph


def run(torch, pinring, shard, n, device_slots, timed_from=200):
    """Both paths over `n` batches: a dict of their results (read back once, at the end).
    The step times count the batches from `timed_from` on (the captures come before)."""
    timed_from = min(timed_from, n // 2)
    dev = torch.device("cuda", 0)
    gen = torch.Generator(device=dev).manual_seed(0)
    init = [torch.randn(V, D, device=dev, generator=gen) * 0.02,
            torch.randn(D, V, device=dev, generator=gen) * 0.02]
    stream = torch.cuda.Stream()
    out = {}
    with torch.cuda.stream(stream):
        for path in ("graph", "static"):
            src = pinring.TokenWindows(shard, seq_len=T, dtype="int32")
            loader = pinring.Loader(src, B, device="cuda:0", device_slots=device_slots,
                                    host_slots=16, drop_last=True, pop_timeout=60.0,
                                    stream=stream, fixed_views=torch.from_dlpack)
            step = Step(torch, init, n, loader.epoch_batches)
            step.warm_up(torch.zeros(B, T + 1, dtype=torch.int32, device=dev))
            graphs, static, static_graph = {}, None, None
            if path == "static":
                static = torch.zeros(B, T + 1, dtype=torch.int32, device=dev)
                static_graph = step.capture(static)
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            t0 = None
            with loader:
                for k in range(n):
                    if k == timed_from:
                        start.record()
                        t0 = time.perf_counter()
                    batch = loader.pop()
                    if path == "graph":
                        graph = graphs.get(batch.slot)
                        if graph is None:  # the slot's first batch: capture over its view
                            graph = graphs[batch.slot] = step.capture(batch.view())
                        graph.replay()
                    else:
                        static.copy_(batch.view())
                        static_graph.replay()
                    batch.release()
                end.record()
                wall = time.perf_counter() - t0
                end.synchronize()
                stats = loader.stats()["verdict"]
            timed = n - timed_from
            out[path] = dict(step=step, wall_us=wall / timed * 1e6,
                             gpu_us=start.elapsed_time(end) / timed * 1e3,
                             graphs=len(graphs) or 1, verdict=stats)
    g, s = out["graph"]["step"], out["static"]["step"]
    loss_diff = (g.losses - s.losses).abs()
    loss_wrong = (loss_diff > 1e-6 * s.losses.abs() + 1e-7).sum()
    checks = torch.stack([g.wrong, s.wrong, (g.sums != s.sums).sum(), loss_wrong,
                          (g.counter != n).long() + (s.counter != n).long()]).tolist()
    return dict(
        n=n, graph=out["graph"], static=out["static"],
        graph_rows_wrong=checks[0], static_rows_wrong=checks[1],
        checksums_differ=checks[2], losses_differ=checks[3], counters_off=checks[4],
        max_loss_diff=float(loss_diff.max()), first_loss=float(g.losses[0]),
        last_loss=float(g.losses[-1]),
    )


def wrong_of(r):
    return (r["graph_rows_wrong"] + r["static_rows_wrong"] + r["checksums_differ"]
            + r["losses_differ"] + r["counters_off"])


def skip(why):
    print(f"cuda_graphs.py: SKIP: {why}")
    print(f"RESULT\tcuda_graphs\tSKIP\t{why}")
    raise SystemExit(0)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=10_000)
    ap.add_argument("--device-slots", type=int, default=3)
    ap.add_argument("--shard", help="a shard whose token i is i % 65536 (default: written under /tmp)")
    args = ap.parse_args()
    try:
        import torch
    except ImportError:
        skip("no torch")
    if not torch.cuda.is_available():
        skip("torch sees no CUDA device")
    import pinring

    made = None
    shard = args.shard
    if shard is None:
        made = tempfile.mkdtemp(prefix="pinring-graphs-")
        shard = write_shard(os.path.join(made, "train_000.bin"), N_TOKENS)
    try:
        r = run(torch, pinring, shard, args.batches, args.device_slots)
    finally:
        if made:
            os.remove(shard)
            os.rmdir(made)
    g, s = r["graph"], r["static"]
    print(f"{r['n']} batches of {B}x{T + 1} int32, {args.device_slots} device slots, "
          f"{g['graphs']} graphs (one per slot) against one graph over a static buffer")
    print(f"graph per slot:     {g['wall_us']:7.1f} us/step (host loop), {g['gpu_us']:7.1f} us/step (GPU); {g['verdict']}")
    print(f"static.copy_ + graph: {s['wall_us']:5.1f} us/step (host loop), {s['gpu_us']:7.1f} us/step (GPU); {s['verdict']}")
    print(f"loss {r['first_loss']:.4f} -> {r['last_loss']:.4f}; max |loss difference| {r['max_loss_diff']:.3g}")
    wrong = wrong_of(r)
    detail = (f"{r['n']} batches: rows wrong {r['graph_rows_wrong']} (graph) {r['static_rows_wrong']} (static), "
              f"checksums differing {r['checksums_differ']}, losses differing {r['losses_differ']}, "
              f"counters off {r['counters_off']}")
    print(detail)
    print(f"RESULT\tcuda_graphs\t{'PASS' if wrong == 0 else 'FAIL'}\t{detail}")
    print(f"ROW\tcuda graph per slot (no copy), us/step\t{g['wall_us']:.1f}\t"
          f"static.copy_ + graph {s['wall_us']:.1f} us/step (GPU {g['gpu_us']:.1f} vs {s['gpu_us']:.1f}); "
          f"{r['n']} batches, {wrong} wrong\t0 wrong; both reported\t{'yes' if wrong == 0 else 'NO'}", flush=True)
    if wrong:
        sys.exit(1)


if __name__ == "__main__":
    main()
