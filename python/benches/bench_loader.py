#!/usr/bin/env python3
"""The Python package's GPU benchmark: pinring fed from a Python loop, against PyTorch's
DataLoader and raw H2D, on the workloads of the Rust benchmark (examples/gpu_bench.rs).

    python3 python/benches/bench_loader.py [--shard PATH] [--rust-rows FILE]
        [--small-batches N] [--large-batches N] [--latency-iters N] [--no-dataloader]

Workloads: B windows of T + 1 tokens at uniformly random offsets in a uint16 token shard,
widened to int32 and delivered to the GPU.
  small: B = 16, T + 1 = 4097 (256 KiB a batch): batches/s from the loop
         `b = loader.pop(); x = torch.from_dlpack(b); b.release(event=stream)`,
         against torch.utils.data.DataLoader(num_workers=4, pin_memory=True) on the same
         workload (benches/torch_dataloader.py's peer);
  small, fixed views + declared stream: the same workload, the loop
         `b = loader.pop(); x = b.view(); b.release()` under `torch.cuda.stream(s)` of a
         Loader(stream=s, fixed_views=torch.from_dlpack) (no stream looked up, no DLPack
         export per batch), against the Rust pipeline's small row of the same run, at
         the slots that row picked (RUST_SMALL without a Rust row; and, reported beside
         it, at the from_dlpack row's H64 D16); median of 3 passes;
  large: B = 64, T + 1 = 131073 (32 MiB a batch): GiB/s, against raw H2D (back-to-back
         copies from one pinned tensor on a side stream, same size); short of 95%, what
         limits it, measured over the timed batches (the stages' busy shares, the copy
         thread's waits for a device slot, the consumer's stalls, the verdict);
  latency: the Python-side cost per batch, with the pipeline ahead of the consumer (the
         loop does ~100 us of host work between batches, not timed): p50, p90, p99 of
         pop + view + release (fixed views, declared stream) and, beside it, of
         pop + from_dlpack + release(event=stream).
Each result is a line ROW<TAB>what<TAB>value<TAB>reference<TAB>target<TAB>yes|NO; progress
goes to stderr. --rust-rows FILE: gpu_bench's output from the same run, whose small and
large rows are quoted beside these. Without --shard, a 100 Mi-token shard is written under
/tmp (and removed at the end).
"""

import argparse
import os
import re
import pathlib
import sys
import tempfile
import time
from statistics import median

import numpy as np

GIB = float(1 << 30)
WARM = 200
REPO = pathlib.Path(__file__).resolve().parents[2]


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def row(what, value, reference, target, met):
    flag = "-" if met is None else ("yes" if met else "NO")
    print(f"ROW\t{what}\t{value}\t{reference}\t{target}\t{flag}", flush=True)


def write_shard(path, n_tokens, seed=7):
    header = np.zeros(256, dtype="<i4")
    header[:3] = [20240520, 1, n_tokens]
    rng = np.random.default_rng(seed)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        left = n_tokens
        while left:
            n = min(left, 1 << 24)
            f.write(rng.integers(0, 50257, size=n, dtype=np.uint16).astype("<u2").tobytes())
            left -= n


def rust_rows(path):
    """gpu_bench's ROW lines, by their first column: (value, reference) pairs."""
    rows = {}
    if path and os.path.exists(path):
        for line in open(path):
            parts = line.rstrip("\n").split("\t")
            if parts[0] == "ROW" and len(parts) >= 3:
                rows[parts[1].strip()] = (parts[2], parts[3] if len(parts) > 3 else "")
    return rows


def slots_of(reference):
    """The slots a Rust small row's reference names ("H256 D64, cores-3 decode threads;
    ..."), as Loader arguments; None if it names none. Pinning is not carried over."""
    if reference.startswith("default"):
        return {}
    m = re.match(r"H(\d+) D(\d+), (?:cores-(\d+)|(\d+)) decode threads", reference)
    if not m:
        return None
    threads = CORES - int(m.group(3)) if m.group(3) else int(m.group(4))
    return dict(host_slots=int(m.group(1)), device_slots=int(m.group(2)),
                decode_threads=max(1, threads))


def loader_for(pinring, shard, b, t1, **slots):
    src = pinring.TokenWindows(shard, seq_len=t1 - 1, dtype="int32", order="random", seed=1)
    return pinring.Loader(src, batch_size=b, device="cuda:0", epochs=None, pop_timeout=20.0, **slots)


