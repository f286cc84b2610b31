#!/usr/bin/env python3
"""A small GPT trained on llm.c / modded-nanogpt token shards, fed by pinring; with
--loader torch, by a PyTorch DataLoader instead, for comparison.

    # shards from the repo's make_shard (documents of uniform random tokens: a throughput workload)
    cargo run --release --example make_shard -- /tmp/gpt/train_000.bin 20000000
    python3 python/examples/train_gpt.py --data '/tmp/gpt/train_*.bin'

    # a learnable synthetic shard (written here with numpy, same format): the loss falls
    # from ~10.8 (ln of the vocabulary) towards ln(4) ~ 1.39
    python3 python/examples/train_gpt.py --synthetic /tmp/gpt-syn --check
    python3 python/examples/train_gpt.py --synthetic /tmp/gpt-syn --loader torch

make_shard's tokens are uniform over the GPT-2 vocabulary (but for the bos token that
starts each document of about 1000 tokens), so nothing in them can be learned beyond their
frequencies: the loss starts at about ln(50257) = 10.82 and stays there. Use them to measure feeding; use --synthetic (each token is the previous one
plus 1, 2, 3 or 4, modulo 1024) to watch a loss fall.

The pinring loop is seed 000's deferred release: the batch is a zero-copy view of the
device slot, read by forward/backward on the current stream, and released fenced on that
stream once the step is enqueued; no host sync.

Distributed (DistributedDataParallel over NCCL, one process per GPU, each rank fed by its
own pinring loader on its own GPU, a disjoint share of every epoch, the same number of
batches on every rank):

    torchrun --nproc_per_node=2 python/examples/train_gpt.py --ddp --synthetic /tmp/gpt-syn \
        --epochs 1 --stop-after 200 --save /tmp/gpt.ckpt --ids-out /tmp/ids-run1.npy
    # the checkpoint (model, optimizer, loader state) resumes on any number of GPUs:
    torchrun --nproc_per_node=1 python/examples/train_gpt.py --ddp --synthetic /tmp/gpt-syn \
        --epochs 1 --resume /tmp/gpt.ckpt --ids-out /tmp/ids-run2.npy --verify /tmp/ids-run1.npy

--verify checks exactly-once across the runs: the sample ids of the earlier run(s) and of
this one are disjoint and together are exactly the windows the epoch delivers (its first
positions, all but fewer than world_size x batch windows of its tail).

Packed documents (--packed): the same GPT trains on modded-nanogpt's packed steps, fed by
pinring.Documents: each step is 1-D `inputs` (int32), `targets` (int64 on the device) and
`cu_seqlens`, and attention is document-masked (a token sees only the earlier tokens of its
own document), built from cu_seqlens on the device: an explicit block-diagonal causal mask
for scaled_dot_product_attention (--attn mask, the default: any torch, small sizes), or
FlexAttention's block mask (--attn flex). Positions restart at every document. With
--reference the same model (same seed, same init) is fed by the faithful copy of
modded-nanogpt's generator (python/tests/modded_reference.py) instead, with its pinned,
non_blocking copies: both print every step's loss, which must match to rounding.

    python3 python/examples/train_gpt.py --packed --synthetic /tmp/gpt-docs --steps 60 \
        --losses-out /tmp/pinring.npy
    python3 python/examples/train_gpt.py --packed --synthetic /tmp/gpt-docs --steps 60 \
        --reference --compare /tmp/pinring.npy

With --bigram both runs add modded-nanogpt's bigram embedding: an nn.Embedding of
--bigram-vocab rows (default 8192, small for a small model; master's is 50304 * 15 // 2)
added to the token embedding, indexed by each step's bigram hash of its inputs -- pinring's
`bigram_inputs` field (Documents(bigram_vocab_size=...), hashed by the decode workers), and
for --reference master's get_bigram_hash of the generator's inputs (the numpy copy in
python/tests/modded_master.py, checked against master's own code there):

    python3 python/examples/train_gpt.py --packed --bigram --synthetic /tmp/gpt-docs --steps 60 \
        --losses-out /tmp/pinring-bigram.npy
    python3 python/examples/train_gpt.py --packed --bigram --synthetic /tmp/gpt-docs --steps 60 \
        --reference --compare /tmp/pinring-bigram.npy

--synthetic with --packed writes four shards of BOS-delimited learnable documents (each a
run of token + 1..4 mod 1024 from a random start, some longer than --max-seq-len), so the
steps cross shard boundaries.

Packed documents, data-parallel (--ddp --packed): each rank feeds the model from its own
loader over a pinring.Mixture of two pinring.Documents sources (--data and --data2, or two
--synthetic corpora; --weights 0.7 0.3), document-masked attention, DDP over NCCL (gloo with
--backend gloo, which runs on cpu: --device cpu). Every step, each rank logs the step, its
loss and the (source, document id) of every document it consumed to --ids-out DIR
(one JSON line per step, a file per rank and run); --stop-after N saves model, optimizer
and the merged loader state (--save) after N steps; --resume goes on from it on any number
of ranks, to the end of the mixture (stop "first": the end of the smaller source's epoch).
python/examples/check_ddp_run.py checks the logs: no document twice, every document of each
source's walk up to the end delivered, equal steps per rank, each source's share within one
document of its weight at every step, and the loss falling across the resume.

    torchrun --nproc_per_node=2 python/examples/train_gpt.py --ddp --packed \
        --synthetic /tmp/gpt-mix --stop-after 300 --save /tmp/mix.pt --ids-out /tmp/ids --run-name 1
    torchrun --nproc_per_node=1 python/examples/train_gpt.py --ddp --packed \
        --synthetic /tmp/gpt-mix --resume /tmp/mix.pt --ids-out /tmp/ids --run-name 2
    python3 python/examples/check_ddp_run.py --ids /tmp/ids --data /tmp/gpt-mix/a/train_*.bin \
        /tmp/gpt-mix/b/train_*.bin --weights 0.7 0.3
"""
import json

