#!/usr/bin/env python3
"""Checks a data-parallel run of packed, mixed documents from its logs (issue 24).

train_gpt.py --ddp --packed --ids-out DIR writes one JSON line per step and rank:
{"run", "rank", "world", "step", "loss", "sources", "ids"}, the (source, document id) of
every document that rank's step packed. Given the runs in order (run 1 stopped and saved,
run 2 resumed on another number of ranks), this checks, from the logs and the shards alone:

- equal steps per rank in every run, the same step numbers on every rank, and run 2 going
  on at the step after run 1's last;
- no document twice (a document is its source and its id, the global offset of its BOS
  token over that source's shards);
- every document of each source's walk up to where the run ended delivered: each source's
  documents, in the order the steps delivered them, are exactly the first documents of
  its shards in order (sequential order: nothing skipped, nothing out of place);
- each source's share within one document of its weight after every logged step;
- the loss falling: from the start to the stop, and on after the resume (no jump back).

It prints a summary and exits 1 if a check fails. It needs numpy only.

    python3 python/examples/check_ddp_run.py --ids /tmp/ids --weights 0.7 0.3 \\
        --data '/tmp/gpt-mix/a/train_*.bin' '/tmp/gpt-mix/b/train_*.bin'
"""

import argparse
import glob
import json
import os
import sys

import numpy as np


def documents(pattern, bos):
    """A source's documents in its sequential walk: the global offsets of its BOS tokens over
    its shards in order (the shards sorted, as pinring and modded-nanogpt sort a glob)."""
    ids, first = [], 0
    for path in sorted(glob.glob(pattern)):
        with open(path, "rb") as f:
            header = np.frombuffer(f.read(1024), dtype="<i4")
            dtype = "<u4" if header[0] == 20240801 else "<u2"
            tokens = np.frombuffer(f.read(), dtype=dtype)[: header[2]]
        ids.extend((first + np.flatnonzero(tokens == bos)).tolist())
        first += len(tokens)
    return ids


def load(folder):
    """{run: {rank: [record, ...] in step order}}, runs in name order."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(folder, "run*-rank*.jsonl"))):
        with open(path) as f:
            for line in f:
                r = json.loads(line)
                runs.setdefault(str(r["run"]), {}).setdefault(r["rank"], []).append(r)
    for ranks in runs.values():
        for records in ranks.values():
            records.sort(key=lambda r: r["step"])
    return dict(sorted(runs.items()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ids", required=True, metavar="DIR", help="the --ids-out folder of the runs")
    ap.add_argument("--data", required=True, nargs="+", metavar="PATTERN", help="each source's shards, in source order")
    ap.add_argument("--weights", required=True, type=float, nargs="+", help="the sources' weights")
    ap.add_argument("--bos", type=int, default=50256, help="the token that starts a document")
    ap.add_argument("--window", type=int, default=10, help="steps averaged for each loss figure")
    args = ap.parse_args()
    w = np.asarray(args.weights, float) / sum(args.weights)
    runs = load(args.ids)
    if not runs:
        raise SystemExit(f"no run*-rank*.jsonl in {args.ids}")
    failures = []

    def check(ok, what):
        print(f"  {'ok  ' if ok else 'FAIL'}  {what}")
        if not ok:
            failures.append(what)

    print(f"runs: {', '.join(f'{name} ({len(ranks)} rank(s))' for name, ranks in runs.items())}")
    # Steps per rank, and the document sequence: step by step, rank after rank.
    sequence, step_ends, step_losses, run_losses = [], [], [], {}
    last_step = None
    for name, ranks in runs.items():
        counts = {r: len(v) for r, v in sorted(ranks.items())}
        steps = [[rec["step"] for rec in ranks[r]] for r in sorted(ranks)]
        check(len(set(counts.values())) == 1 and all(s == steps[0] for s in steps),
              f"run {name}: equal steps per rank {list(counts.values())}, the same step numbers on every rank")
        if last_step is not None and steps[0]:
            check(steps[0][0] == last_step + 1, f"run {name} goes on at step {steps[0][0]} (the last was {last_step})")
        losses = []
        for k in range(min(counts.values())):
            for r in sorted(ranks):
                rec = ranks[r][k]
                sequence.extend(zip(rec["sources"], rec["ids"]))
            step_ends.append(len(sequence))
            loss = float(np.mean([ranks[r][k]["loss"] for r in ranks]))
            losses.append(loss)
            step_losses.append(loss)
        run_losses[name] = losses
        if steps[0]:
            last_step = steps[0][-1]
    print(f"documents delivered: {len(sequence)} in {len(step_ends)} steps")
    # No document twice.
    dup = len(sequence) - len(set(sequence))
    check(dup == 0, f"no document twice ({dup} delivered more than once)")
    # Each source's documents are the first ones of its walk, in order.
    for s, pattern in enumerate(args.data):
        walk = documents(pattern, args.bos)
        got = [i for src, i in sequence if src == s]
        check(got == walk[: len(got)],
              f"source {s} ({pattern}): {len(got)} of its {len(walk)} documents delivered, exactly its first "
              f"{len(got)} in order (its epoch {100 * len(got) / max(1, len(walk)):.1f}% done)")
    # Shares at every logged step.
    counts = np.zeros(len(w))
    worst, start = 0.0, 0
    for end in step_ends:
        for src, _ in sequence[start:end]:
            counts[src] += 1
        worst = max(worst, float(np.max(np.abs(counts - w * end))))
        start = end
    check(worst <= 1.0 + 1e-9, f"each source's share within 1 document of its weight after every step "
                                f"(largest gap {worst:.3f} documents; final counts {counts.astype(int).tolist()}, "
                                f"weights x documents {np.round(w * len(sequence), 1).tolist()})")
    # The loss falls, and keeps falling across the resume.
    n = args.window
    names = list(run_losses)
    first, last = run_losses[names[0]], run_losses[names[-1]]
    start_loss, before = np.mean(first[:n]), np.mean(first[-n:])
    print(f"loss: start {start_loss:.4f}, before the stop {before:.4f}", end="")
    if len(names) > 1:
        after, end = np.mean(last[:n]), np.mean(last[-n:])
        print(f", after the resume {after:.4f}, at the end {end:.4f} (means of {n} steps)")
        check(before < start_loss - 0.5, "the loss fell by 0.5 or more before the stop")
        check(after < before + 0.25, "no jump back after the resume (within 0.25 of the loss before the stop)")
        check(end < after, "the loss kept falling after the resume")
    else:
        print(f" (means of {n} steps)")
        check(before < start_loss - 0.5, "the loss fell by 0.5 or more")
    print(f"exactly-once check: {'PASSED' if not failures else 'FAILED: ' + '; '.join(failures)}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
