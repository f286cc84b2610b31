"""Many ranks under torchrun (gloo on the cpu, or NCCL): pinring.RankGuard naming a rank
whose data ends early before any collective hangs, and a live reshard 4 -> 3 (one rank
leaves at a step boundary, as torchft's replica groups do) delivering every document of a
Mixture of Documents exactly once, checked from the logged ids.

    torchrun --standalone --nproc_per_node=4 ddp_guard_reshard.py --guard   --work DIR
    torchrun --standalone --nproc_per_node=4 ddp_guard_reshard.py --reshard --work DIR
    python ddp_guard_reshard.py --verify --work DIR

--guard: every rank trains over a Mixture of two Documents corpora (stop="first"), with an
all_reduce a step as a trainer's gradients would; rank 2's second corpus lacks a shard (a
node whose data folder misses one), so its run ends first. RankGuard(loader, every=EVERY)
checks through torch.distributed (one all_reduce MAX a check); the run passes when every
rank raised RankError naming rank 2 at the same step, before rank 2 ran out.

--reshard: every rank has the same data; after STEPS_BEFORE steps rank 3 leaves, the
other three call loader.reshard(rank, 3) and go on in a group of three (their guard on
it) to the mixture's end. Each rank logs the (source, document id) of every document it
delivered; --verify checks no document twice and every document of a one-process run of
the same mixture delivered, but for the few the ranks' last partial steps leave.
"""

import argparse
import json
import os
import pathlib
import sys
import time

import numpy as np

import pinring
from train_gpt import write_shard  # an llm.c shard of uint16 tokens (this folder's trainer)

EVERY = 10
STEPS_BEFORE = 23
TOKENS, MSL = 512, 128


def make_data(work):
    """Two corpora of documents (BOS 50256), and the second corpus short of a shard."""
    rng = np.random.default_rng(7)
    for name, shards in (("web", 3), ("code", 3)):
        folder = work / name
        folder.mkdir(parents=True, exist_ok=True)
        for s in range(shards):
            toks = rng.integers(0, 1000, 60_000)
            pos = 0
            while pos < len(toks):
                toks[pos] = 50256
                pos += int(rng.geometric(1 / 90))
            write_shard(folder / f"train_{s:03d}.bin", toks)
    short = work / "code_short"
    short.mkdir(exist_ok=True)
    for s in range(2):
        (short / f"train_{s:03d}.bin").write_bytes((work / "code" / f"train_{s:03d}.bin").read_bytes())


def mixture(work, rank, world, short=False):
    code = "code_short" if short else "code"
    return pinring.Mixture(
        [pinring.Documents(str(work / c / "train_*.bin"), tokens_per_batch=TOKENS, max_seq_len=MSL,
                           index_cache=str(work / "index"))
         for c in ("web", code)],
        weights=[0.5, 0.5], stop="first", rank=rank, world_size=world)


def rows(batch):
    return [(int(s), int(i)) for s, i in zip(batch.sources, batch.doc_ids)]


def log(rank, text):
    print(f"[rank {rank}] {text}", flush=True)


def guard_run(work):
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    loader = pinring.Loader(mixture(work, rank, world, short=rank == 2), device="cpu")
    guard = pinring.RankGuard(loader, every=EVERY)
    grad = torch.zeros(16)
    outcome = None
    steps = 0
    try:
        while True:
            batch = loader.pop(timeout=60)
            if batch is None:
                outcome = {"rank": rank, "ran_out_at": steps}
                log(rank, f"ran out of data at step {steps} with no RankError (the others now hang)")
                break
            batch.release()
            steps += 1
            guard.step()
            dist.all_reduce(grad)  # the trainer's collective
    except pinring.RankError as e:
        outcome = {"rank": rank, "named": e.rank, "kind": e.kind, "step": e.step, "steps": steps}
        log(rank, f"RankError at step {e.step}: {e}")
    # Every rank stopped at the same check: they are still in step, and can gather.
    cost = guard.check_time / max(guard.checks, 1)
    log(rank, f"RankGuard: {guard.checks} checks, {cost * 1e6:.0f} us a check (the all_reduce included)")
    got = [None] * world
    dist.all_gather_object(got, outcome)
    loader.close()
    if rank == 0:
        with pinring.Loader(mixture(work, 2, world, short=True), device="cpu") as alone:
            ends = sum(1 for _ in alone)
        ok = all(o and o.get("named") == 2 and o.get("kind") == "runs_out" for o in got)
        same = len({o.get("step") for o in got if o}) == 1
        early = ok and got[0]["steps"] <= ends
        print(f"guard: rank 2 delivers {ends} steps alone; every rank: "
              + ", ".join(f"rank {o['rank']} -> {o.get('kind')} naming rank {o.get('named')} at step {o.get('step')}"
                          for o in got), flush=True)
        verdict = "ok" if ok and same and early else "FAIL"
        print(f"guard: {verdict}: every rank stopped by RankError naming rank 2 at one step, "
              f"before rank 2 ran out (no collective hung)", flush=True)
        return verdict == "ok"
    return True