# The configs the rows use, stated in them (see the README's sizing guide): small batches
# need many host slots (Little's law); both leave 4 cores (the guide's C / G - 4), so that
# the interpreter, the copy and completion threads keep theirs. (Large batches with half
# the cores decoding were decode-bound on one host: 8 of 16 threads 99% busy, 90% of raw.)
CORES = os.cpu_count() or 2
SMALL = dict(host_slots=64, device_slots=16, decode_threads=max(1, CORES - 4))
# The fixed-view row's slots when no Rust row names the ones it picked (benches/gpu/small.rs).
RUST_SMALL = dict(host_slots=128, device_slots=32, decode_threads=max(1, CORES - 4))
LARGE = dict(decode_threads=max(1, CORES - 4))


def stated(cfg):
    return ", ".join(f"{k} {v}" for k, v in cfg.items())


def drive(torch, loader, n, secs, at_start=None):
    """The trainer's loop: pop, view, release fenced on the current stream. Batches/s over
    n batches after the warm-up (or secs seconds, whichever ends first); `at_start` is
    called when the timed batches start."""
    stream = torch.cuda.current_stream()
    for _ in range(WARM):
        b = loader.pop()
        x = torch.from_dlpack(b)
        b.release(event=stream)
    torch.cuda.synchronize()
    if at_start:
        at_start()
    done, t0 = 0, time.perf_counter()
    while done < n and time.perf_counter() - t0 < secs:
        b = loader.pop()
        x = torch.from_dlpack(b)
        b.release(event=stream)
        done += 1
    del x
    torch.cuda.synchronize()
    return done, time.perf_counter() - t0


def drive_fixed(torch, loader, stream, n, secs):
    """The CUDA-graph-mode loop: pop (the declared stream waits for the batch), the slot's
    fixed view, release() fenced on the declared stream. Batches/s as `drive`."""
    with torch.cuda.stream(stream):
        for _ in range(WARM):
            b = loader.pop()
            x = b.view()
            b.release()
        torch.cuda.synchronize()
        done, t0 = 0, time.perf_counter()
        while done < n and time.perf_counter() - t0 < secs:
            b = loader.pop()
            x = b.view()
            b.release()
            done += 1
        del x
        torch.cuda.synchronize()
        return done, time.perf_counter() - t0


def limits(before, after):
    """What held a run back, from two loader.stats() around it: each stage's busy share of
    the wall time (decode: of all its threads), the copy thread's waits for a device slot
    (the consumer holding slots), the consumer's stalls (waiting for batches), and the
    pipeline's verdict."""
    wall = max(after["elapsed"] - before["elapsed"], 1e-9)

    def share(key, sub=None, per=1):
        a, b = (after[key], before[key]) if sub is None else (after[key][sub], before[key][sub])
        return 100 * (a - b) / wall / per

    threads = after["decode_threads"] or 1
    parts = [
        f"decode busy {share('decode', 'busy', threads):.0f}% of {threads} threads",
        f"copy thread busy {share('copy', 'busy'):.0f}%",
        f"copy waited for a device slot {share('copy_waited_for_device_slot'):.0f}%",
        f"consumer stalled {share('consumer_stall_time'):.0f}%",
    ]
    if after.get("transfer") is not None and before.get("transfer") is not None:
        parts.append(f"H2D in flight {share('transfer'):.0f}%")
    return "; ".join(parts) + f"; verdict: {after['bottleneck']}"


