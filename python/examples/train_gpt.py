#!/usr/bin/env python3
"""A small GPT trained on llm.c / modded-nanogpt token shards, fed by pinring; with
--loader torch, by a PyTorch DataLoader instead, for comparison.

    # shards from the repo's make_shard (uniform random tokens: a throughput workload)
    cargo run --release --example make_shard -- /tmp/gpt/train_000.bin 20000000
    python3 python/examples/train_gpt.py --data '/tmp/gpt/train_*.bin'

    # a learnable synthetic shard (written here with numpy, same format): the loss falls
    # from ~10.8 (ln of the vocabulary) towards ln(4) ~ 1.39
    python3 python/examples/train_gpt.py --synthetic /tmp/gpt-syn --check
    python3 python/examples/train_gpt.py --synthetic /tmp/gpt-syn --loader torch

make_shard's tokens are uniform over the GPT-2 vocabulary, so nothing in them can be
learned beyond their (uniform) frequencies: the loss starts at about ln(50257) = 10.82 and
stays there. Use them to measure feeding; use --synthetic (each token is the previous one
plus 1, 2, 3 or 4, modulo 1024) to watch a loss fall.

The pinring loop is seed 000's deferred release: the batch is a zero-copy view of the
device slot, read by forward/backward on the current stream, and released fenced on that
stream once the step is enqueued; no host sync. Under torchrun (RANK / WORLD_SIZE /
LOCAL_RANK set) each rank reads a disjoint share of every epoch; --ddp (gradient
all-reduce) belongs to a later change and is refused for now.
"""

import argparse
import glob
import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import pinring

VOCAB = 50304  # GPT-2's 50257, padded


# ---------------------------------------------------------------------------------------
# Data


