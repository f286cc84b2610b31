#!/usr/bin/env python3
"""PyTorch's side of the GPU benchmark: the peers pinring is compared with, measured on
the same token shard and workload, on the same GPU, in the same run.

    python3 benches/torch_dataloader.py --shard PATH [--small-batches N] [--large-batches N]

Workloads (as the GPU benchmark, benches/gpu/): B windows of T + 1 tokens at uniformly random
offsets in a uint16 token shard (the llm.c / modded-nanogpt .bin format), widened to
int32 and delivered to the GPU:
  small: B = 16, T + 1 = 4097 (256 KiB a batch), batches/s;
  large: B = 64, T + 1 = 131073 (32 MiB a batch), GiB/s.
Peers:
  dataloader: torch.utils.data.DataLoader(num_workers=4, pin_memory=True) over a
    map-style dataset whose __getitem__ slices the memory-mapped shard and widens it;
    the loop moves each batch with .cuda(non_blocking=True);
  prefetch: the seed-001 pattern (modded-nanogpt's PrefetchLoader): one Python thread
    builds each batch on the CPU, pins it, starts its H2D on a dedicated copy stream and
    records an event; the main loop makes its stream wait on the event and calls
    record_stream, so the copy overlaps whatever the main stream does.
Each result is a line TORCH<TAB>key<TAB>value on stdout (read by the GPU benchmark's --torch);
progress goes to stderr. The clock starts after a warm-up (worker start-up excluded) and
stops after a final synchronize.
"""

import argparse
import queue
import sys
import threading
import time

import numpy as np

MAGIC, VERSION, HEADER_BYTES = 20240520, 1, 1024
GIB = float(1 << 30)
WARM = 20


def open_tokens(path):
    header = np.fromfile(path, dtype="<i4", count=256)
    if len(header) < 3 or header[0] != MAGIC or header[1] != VERSION or header[2] <= 0:
        raise SystemExit(f"{path}: not a token shard")
    return np.memmap(path, dtype="<u2", mode="r", offset=HEADER_BYTES, shape=(int(header[2]),))


def offsets(n_tokens, t1, count, seed):
    return np.random.default_rng(seed).integers(0, n_tokens - t1 + 1, size=count)


class Windows:
    """A map-style dataset: item i is the window at offs[i], widened to int32. Module-level
    so that DataLoader workers can unpickle it under any start method."""

    def __init__(self, path, t1, offs):
        self.path, self.t1, self.offs = path, t1, offs
        self.tokens = None  # opened in each worker

    def __len__(self):
        return len(self.offs)

    def __getitem__(self, i):
        import torch

        if self.tokens is None:
            self.tokens = open_tokens(self.path)
        o = int(self.offs[i])
        return torch.from_numpy(self.tokens[o : o + self.t1].astype(np.int32))


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_dataloader(torch, path, n_tokens, b, t1, batches):
    from torch.utils.data import DataLoader

    ds = Windows(path, t1, offsets(n_tokens, t1, (batches + WARM) * b, 1))
    dl = DataLoader(ds, batch_size=b, num_workers=4, pin_memory=True, drop_last=True)
    t0, done = None, 0
    for i, x in enumerate(dl):
        y = x.cuda(non_blocking=True)
        if i + 1 == WARM:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        elif t0 is not None:
            done += 1
    torch.cuda.synchronize()
    del y
    return done, time.perf_counter() - t0


def run_prefetch(torch, path, n_tokens, b, t1, batches):
    tokens = open_tokens(path)
    offs = offsets(n_tokens, t1, (batches + WARM) * b, 2)
    copy_stream = torch.cuda.Stream()
    q = queue.Queue(maxsize=2)

    def produce():
        for i in range(batches + WARM):
            rows = [tokens[o : o + t1] for o in offs[i * b : (i + 1) * b]]
            cpu = torch.from_numpy(np.stack(rows).astype(np.int32)).pin_memory()
            with torch.cuda.stream(copy_stream):
                gpu = cpu.to("cuda", non_blocking=True)
                ready = torch.cuda.Event()
                ready.record(copy_stream)
            q.put((gpu, ready, cpu))
        q.put(None)

    thread = threading.Thread(target=produce, daemon=True)
    thread.start()
    main = torch.cuda.current_stream()
    t0, done, i = None, 0, 0
    while True:
        item = q.get()
        if item is None:
            break
        gpu, ready, _cpu = item
        main.wait_event(ready)
        gpu.record_stream(main)
        if i + 1 == WARM:
            torch.cuda.synchronize()
            t0 = time.perf_counter()
        elif t0 is not None:
            done += 1
        i += 1
    torch.cuda.synchronize()
    thread.join()
    return done, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shard", required=True)
    ap.add_argument("--small-batches", type=int, default=3000)
    ap.add_argument("--large-batches", type=int, default=100)
    args = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        raise SystemExit("torch sees no CUDA device")
    n_tokens = len(open_tokens(args.shard))
    log(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; shard {n_tokens} tokens")
    torch.zeros(1, device="cuda")
    runs = [
        ("dataloader_small_bps", run_dataloader, 16, 4097, args.small_batches),
        ("prefetch_small_bps", run_prefetch, 16, 4097, args.small_batches),
        ("dataloader_large_gibps", run_dataloader, 64, 131073, args.large_batches),
        ("prefetch_large_gibps", run_prefetch, 64, 131073, args.large_batches),
    ]
    for key, run, b, t1, batches in runs:
        t = time.perf_counter()
        done, secs = run(torch, args.shard, n_tokens, b, t1, batches)
        value = done / secs
        if key.endswith("gibps"):
            value *= b * t1 * 4 / GIB
        print(f"TORCH\t{key}\t{value:.3f}", flush=True)
        log(f"{key}: {value:.2f} ({done} batches in {secs:.2f} s; {time.perf_counter() - t:.1f} s with start-up)")


if __name__ == "__main__":
    main()