def reshard_run(work):
    import torch
    import torch.distributed as dist

    rank, world = dist.get_rank(), dist.get_world_size()
    loader = pinring.Loader(mixture(work, rank, world), device="cpu")
    guard = pinring.RankGuard(loader, every=EVERY)
    grad = torch.zeros(16)
    ids = []
    for _ in range(STEPS_BEFORE):
        batch = loader.pop(timeout=60)
        ids += rows(batch)
        batch.release()
        guard.step()
        dist.all_reduce(grad)
    stayers = list(range(world - 1))
    group = dist.new_group(stayers)  # every rank calls it, the leaving one too
    state_before = json.dumps(loader.state_dict(), sort_keys=True)
    if rank == world - 1:
        log(rank, f"leaves after step {STEPS_BEFORE - 1} with {len(ids)} documents")
        loader.close()
    else:
        t0 = time.perf_counter()
        loader.reshard(rank, len(stayers))
        log(rank, f"resharded to rank {rank} of {len(stayers)} in {(time.perf_counter() - t0) * 1e3:.1f} ms")
        guard = pinring.RankGuard(loader, group=group, every=EVERY)
        while (batch := loader.pop(timeout=60)) is not None:
            ids += rows(batch)
            batch.release()
            guard.step()
            dist.all_reduce(grad, group=group)
        log(rank, f"ended at step {loader.state_dict()['step']} with {len(ids)} documents; "
                  f"RankGuard: {guard.checks} checks, {guard.check_time / max(guard.checks, 1) * 1e6:.0f} us a check")
        loader.close()
    (work / f"ids-{rank}.json").write_text(json.dumps({"ids": ids, "state_before": state_before}))
    return True


def verify(work):
    logs = sorted(work.glob("ids-*.json"))
    got, states = [], set()
    for p in logs:
        d = json.loads(p.read_text())
        got += [tuple(x) for x in d["ids"]]
        states.add(d["state_before"])
    with pinring.Loader(mixture(work, 0, 1), device="cpu") as alone:
        every = []
        for batch in alone:
            every += rows(batch)
            batch.release()
    dupes = len(got) - len(set(got))
    foreign = set(got) - set(every)
    missing = len(set(every) - set(got))
    # Each of the 3 ranks' last partial step at the end: fewer than a step's documents each.
    tail = 3 * TOKENS // 20
    print(f"reshard: {len(logs)} rank logs, {len(got)} documents delivered, "
          f"{len(set(every))} in a one-process run of the mixture", flush=True)
    print(f"reshard: every rank at the same state before the change: {len(states) == 1}", flush=True)
    print(f"reshard: documents twice: {dupes}; not of the mixture: {len(foreign)}; "
          f"left out: {missing} (bound {tail})", flush=True)
    ok = dupes == 0 and not foreign and missing < tail and len(states) == 1 and len(logs) == 4
    print(f"reshard: {'ok' if ok else 'FAIL'}: 4 -> 3 at step {STEPS_BEFORE}, every document exactly once",
          flush=True)
    return ok


def main():
    ap = argparse.ArgumentParser()
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--guard", action="store_true")
    mode.add_argument("--reshard", action="store_true")
    mode.add_argument("--verify", action="store_true")
    ap.add_argument("--work", required=True)
    ap.add_argument("--backend", default="gloo")
    a = ap.parse_args()
    work = pathlib.Path(a.work)
    if a.verify:
        return 0 if verify(work) else 1
    import datetime

    import torch.distributed as dist

    topo = pinring.Topology.from_env()
    dist.init_process_group(a.backend, timeout=datetime.timedelta(seconds=120))
    assert (topo.rank, topo.world_size) == (dist.get_rank(), dist.get_world_size())
    if topo.rank == 0:
        make_data(work)
        log(0, f"topology from torchrun: world {topo.world_size}, {topo.local_world_size} a node")
    dist.barrier()
    ok = guard_run(work) if a.guard else reshard_run(work)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
