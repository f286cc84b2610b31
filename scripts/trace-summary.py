#!/usr/bin/env python3
"""Summarizes a pinring trace (Chrome trace JSON from Pipeline::write_trace).

Prints, per span name, the count and the mean/p50/p99 duration; then, for the batches
whose every stage is in the trace, where a batch's time goes between stages (the gap
from one stage's end to the next one's start is time spent waiting for a hand-off).

    python3 scripts/trace-summary.py trace.json
    python3 scripts/trace-summary.py trace.json --batches 100 110   # those batches' times
"""
import json
import statistics
import sys
from collections import defaultdict


def pct(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main(path, batches=None):
    with open(path) as f:
        events = json.load(f)["traceEvents"]
    spans = defaultdict(list)  # name -> [(batch, start, end)]
    opened = {}
    for e in events:
        ph = e.get("ph")
        if ph == "X":
            batch = e["args"].get("batch", e["args"].get("first"))
            spans[e["name"]].append((batch, e["ts"], e["ts"] + e["dur"], e))
        elif ph == "b":
            opened[e["id"]] = e["ts"]
        elif ph == "e" and e["id"] in opened:
            spans[e["name"]].append((e["id"], opened.pop(e["id"]), e["ts"], e))
    print(f"{'span':<14}{'count':>8}{'mean us':>10}{'p50 us':>10}{'p99 us':>10}")
    for name in ["source", "decode", "fence wait", "copy call", "copy enqueue", "H2D", "pop", "release"]:
        durs = [end - start for _, start, end, _ in spans.get(name, [])]
        if durs:
            print(f"{name:<14}{len(durs):>8}{statistics.mean(durs):>10.1f}"
                  f"{pct(durs, 0.5):>10.1f}{pct(durs, 0.99):>10.1f}")
    # Per batch: source end -> first decode start -> last decode end -> copy enqueue
    # start -> H2D end -> pop end.
    first = lambda name: {b: (s, e) for b, s, e, _ in spans.get(name, [])}
    source, h2d, pop = first("source"), first("H2D"), first("pop")
    decode = defaultdict(lambda: [float("inf"), 0.0])
    for b, s, e, _ in spans.get("decode", []):
        decode[b][0] = min(decode[b][0], s)
        decode[b][1] = max(decode[b][1], e)
    enqueue = {}
    for b, s, e, ev in spans.get("copy enqueue", []):
        for k in range(b, b + ev["args"].get("batches", 1)):
            enqueue[k] = (s, e)
    gaps = defaultdict(list)
    for b in source:
        if b in decode and b in enqueue and b in h2d and b in pop:
            gaps["source -> decode starts"].append(decode[b][0] - source[b][1])
            gaps["decoding (first to last item)"].append(decode[b][1] - decode[b][0])
            gaps["decoded -> copy enqueued"].append(enqueue[b][0] - decode[b][1])
            gaps["copy enqueued -> seen complete"].append(h2d[b][1] - h2d[b][0])
            gaps["copy enqueued -> popped"].append(pop[b][1] - enqueue[b][0])
            gaps["source start -> popped"].append(pop[b][1] - source[b][0])
    if batches:
        lo, hi = batches
        t0 = source[lo][0] if lo in source else 0.0
        print(f"\nbatches {lo}..{hi}, us from batch {lo}'s source start:")
        print(f"{'batch':>6}{'source':>10}{'decoded':>10}{'enqueued':>10}{'complete':>10}"
              f"{'popped':>10}{'released':>10}")
        release = first("release")
        for b in range(lo, hi):
            cells = [source.get(b, (None,))[0], decode[b][1] if b in decode else None,
                     enqueue.get(b, (None,))[0], h2d.get(b, (None, None))[1],
                     pop.get(b, (None, None))[1], release.get(b, (None,))[0]]
            print(f"{b:>6}" + "".join(f"{c - t0:>10.0f}" if c is not None else f"{'-':>10}"
                                      for c in cells))
    if gaps:
        n = len(next(iter(gaps.values())))
        print(f"\nper batch ({n} batches with every stage traced), us:")
        print(f"{'':<34}{'mean':>10}{'p50':>10}{'p99':>10}")
        for name, v in gaps.items():
            print(f"{name:<34}{statistics.mean(v):>10.1f}{pct(v, 0.5):>10.1f}{pct(v, 0.99):>10.1f}")


if __name__ == "__main__":
    args = sys.argv[1:]
    batches = None
    if "--batches" in args:
        i = args.index("--batches")
        batches = (int(args[i + 1]), int(args[i + 2]))
        del args[i:i + 3]
    main(args[0] if args else "trace.json", batches)