def write_shard(path, tokens):
    header = np.zeros(256, dtype="<i4")
    header[:3] = [20240520, 1, len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


def synthetic(directory, n_tokens=10_000_000, seed=0):
    """A learnable shard: token i+1 = token i + one of {1, 2, 3, 4} (uniform), mod 1024."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, "train_000.bin")
    if not os.path.exists(path):
        rng = np.random.default_rng(seed)
        steps = rng.integers(1, 5, size=n_tokens, dtype=np.int64)
        write_shard(path, np.cumsum(steps) % 1024)
        print(f"wrote {n_tokens} synthetic tokens to {path} (loss floor ln 4 = {math.log(4):.3f})")
    return os.path.join(directory, "train_*.bin")


class Windows(torch.utils.data.Dataset):
    """The DataLoader peer: window i of T + 1 tokens (stride T) of the memory-mapped
    shards, as int64."""

    def __init__(self, pattern, seq_len):
        self.paths, self.seq_len = sorted(glob.glob(pattern)), seq_len
        self.index = []  # (shard, start)
        for s, path in enumerate(self.paths):
            n = int(np.fromfile(path, dtype="<i4", count=3)[2])
            self.index += [(s, o) for o in range(0, n - seq_len, seq_len)]
        self.maps = None

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        if self.maps is None:  # opened in each worker
            self.maps = [np.memmap(p, dtype="<u2", mode="r", offset=1024) for p in self.paths]
        s, o = self.index[i]
        return torch.from_numpy(self.maps[s][o : o + self.seq_len + 1].astype(np.int64))


# ---------------------------------------------------------------------------------------
# Model (nanoGPT-style)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, seq_len, layers=4, heads=4, d=256):
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(seq_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)
        self.head.weight = self.tok.weight
        self.apply(self._init)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, VOCAB), targets.reshape(-1))


# ---------------------------------------------------------------------------------------
# Feeding


def pinring_batches(args, device, rank, world):
    """(x, done) per step: x is a (B, T + 1) int64 view of the device slot; done() releases
    it fenced on the current stream (stream-side, no host sync)."""
    src = pinring.TokenWindows(
        args.data, seq_len=args.seq_len, dtype="int64", order="shuffled", seed=args.seed,
        rank=rank, world_size=world,
    )
    print(f"pinring: {src}")
    loader = pinring.Loader(src, batch_size=args.batch, device=device, epochs=None, pop_timeout=60.0)
    cuda = device.type == "cuda"
    try:
        while True:
            batch = loader.pop()
            x = torch.from_dlpack(batch)

            def done(batch=batch):
                # The step is enqueued: reuse of the slot waits for this stream. The cpu
                # backend has no streams: release() with no fence.
                batch.release(event=torch.cuda.current_stream() if cuda else None)

            yield x, done
    finally:
        print(f"pinring stats: {loader.stats()}")
        loader.close()


def torch_batches(args, device, rank, world):
    ds = Windows(args.data, args.seq_len)
    sampler = torch.utils.data.DistributedSampler(ds, world, rank, shuffle=True, seed=args.seed)
    dl = torch.utils.data.DataLoader(
        ds, batch_size=args.batch, sampler=sampler, num_workers=4,
        pin_memory=device.type == "cuda", drop_last=True, persistent_workers=True,
    )
    epoch = 0
    while True:
        sampler.set_epoch(epoch)
        for x in dl:
            yield x.to(device, non_blocking=True), (lambda: None)
        epoch += 1


# ---------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    data = ap.add_mutually_exclusive_group(required=True)
    data.add_argument("--data", help="token shards: a path or a glob")
    data.add_argument("--synthetic", metavar="DIR", help="write (once) and train on a learnable shard in DIR")
    ap.add_argument("--loader", choices=["pinring", "torch"], default="pinring")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--check", action="store_true", help="exit 1 unless the loss fell by at least 1.0")
    ap.add_argument("--ddp", action="store_true", help="(a later change) DistributedDataParallel under torchrun")
    args = ap.parse_args()
    if args.synthetic:
        args.data = synthetic(args.synthetic)

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    if args.ddp:
        raise SystemExit("--ddp is not implemented yet: run one process (the data sharding by "
                         "RANK / WORLD_SIZE is in place)")
    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", local if device.index is None else device.index)
        torch.cuda.set_device(device)
    torch.manual_seed(args.seed)

    model = GPT(args.seq_len).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, betas=(0.9, 0.95))
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    feed = pinring_batches if args.loader == "pinring" else torch_batches
    batches = feed(args, device, rank, world)
    print(f"{args.loader} feeding {device}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, "
          f"batch {args.batch} x {args.seq_len + 1} tokens, {args.steps} steps")

    losses, data_time, t0 = [], 0.0, time.perf_counter()
    for step in range(args.steps):
        for g in opt.param_groups:  # linear warm-up, then constant
            g["lr"] = args.lr * min(1.0, (step + 1) / 30)
        t = time.perf_counter()
        x, done = next(batches)
        data_time += time.perf_counter() - t
        with autocast:
            loss = model(x[:, :-1], x[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        done()
        del x
        losses.append(loss.detach())
        if (step + 1) % args.log_every == 0 or step == 0:
            recent = torch.stack(losses[-args.log_every :]).mean().item()
            elapsed = time.perf_counter() - t0
            tok_s = (step + 1) * args.batch * args.seq_len / elapsed
            print(f"step {step + 1:5d}  loss {recent:.4f}  {tok_s:,.0f} tokens/s  "
                  f"waiting for data {100 * data_time / elapsed:.1f}% of the time")
    batches.close()
    window = max(1, min(20, args.steps // 5))
    first = torch.stack(losses[:window]).mean().item()
    last = torch.stack(losses[-window:]).mean().item()
    print(f"loss {first:.4f} -> {last:.4f} (mean of the first and last {window} steps); "
          f"ln(vocab) = {math.log(50257):.3f}")
    if args.check and not last < first - 1.0:
        raise SystemExit("the loss did not fall by 1.0")


if __name__ == "__main__":
    main()