import argparse
import glob
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
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


BOS = 50256  # GPT-2's <|endoftext|>, which starts every document


def synthetic_docs(directory, shards=4, tokens_per_shard=400_000, seed=0):
    """Shards of learnable documents: BOS, then a run from a random start token, each token
    the previous one plus one of {1, 2, 3, 4}, mod 1024; lengths geometric (mean 200), a few
    past 1000 (longer than a usual --max-seq-len); a few tokens before the first BOS."""
    os.makedirs(directory, exist_ok=True)
    rng = np.random.default_rng(seed)
    for s in range(shards):
        path = os.path.join(directory, f"train_{s:03d}.bin")
        if os.path.exists(path):
            continue
        parts, n = [rng.integers(0, 1024, int(rng.integers(1, 5)))], 0
        while n < tokens_per_shard:
            length = int(rng.geometric(1 / 200)) + (int(rng.integers(500, 1500)) if rng.random() < 0.03 else 0)
            run = (rng.integers(0, 1024) + np.cumsum(rng.integers(1, 5, length))) % 1024
            parts.append(np.concatenate([[BOS], run]))
            n += length + 1
        write_shard(path, np.concatenate(parts)[:tokens_per_shard])
    print(f"documents: {shards} shards of {tokens_per_shard} tokens in {directory}")
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

    def forward(self, x, attend=None):
        """`attend`: None for causal attention over the whole sequence, else a function of
        (q, k, v) doing the (document-masked) attention."""
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if attend is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = attend(q, k, v)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, seq_len, layers=4, heads=4, d=256, bigram_vocab=None):
        """`bigram_vocab`: None, or the rows of a bigram embedding (modded-nanogpt's), added
        to the token embedding of packed steps and indexed by their bigram hash (initialized
        as the other embeddings, after them: the rest of the model starts as without it)."""
        super().__init__()
        self.tok, self.pos = nn.Embedding(VOCAB, d), nn.Embedding(seq_len, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)
        self.head.weight = self.tok.weight
        self.apply(self._init)
        self.bigram = None
        if bigram_vocab is not None:
            self.bigram = nn.Embedding(bigram_vocab, d)
            self._init(self.bigram)

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx, targets, cu_seqlens=None, attn="mask", packed=False, bigram_inputs=None):
        if packed:
            return self.forward_packed(idx, targets, cu_seqlens, attn=attn, bigram_inputs=bigram_inputs)
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, VOCAB), targets.reshape(-1))

    def forward_packed(self, inputs, targets, cu_seqlens, attn="mask", bigram_inputs=None):
        """One packed step: `inputs` (N,) int, `targets` (N,) int64, `cu_seqlens` (max_docs,)
        int32, padded with N; `bigram_inputs` (N,) int, the step's bigram hash, for a model
        with a bigram embedding. Positions restart at each document; attention stays inside
        it."""
        n = inputs.shape[0]
        idx = torch.arange(n, device=inputs.device)
        cu = cu_seqlens.long()
        doc = torch.searchsorted(cu[1:].contiguous(), idx, right=True)  # each token's document
        pos = idx - cu[doc]
        x = self.tok(inputs.long())[None] + self.pos(pos)[None]
        if self.bigram is not None:
            if bigram_inputs is None:
                raise ValueError("a model with a bigram embedding needs each step's bigram_inputs")
            x = x + self.bigram(bigram_inputs.long())[None]
        attend = document_attention(doc, attn)
        for block in self.blocks:
            x = block(x, attend)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.float().view(-1, VOCAB), targets.reshape(-1))