def raw_h2d(torch, nbytes, n):
    """GiB/s of back-to-back H2D copies of nbytes from one pinned tensor on a side stream."""
    src = torch.empty(nbytes // 4, dtype=torch.int32).pin_memory()
    dst = [torch.empty(nbytes // 4, dtype=torch.int32, device="cuda:0") for _ in range(2)]
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for i in range(3):
            dst[i % 2].copy_(src, non_blocking=True)
        stream.synchronize()
        t0 = time.perf_counter()
        for i in range(n):
            dst[i % 2].copy_(src, non_blocking=True)
        stream.synchronize()
    return n * nbytes / (time.perf_counter() - t0) / GIB


def latency(torch, loader, iters, fixed=False):
    """Per-call seconds of pop + from_dlpack + release(event=stream), or with fixed=True
    (a Loader with stream= and fixed_views=, run under its stream) of pop + view +
    release(), with the pipeline ahead; sorted, and the p50 of each of the three calls."""
    stream = torch.cuda.current_stream()
    samples = np.empty(iters)
    parts = np.empty((iters, 3))
    for _ in range(WARM):
        b = loader.pop()
        b.release() if fixed else b.release(event=stream)
    for i in range(iters):
        spin_until = time.perf_counter() + 100e-6  # the consumer's own work, not timed
        while time.perf_counter() < spin_until:
            pass
        if fixed:
            t0 = time.perf_counter_ns()
            b = loader.pop()
            t1 = time.perf_counter_ns()
            x = b.view()
            t2 = time.perf_counter_ns()
            b.release()
        else:
            t0 = time.perf_counter_ns()
            b = loader.pop()
            t1 = time.perf_counter_ns()
            x = torch.from_dlpack(b)
            t2 = time.perf_counter_ns()
            b.release(event=stream)
        t3 = time.perf_counter_ns()
        samples[i] = (t3 - t0) * 1e-9
        parts[i] = (t1 - t0, t2 - t1, t3 - t2)
        del x
    torch.cuda.synchronize()
    return np.sort(samples), np.median(parts, axis=0) * 1e-3


def percentiles(lat):
    return tuple(lat[int((len(lat) - 1) * q)] * 1e6 for q in (0.5, 0.9, 0.99))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shard")
    ap.add_argument("--rust-rows")
    ap.add_argument("--small-batches", type=int, default=40_000)
    ap.add_argument("--large-batches", type=int, default=300)
    ap.add_argument("--latency-iters", type=int, default=20_000)
    ap.add_argument("--dataloader-batches", type=int, default=3000)
    ap.add_argument("--no-dataloader", action="store_true")
    args = ap.parse_args()

    import torch

    import pinring

    if not torch.cuda.is_available():
        raise SystemExit("torch sees no CUDA device")
    torch.zeros(1, device="cuda:0")
    made = None
    shard = args.shard
    if shard is None:
        made = tempfile.mkdtemp(prefix="pinring-pybench-")
        shard = os.path.join(made, "train_000.bin")
        log(f"writing a 100 Mi-token shard to {shard}")
        write_shard(shard, 100 << 20)
    n_tokens = pinring.TokenWindows(shard, seq_len=1).tokens
    log(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}; pinring {pinring.__version__}; shard {n_tokens} tokens")
    rust = rust_rows(args.rust_rows)
    try:
        # Small batches.
        with loader_for(pinring, shard, 16, 4097, **SMALL) as loader:
            done, secs = drive(torch, loader, args.small_batches, 3.0)
            stats = loader.stats()
        rate = done / secs
        log(f"small: {done} batches in {secs:.2f} s; stats {stats}")
        dl_rate = None
        if not args.no_dataloader:
            sys.path.insert(0, str(REPO / "benches"))
            import torch_dataloader

            log("DataLoader(num_workers=4, pin_memory=True), small ...")
            n, s = torch_dataloader.run_dataloader(torch, shard, n_tokens, 16, 4097, args.dataloader_batches)
            dl_rate = n / s
        ref = f"{stated(SMALL)}; " + (f"DataLoader(4, pin) {dl_rate:.0f}: x{rate / dl_rate:.1f}" if dl_rate else "DataLoader not run")
        if "small 16x4097 i32, batches/s" in rust:
            ref += f"; Rust pipeline {rust['small 16x4097 i32, batches/s'][0]}"
        ok = rate >= 40_000 and (dl_rate is None or rate >= 25 * dl_rate)
        row("python small 16x4097 i32, batches/s", f"{rate:.0f}", ref, ">= 40,000 and >= 25x DataLoader", ok)

        # Small batches, the CUDA-graph mode: fixed views and a declared stream; median of 3
        # passes, each on a loader of its own.
        def fixed_pass(cfg):
            stream = torch.cuda.Stream()
            with loader_for(pinring, shard, 16, 4097, stream=stream, fixed_views=torch.from_dlpack,
                            **cfg) as loader:
                done, secs = drive_fixed(torch, loader, stream, args.small_batches, 3.0)
                verdict = loader.stats()["verdict"]
            log(f"small, fixed views + declared stream ({stated(cfg)}): {done} batches in "
                f"{secs:.2f} s; stats {verdict}")
            return done / secs

        # At the Rust row's slots (benches/gpu/small.rs picks them: its reference names
        # them; RUST_SMALL without a Rust row), so that the ratio compares like for like: a
        # small batch's rate is about device_slots / the slot cycle (the Rust row's
        # timeline), so the slots count as much as the per-step cost. The row below it is
        # the same loop at the from_dlpack row's slots.
        rust_small, rust_ref = rust.get("small 16x4097 i32, batches/s", (None, ""))
        like_rust = slots_of(rust_ref)
        if like_rust is None:
            like_rust = RUST_SMALL
        passes = [fixed_pass(like_rust) for _ in range(3)]
        fixed_rate = median(passes)
        ref = (f"{stated(like_rust)} (the Rust row's slots); median of 3 (passes "
               f"{', '.join(f'{p:.0f}' for p in passes)}); from_dlpack loop {rate:.0f}")
        ok = fixed_rate >= 100_000
        if rust_small:
            ref += f"; Rust pipeline {rust_small}: {100 * fixed_rate / float(rust_small):.0f}%"
            ok = ok and fixed_rate >= 0.60 * float(rust_small)
        else:
            ref += "; no Rust row (run scripts/gpu-check.sh --run first for the ratio)"
        row("python small, fixed views + declared stream, batches/s", f"{fixed_rate:.0f}", ref,
            ">= 100,000 and >= 60% of the Rust row", ok)
        passes = [fixed_pass(SMALL) for _ in range(3)]
        ref = f"{stated(SMALL)}; median of 3 (passes {', '.join(f'{p:.0f}' for p in passes)})"
        row("  same, at the from_dlpack row's slots", f"{median(passes):.0f}", ref, "-", None)

        # Large batches.
        nbytes = 64 * 131073 * 4
        with loader_for(pinring, shard, 64, 131073, **LARGE) as loader:
            before = {}
            # The stats when the timed batches start (after drive's warm-up).
            done, secs = drive(torch, loader, args.large_batches, 3.0,
                               at_start=lambda: before.update(loader.stats()))
            stats = loader.stats()
        gibps = done * nbytes / secs / GIB
        held = limits(before, stats)
        log(f"large: {done} batches in {secs:.2f} s; {held}; stats {stats}")
        raw = raw_h2d(torch, nbytes, 100)
        ref = f"{stated(LARGE)}; {gibps:.2f} GiB/s against raw H2D {raw:.2f} GiB/s"
        if "large 64x131073 i32, GiB/s" in rust:
            ref += f"; Rust pipeline {rust['large 64x131073 i32, GiB/s'][0]} GiB/s"
        if gibps < 0.95 * raw:
            ref += f"; short: {held}"
        row("python large 64x131073 i32, % of raw H2D", f"{100 * gibps / raw:.1f}%", ref, ">= 95% of raw H2D",
            gibps >= 0.95 * raw)

        # Python-side cost per batch: fixed views and a declared stream, and beside it the
        # from_dlpack path.
        stream = torch.cuda.Stream()
        with torch.cuda.stream(stream), loader_for(pinring, shard, 16, 4097, stream=stream,
                                                   fixed_views=torch.from_dlpack) as loader:
            lat, lat_parts = latency(torch, loader, args.latency_iters, fixed=True)
        p50, p90, p99 = percentiles(lat)
        # The same loop with the small rows' slots: with four device slots or more a
        # release wakes the copy thread only once half of them wait (ARCHITECTURE.md §6).
        with torch.cuda.stream(stream), loader_for(pinring, shard, 16, 4097, stream=stream,
                                                   fixed_views=torch.from_dlpack, **SMALL) as loader:
            many, many_parts = latency(torch, loader, args.latency_iters, fixed=True)
        m50, m90, m99 = percentiles(many)
        with loader_for(pinring, shard, 16, 4097) as loader:
            dl_lat, dl_parts = latency(torch, loader, args.latency_iters)
        d50, d90, d99 = percentiles(dl_lat)
        row(
            "python pop + view + release p50 us",
            f"{p50:.2f}",
            f"p90 {p90:.2f} us, p99 {p99:.2f} us ({len(lat)} calls, pipeline ahead; "
            f"Loader(stream=, fixed_views=torch.from_dlpack)); p50 of each: pop "
            f"{lat_parts[0]:.2f}, view {lat_parts[1]:.2f}, release {lat_parts[2]:.2f} us",
            "<= 5 us",
            p50 <= 5.0,
        )
        row(
            "  same, small rows' slots",
            f"{m50:.2f}",
            f"p90 {m90:.2f} us, p99 {m99:.2f} us; {stated(SMALL)}; p50 of each: pop "
            f"{many_parts[0]:.2f}, view {many_parts[1]:.2f}, release {many_parts[2]:.2f} us",
            "<= 5 us",
            m50 <= 5.0,
        )
        row(
            "python pop + from_dlpack + release p50 us",
            f"{d50:.1f}",
            f"p90 {d90:.1f} us, p99 {d99:.1f} us ({len(dl_lat)} calls, pipeline ahead; "
            f"release(event=stream)); p50 of each: pop {dl_parts[0]:.2f}, from_dlpack "
            f"{dl_parts[1]:.2f}, release {dl_parts[2]:.2f} us",
            "reported beside the view row",
            None,
        )
    finally:
        if made:
            os.remove(shard)
            os.rmdir(made)


if __name__ == "__main__":
    main()