def document_attention(doc, attn):
    """Causal attention within each document, `doc` being each token's document index."""
    n = doc.shape[0]
    if attn == "flex":
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention

        def same_document_causal(b, h, q, kv):
            return (doc[q] == doc[kv]) & (q >= kv)

        block_mask = create_block_mask(same_document_causal, None, None, n, n, device=doc.device)
        return lambda q, k, v: flex_attention(q, k, v, block_mask=block_mask)
    idx = torch.arange(n, device=doc.device)
    mask = (doc[:, None] == doc[None, :]) & (idx[:, None] >= idx[None, :])
    return lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


# ---------------------------------------------------------------------------------------
# Feeding


def token_windows(args, rank, world):
    return pinring.TokenWindows(
        args.data, seq_len=args.seq_len, dtype="int64", order="shuffled", seed=args.seed,
        rank=rank, world_size=world,
    )


def pinring_batches(args, device, rank, world, state=None, feed=None):
    """(x, done) per step: x is a (B, T + 1) int64 view of the device slot; done() releases
    it fenced on the current stream (stream-side, no host sync). Ends with the loader's
    epochs. `feed` (a dict) receives the loader, and the sample ids of every batch."""
    src = token_windows(args, rank, world)
    if rank == 0:
        print(f"pinring: {src}")
    loader = pinring.Loader(
        src, batch_size=args.batch, device=device, epochs=args.epochs, pop_timeout=60.0,
        drop_last=True, state=state,
    )
    if feed is not None:
        feed["loader"], feed["ids"] = loader, []
    cuda = device.type == "cuda"
    try:
        # One epoch per `for batch in loader`, until the loader's epochs (or forever).
        while loader.epochs is None or loader.epoch < loader.epochs:
            for batch in loader:
                x = torch.from_dlpack(batch)
                if feed is not None:
                    feed["ids"].append(batch.sample_ids)

                def done(batch=batch):
                    # The step is enqueued: reuse of the slot waits for this stream. The
                    # cpu backend has no streams: release() with no fence.
                    batch.release(event=torch.cuda.current_stream() if cuda else None)

                yield x, done
    finally:
        if rank == 0:
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


def parse_schedule(text):
    """"FROM:TOKENS:MAX_SEQ_LEN,..." as [(from_step, tokens_per_batch, max_seq_len), ...]."""
    return [tuple(int(v) for v in entry.split(":")) for entry in text.split(",") if entry.strip()]


def pinring_packed(args, device):
    """(inputs, targets, cu_seqlens, bigram_inputs, max_seqlen, done) per step from
    pinring.Documents: views of the device slot (targets widened to int64 on the device;
    bigram_inputs, hashed by the decode workers, with --bigram, else None); done() releases
    the step fenced on the current stream."""
    bigram = {"bigram_vocab_size": args.bigram_vocab} if args.bigram else {}
    src = pinring.Documents(args.data, tokens_per_batch=args.tokens_per_batch, max_seq_len=args.max_seq_len,
                            schedule=args.schedule, **bigram)
    print(f"pinring: {src}")
    # One epoch: the walk ends where the data does, as modded-nanogpt's generator's does
    # (so that --compare sees the same steps from both).
    loader = pinring.Loader(src, device=device, pop_timeout=60.0, epochs=1)
    cuda = device.type == "cuda"
    try:
        while True:
            batch = loader.pop()
            if batch is None:
                return
            inputs = torch.from_dlpack(batch["inputs"])  # int32, zero copy
            targets = torch.from_dlpack(batch["targets"]).long()  # int64, on the device
            cu = torch.from_dlpack(batch["cu_seqlens"])
            bigram_inputs = torch.from_dlpack(batch["bigram_inputs"]) if args.bigram else None

            def done(batch=batch):
                batch.release(event=torch.cuda.current_stream() if cuda else None)

            yield inputs, targets, cu, bigram_inputs, batch.max_seqlen, done
    finally:
        print(f"pinring stats: {loader.stats()['verdict']}")
        loader.close()


def reference_packed(args, device):
    """The same steps from the faithful copy of modded-nanogpt's generator, copied to the
    device as modded-nanogpt does: pinned host tensors, non_blocking copies; with --bigram,
    each step's bigram inputs by master's get_bigram_hash of its inputs (int32)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    import modded_master
    import modded_reference

    cuda = device.type == "cuda"
    for inputs, targets, cu in modded_reference.steps(
        args.data, tokens_per_batch=args.tokens_per_batch, max_seq_len=args.max_seq_len, schedule=args.schedule
    ):
        def to(a):
            t = torch.from_numpy(a)
            return t.pin_memory().to(device, non_blocking=True) if cuda else t

        bigram_inputs = to(modded_master.get_bigram_hash(inputs, args.bigram_vocab)) if args.bigram else None
        yield to(inputs), to(targets), to(cu), bigram_inputs, int(np.diff(cu).max()), (lambda: None)


def two_corpora(args):
    """The mixture's two sources: --data and --data2, or two --synthetic corpora in
    DIR/a (the larger) and DIR/b, of learnable documents."""
    if args.synthetic:
        a = synthetic_docs(os.path.join(args.synthetic, "a"), shards=args.synthetic_shards,
                           tokens_per_shard=args.synthetic_tokens_per_shard, seed=1)
        b = synthetic_docs(os.path.join(args.synthetic, "b"), shards=max(1, args.synthetic_shards // 2),
                           tokens_per_shard=args.synthetic_tokens_per_shard // 2, seed=2)
        return [a, b]
    if not args.data2:
        raise SystemExit("--ddp --packed mixes two sources: give --data and --data2 (or --synthetic DIR)")
    return [args.data, args.data2]


def packed_mixture(args, corpora, rank, world):
    """The rank's pinring.Mixture of two Documents sources."""
    sources = [pinring.Documents(p, tokens_per_batch=args.tokens_per_batch, max_seq_len=args.max_seq_len,
                                 schedule=args.schedule) for p in corpora]
    return pinring.Mixture(sources, weights=args.weights, seed=args.mix_seed, rank=rank, world_size=world,
                           stop=args.stop)


def optimizer(model, args):
    return torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, betas=(0.9, 0.95))


def resume(args, model, opt, device, rank, world, progress):
    """With --resume, loads the model and the optimizer saved there and says so on rank 0
    (`progress(state)` tells how far the loader got); returns the loader state and the step
    saved with them, or (None, 0) without --resume."""
    if not args.resume:
        return None, 0
    ckpt = torch.load(args.resume, map_location=device, weights_only=False)
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["opt"])
    state, start_step = ckpt["loader"], ckpt["step"]
    if rank == 0:
        print(f"resumed from {args.resume}: step {start_step}, {progress(state)} by {state['world_size']} rank(s); "
              f"now {world} rank(s)")
    return state, start_step


def save(args, model, opt, loader_state, step):
    """With --save, saves the model, the optimizer, the (merged) loader state and the step
    there, for --resume, and says so."""
    if args.save:
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "loader": loader_state, "step": step},
                   args.save)
        print(f"saved {args.save}")


def train_packed_ddp(args, device):
    """Data-parallel training on a mixture of packed documents: one loader per rank, the
    documents of every step logged per rank, a merged loader state saved and resumed."""
    backend = args.backend or ("nccl" if device.type == "cuda" else "gloo")
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    if device.type == "cuda":
        # Ranks share the visible GPUs round-robin: two ranks on one GPU (with gloo) run the
        # same code as one rank per GPU (with NCCL).
        local = int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count()
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
    elif args.threads:
        torch.set_num_threads(args.threads)
    corpora = two_corpora(args) if rank == 0 else None
    box = [corpora]
    dist.broadcast_object_list(box, src=0)  # rank 0 writes --synthetic; the others wait for it
    corpora = box[0]
    args.schedule = parse_schedule(args.schedule or "")
    longest = max([args.max_seq_len] + [m for _, _, m in args.schedule])
    torch.manual_seed(args.seed)
    model = GPT(longest, layers=args.layers, d=args.d_model).to(device)
    opt = optimizer(model, args)
    state, start_step = resume(args, model, opt, device, rank, world,
                               lambda state: f"{state['consumed']} documents consumed")
    net = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None)
    mix = packed_mixture(args, corpora, rank, world)
    if rank == 0:
        print(f"pinring: {mix} on {world} rank(s), {backend}; {args.tokens_per_batch} tokens a rank a step")
    loader = pinring.Loader(mix, device=device if device.type == "cuda" else "cpu", pop_timeout=120.0, state=state)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    cuda = device.type == "cuda"
    log = None
    if args.ids_out:
        os.makedirs(args.ids_out, exist_ok=True)
        log = open(os.path.join(args.ids_out, f"run{args.run_name}-rank{rank}.jsonl"), "w")
    steps, losses, t0 = 0, [], time.perf_counter()
    while args.stop_after is None or steps < args.stop_after:
        batch = loader.pop()
        if batch is None:  # the mixture's stop rule ended the run (on every rank alike)
            break
        step = batch.step
        for g in opt.param_groups:
            g["lr"] = args.lr * min(1.0, (step + 1) / 30)
        inputs = torch.from_dlpack(batch["inputs"])
        targets = torch.from_dlpack(batch["targets"]).long()
        cu = torch.from_dlpack(batch["cu_seqlens"])
        with autocast:
            loss = packed_loss(net, inputs, targets, cu, args.attn)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        batch.release(event=torch.cuda.current_stream() if cuda else None)
        del inputs, targets, cu
        steps += 1
        value = loss.item()
        losses.append(value)
        if log is not None:
            log.write(json.dumps({"run": args.run_name, "rank": rank, "world": world, "step": step, "loss": value,
                                  "sources": batch.sources.tolist(), "ids": batch.doc_ids.tolist()}) + "\n")
        if rank == 0 and (steps % args.log_every == 0 or steps == 1):
            elapsed = time.perf_counter() - t0
            print(f"step {step:5d}  loss {np.mean(losses[-args.log_every:]):.4f}  "
                  f"{steps * args.tokens_per_batch * world / elapsed:,.0f} tokens/s")
    wall = time.perf_counter() - t0
    loader_state = loader.state_dict()
    stats = loader.stats()
    loader.close()
    if log is not None:
        log.close()
    reports = [None] * world
    dist.all_gather_object(reports, (rank, steps, loader_state))
    ok = True
    if rank == 0:
        counts = [r[1] for r in reports]
        ok = len(set(counts)) == 1
        merged = pinring.merge_states([r[2] for r in reports])  # refuses ranks not in step
        window = max(1, min(20, len(losses) // 5))
        print(f"per-rank steps: {counts} ({'equal' if ok else 'UNEQUAL'}); loader state: step {merged['step']}, "
              f"{merged['consumed']} documents consumed; each source's cursor (epoch, shard, doc): "
              f"{[(s['epoch'], s['shard'], s['doc']) for s in merged['sources']]}")
        print(f"sources: {[(s['samples'], round(s['share'], 3)) for s in stats['sources']]} decoded on rank 0")
        if losses:
            print(f"loss {np.mean(losses[:window]):.4f} -> {np.mean(losses[-window:]):.4f} (rank 0, mean of the "
                  f"first and last {window} steps of this run); {steps} steps in {wall:.1f} s")
        save(args, model, opt, merged, start_step + steps)
    dist.destroy_process_group()
    if not ok:
        raise SystemExit("failed: the ranks ran unequal steps")


def packed_loss(net, inputs, targets, cu, attn):
    """The packed forward through DDP's wrapper (so that its gradient hooks run)."""
    return net(inputs, targets, cu, attn=attn, packed=True)


def train_packed(args, device):
    """The GPT on packed documents, every step's loss printed (the --reference run prints
    the same steps' losses)."""
    if args.synthetic:
        args.data = synthetic_docs(args.synthetic)
    args.schedule = parse_schedule(args.schedule or "")
    if not args.nondeterministic:
        # The same batches must give the same losses, run after run: deterministic kernels
        # (cuBLAS's fixed workspace, the math attention backend, deterministic embedding
        # backward), so that --reference's losses match pinring's to rounding.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        if device.type == "cuda":
            for backend in ("enable_flash_sdp", "enable_mem_efficient_sdp", "enable_cudnn_sdp"):
                if hasattr(torch.backends.cuda, backend):  # the math backend remains
                    getattr(torch.backends.cuda, backend)(False)
    longest = max([args.max_seq_len] + [m for _, _, m in args.schedule])
    torch.manual_seed(args.seed)
    model = GPT(longest, bigram_vocab=args.bigram_vocab if args.bigram else None).to(device)
    opt = optimizer(model, args)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    feed = "modded-nanogpt's generator (reference)" if args.reference else "pinring.Documents"
    steps = (reference_packed if args.reference else pinring_packed)(args, device)
    print(f"{feed} feeding {device}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, "
          f"{args.tokens_per_batch} tokens a step, documents cut at {args.max_seq_len}, schedule {args.schedule}, "
          f"attention {args.attn}, {args.steps} steps"
          f"{f', a bigram embedding of {args.bigram_vocab} rows' if args.bigram else ''}")
    losses, t0 = [], time.perf_counter()
    for step in range(args.steps):
        for g in opt.param_groups:
            g["lr"] = args.lr * min(1.0, (step + 1) / 30)
        got = next(steps, None)
        if got is None:
            print(f"the data ended after {step} steps")
            break
        inputs, targets, cu, bigram_inputs, max_seqlen, done = got
        n = inputs.shape[0]
        with autocast:
            loss = model.forward_packed(inputs, targets, cu, attn=args.attn, bigram_inputs=bigram_inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        done()
        del inputs, targets, cu, bigram_inputs
        losses.append(loss.item())
        print(f"packed step {step:5d}  loss {losses[-1]:.6f}  tokens {n}  max_seqlen {max_seqlen}")
    steps.close()
    wall = time.perf_counter() - t0
    losses = np.array(losses)
    window = max(1, min(20, len(losses) // 5))
    first, last = losses[:window].mean(), losses[-window:].mean()
    print(f"loss {first:.4f} -> {last:.4f} (mean of the first and last {window} steps); "
          f"{len(losses)} steps in {wall:.1f} s ({feed})")
    ok = not (args.check and not last < first - 1.0)
    if args.losses_out:
        np.save(args.losses_out, losses)
    if args.compare:
        other = np.load(args.compare)
        n = min(len(other), len(losses))
        diff = np.abs(other[:n] - losses[:n])
        same = n == len(losses) == len(other) and bool(np.all(diff <= 1e-3 * np.maximum(1.0, np.abs(other[:n]))))
        print(f"compared with {args.compare}: {n} steps, {int((diff == 0).sum())} identical, "
              f"largest difference {diff.max() if n else 0:.3g}: {'MATCH' if same else 'DIFFER'}")
        ok = ok and same
    if not ok:
        raise SystemExit("failed: the loss did not fall by 1.0, or the losses differ from --compare's")
    if args.check:
        print(check_passed(first, last))


# ---------------------------------------------------------------------------------------


def epoch_order(args):
    """Epoch 0's order of all windows: one rank, on the cpu backend (no GPU memory)."""
    src = token_windows(args, 0, 1)
    with pinring.Loader(src, batch_size=4096, device="cpu", epochs=1) as loader:
        return np.concatenate([b.sample_ids for b in loader])


def verify(args, before, ids, state, world):
    """Exactly-once across the runs: `before` (ids of the earlier runs), then `ids` (this
    run's, resumed from `state` on `world` ranks)."""
    every = np.concatenate([before, ids])
    order = epoch_order(args)
    n, c = len(order), int(state["consumed"]) if state else 0
    step = world * args.batch  # drop_last: whole batches on every rank
    m = c + (n - c) // step * step
    want = np.sort(order[:m])
    dup = len(every) - len(np.unique(every))
    ok = dup == 0 and np.array_equal(np.sort(every), want)
    print(f"exactly-once: {len(before)} ids before + {len(ids)} now = {len(every)}; "
          f"{dup} delivered twice; the epoch's first {m} positions of {n} "
          f"({n - m} dropped from its tail, < {step}): {'OK' if ok else 'FAILED'}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    data = ap.add_mutually_exclusive_group(required=True)
    data.add_argument("--data", help="token shards: a path or a glob")
    data.add_argument("--synthetic", metavar="DIR", help="write (once) and train on a learnable shard in DIR")
    ap.add_argument("--data2", help="--ddp --packed: the mixture's second source (token shards: a path or a glob)")
    ap.add_argument("--synthetic-tokens", type=int, default=10_000_000, help="tokens in the --synthetic shard")
    ap.add_argument("--loader", choices=["pinring", "torch"], default="pinring")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq-len", type=int, default=256)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--check", action="store_true", help="exit 1 unless the loss fell by at least 1.0")
    ap.add_argument("--ddp", action="store_true", help="DistributedDataParallel under torchrun (NCCL on cuda, gloo on cpu)")
    ap.add_argument("--epochs", type=int, default=None, help="stop after this many epochs (pinring; default: --steps)")
    ap.add_argument("--stop-after", type=int, default=None, metavar="N", help="stop after N steps of this run")
    ap.add_argument("--save", metavar="PATH", help="at the end, save model, optimizer and loader state")
    ap.add_argument("--resume", metavar="PATH", help="start from a --save checkpoint (any number of ranks)")
    ap.add_argument("--ids-out", metavar="FILE", help="write every sample id this run consumed (all ranks), .npy")
    ap.add_argument("--verify", metavar="FILE", nargs="+", help="check exactly-once against earlier runs' --ids-out")
    packed = ap.add_argument_group("packed documents (--packed)")
    packed.add_argument("--packed", action="store_true", help="train on packed documents (pinring.Documents) with document-masked attention")
    packed.add_argument("--reference", action="store_true", help="feed the same model from modded-nanogpt's generator (the faithful copy) instead")
    packed.add_argument("--tokens-per-batch", type=int, default=1024, help="tokens of inputs per step (tokens_per_batch)")
    packed.add_argument("--max-seq-len", type=int, default=256, help="documents are cut at this length")
    packed.add_argument("--schedule", default="", metavar="FROM:TOKENS:MAX_SEQ_LEN,...", help="step size changes")
    packed.add_argument("--bigram", action="store_true",
                        help="add modded-nanogpt's bigram embedding, fed by each step's bigram_inputs (with --reference: "
                             "master's get_bigram_hash)")
    packed.add_argument("--bigram-vocab", type=int, default=8192, metavar="V",
                        help="--bigram: the embedding's rows, the hash's bigram_vocab_size (M = V - 1)")
    packed.add_argument("--attn", choices=["mask", "flex"], default="mask",
                        help="mask: a block-diagonal causal mask for scaled_dot_product_attention; flex: FlexAttention")
    packed.add_argument("--nondeterministic", action="store_true",
                        help="allow the fastest (non-deterministic) kernels: losses then differ run to run")
    packed.add_argument("--losses-out", metavar="FILE", help="save every step's loss (.npy)")
    packed.add_argument("--compare", metavar="FILE", help="exit 1 unless every step's loss matches this --losses-out to rounding")
    mixed = ap.add_argument_group("packed documents, data-parallel (--ddp --packed): a pinring.Mixture of two sources")
    mixed.add_argument("--weights", type=float, nargs=2, default=[0.7, 0.3], metavar="W", help="the two sources' weights")
    mixed.add_argument("--mix-seed", type=int, default=0, help="the Mixture's seed")
    mixed.add_argument("--stop", choices=["never", "first", "all"], default="first",
                       help="when the mixture ends (first: at the end of the smaller source's epoch)")
    mixed.add_argument("--backend", choices=["nccl", "gloo"], help="the process group's backend (default: nccl on cuda, gloo on cpu)")
    mixed.add_argument("--run-name", default="1", help="names this run's --ids-out files")
    mixed.add_argument("--layers", type=int, default=4, help="transformer blocks")
    mixed.add_argument("--d-model", type=int, default=256, help="the model's width")
    mixed.add_argument("--threads", type=int, default=None, help="torch threads per process on cpu")
    mixed.add_argument("--synthetic-shards", type=int, default=4, help="--synthetic: shards of the larger source (the other: half)")
    mixed.add_argument("--synthetic-tokens-per-shard", type=int, default=400_000, help="--synthetic: tokens a shard (the other source: half)")
    args = ap.parse_args()
    if args.packed and not args.nondeterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")  # before cuBLAS starts
    if args.bigram and not args.packed:
        raise SystemExit("--bigram goes with --packed")
    if args.bigram and not 2 <= args.bigram_vocab <= 2**31 - 1:
        raise SystemExit(f"--bigram-vocab {args.bigram_vocab}: the hash needs 2 <= V <= 2**31 - 1 (M = V - 1 >= 1, int32)")
    if args.packed and args.ddp:
        if args.loader != "pinring" or args.reference:
            raise SystemExit("--ddp --packed runs with pinring")
        if args.bigram:
            raise SystemExit("--bigram runs with --packed on one process (--ddp --packed feeds a Mixture, which "
                             "takes no bigram_vocab_size)")
        return train_packed_ddp(args, torch.device(args.device))
    if args.packed:
        if args.loader != "pinring":
            raise SystemExit("--packed runs with pinring or --reference")
        device = torch.device(args.device)
        if device.type == "cuda":
            if device.index is None:  # "cuda": the current device, as torch means it
                device = torch.device("cuda", torch.cuda.current_device())
            torch.cuda.set_device(device)
        return train_packed(args, device)
    if args.reference or args.compare or args.losses_out:
        raise SystemExit("--reference, --losses-out and --compare go with --packed")
    if args.synthetic:
        args.data = synthetic(args.synthetic, args.synthetic_tokens)

    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    device = torch.device(args.device)
    if device.type == "cuda":
        device = torch.device("cuda", local if device.index is None else device.index)
        torch.cuda.set_device(device)
    if args.ddp:
        if args.loader != "pinring":
            raise SystemExit("--ddp runs with --loader pinring")
        # rank / world_size are the global ones: the same code runs on one machine or many.
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
        rank, world = dist.get_rank(), dist.get_world_size()
    elif any(a is not None for a in (args.save, args.resume, args.verify)):
        raise SystemExit("--save, --resume and --verify go with --ddp (even on one process)")
    torch.manual_seed(args.seed)

    model = GPT(args.seq_len).to(device)
    opt = optimizer(model, args)
    state, start_step = resume(args, model, opt, device, rank, world,
                               lambda state: f"loader at epoch {state['epoch']}, {state['consumed']} windows consumed")
    net = torch.nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None) if args.ddp else model
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
    feed = {}
    if args.loader == "pinring":
        if args.epochs is None and args.stop_after is None:
            args.stop_after = args.steps
        batches = pinring_batches(args, device, rank, world, state=state, feed=feed)
    else:
        batches = torch_batches(args, device, rank, world)
    steps = args.stop_after if args.stop_after is not None else (args.steps if args.epochs is None else None)
    if rank == 0:
        print(f"{args.loader} feeding {device} on {world} rank(s): {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, "
              f"batch {args.batch} x {args.seq_len + 1} tokens per rank, "
              f"{'until the epochs end' if steps is None else f'{steps} steps'}")

    losses, data_time, t0 = [], 0.0, time.perf_counter()
    step = 0
    while steps is None or step < steps:
        for g in opt.param_groups:  # linear warm-up, then constant
            g["lr"] = args.lr * min(1.0, (start_step + step + 1) / 30)
        t = time.perf_counter()
        got = next(batches, None)
        if got is None:
            break
        x, done = got
        step += 1
        data_time += time.perf_counter() - t
        with autocast:
            loss = net(x[:, :-1], x[:, 1:])
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        done()
        del x
        losses.append(loss.detach())
        if rank == 0 and (step % args.log_every == 0 or step == 1):
            recent = torch.stack(losses[-args.log_every :]).mean().item()
            elapsed = time.perf_counter() - t0
            tok_s = step * args.batch * args.seq_len * world / elapsed
            print(f"step {start_step + step:5d}  loss {recent:.4f}  {tok_s:,.0f} tokens/s  "
                  f"waiting for data {100 * data_time / elapsed:.1f}% of the time")
    wall = time.perf_counter() - t0
    loader_state = feed["loader"].state_dict() if feed else None
    batches.close()
    window = max(1, min(20, len(losses) // 5))
    first = torch.stack(losses[:window]).mean().item()
    last = torch.stack(losses[-window:]).mean().item()
    if rank == 0:
        print(f"loss {first:.4f} -> {last:.4f} (mean of the first and last {window} steps of this run); "
              f"ln(vocab) = {math.log(50257):.3f}; {step} steps in {wall:.1f} s")
    ok = not (args.check and not last < first - 1.0)
    if args.ddp:
        ok = finish_distributed(args, model, opt, start_step + step, feed, loader_state, state, rank, world) and ok
        dist.destroy_process_group()
    if not ok:
        raise SystemExit("failed: see above (the loss did not fall by 1.0, or exactly-once did not hold)")
    if args.check and rank == 0:
        print(check_passed(first, last))


def check_passed(first, last):
    """The line --check prints when it passed."""
    return f"check passed: the loss fell by {first - last:.3f} ({first:.4f} -> {last:.4f}; --check needs 1.0)"


def finish_distributed(args, model, opt, step, feed, loader_state, resumed_from, rank, world):
    """Every rank's batch count and ids to rank 0; the merged loader state (refused if the
    ranks are not in step) saved with the model; exactly-once checked."""
    ids = np.concatenate(feed["ids"]) if feed["ids"] else np.zeros(0, np.uint64)
    report = (rank, len(feed["ids"]), ids, loader_state)
    reports = [None] * world
    dist.all_gather_object(reports, report)
    if rank != 0:
        return True
    counts = [r[1] for r in reports]
    every = np.concatenate([r[2] for r in reports])
    disjoint = len(np.unique(every)) == len(every)
    print(f"per-rank batches: {counts} ({'equal' if len(set(counts)) == 1 else 'UNEQUAL'}); "
          f"{len(every)} sample ids, ranks disjoint: {disjoint}")
    merged = pinring.merge_states([r[3] for r in reports])
    print(f"loader state: epoch {merged['epoch']}, {merged['consumed']} windows consumed by all ranks")
    save(args, model, opt, merged, step)
    if args.ids_out:
        np.save(args.ids_out, every)
    ok = disjoint and len(set(counts)) == 1
    if args.verify:
        before = np.concatenate([np.load(f) for f in args.verify])
        ok = verify(args, before, every, resumed_from, world) and ok
    return ok


if __name__ == "__main__":
    main()
