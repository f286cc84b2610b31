"""A faithful, torch-free copy of modded-nanogpt's training-data generator.

From KellerJordan/modded-nanogpt, train_gpt.py (snapshot of 2026-08-01): ``_load_data_shard``,
``BOS_ID``, ``TRAIN_MAX_NUM_DOCS``, ``class Shard`` and ``distributed_data_generator(...,
align_to_bos=True)``, with torch tensors replaced by numpy arrays, line for line where the
logic lives. The parity tests run it beside ``pinring.Documents``: with ``order="sequential"``
rank ``r`` of ``W`` at step ``k`` must yield the same inputs, targets and cu_seqlens.

What differs from the original, none of it in what a step holds:

- ``rank`` and ``world_size`` are arguments (the original reads ``torch.distributed``).
- The BOS index is built in full before a shard is used. The original starts with an index
  of the shard's first 6,000,000 tokens and swaps in the full one when a background scan
  finishes; a step that reaches past those tokens before the scan ends sees a different
  (shorter) walk there, which depends on thread timing. Its full-index walk is the one
  meant, and the one copied.
- Shards are loaded synchronously (the original preloads the next one on a thread).
- The data ends cleanly: after the last shard the generator returns. (The original raises:
  ``next(file_iter)`` on an exhausted iterator inside a generator becomes a RuntimeError
  with a single file, and calling the ``None`` getter a TypeError after the last one.)
- ``bos_id`` is an argument (the original's ``BOS_ID`` is 50256), and the bigram-hash
  inputs, which pinring does not produce, are left out of what is yielded.
- ``token_dtype`` reads LLaMA-3 shards (magic 20240801, uint32) too, for pinring's
  ``bos=128000`` path; the original reads uint16 shards only.
"""

import glob
import math
from pathlib import Path

import numpy as np

BOS_ID = 50256
TRAIN_MAX_NUM_DOCS = {16384: 64, 32768: 96, 49152: 128}

_FORMATS = {20240520: (1, np.uint16), 20240801: (7, np.uint32)}


def next_multiple_of_n(v, *, n):
    return math.ceil(v / n) * n


def _load_data_shard(file: Path):
    header = np.fromfile(str(file), dtype="<i4", count=256)  # header is 256 int32
    assert int(header[0]) in _FORMATS, "magic number mismatch in the data .bin file"
    version, dtype = _FORMATS[int(header[0])]
    assert header[1] == version, "unsupported version"
    num_tokens = int(header[2])  # number of tokens (claimed)
    tokens = np.fromfile(str(file), dtype=np.dtype(dtype).newbyteorder("<"), count=num_tokens, offset=256 * 4)
    assert tokens.size == num_tokens, "number of tokens read does not match header"
    return tokens


class Shard:
    def __init__(self, tokens, world_size: int = 1, bos_id: int = BOS_ID):
        self.tokens = tokens
        self.size = tokens.size
        self.world_size = world_size
        self.i = 0
        self.bos_idx = np.nonzero(tokens == bos_id)[0].astype(np.int64)

    def next_batch(self, num_tokens_local: int, max_seq_len: int):
        n = len(self.bos_idx)
        starts = [[] for _ in range(self.world_size)]
        ends = [[] for _ in range(self.world_size)]

        idx = self.i
        for r in range(self.world_size):
            cur_len = 0
            while cur_len <= num_tokens_local:
                if idx >= n:
                    raise StopIteration("Insufficient BOS ahead; hit tail of shard.")
                cur = int(self.bos_idx[idx])
                starts[r].append(cur)
                idx += 1
                end = min(int(self.bos_idx[idx]) if idx < n else self.size,
                          cur + max_seq_len,
                          cur + num_tokens_local - cur_len + 1)
                ends[r].append(end)
                cur_len += end - cur

            assert cur_len == num_tokens_local + 1
        self.i = idx
        return starts, ends


def distributed_data_generator(filename_pattern: str, num_tokens: int, max_seq_len: int,
                               grad_accum_steps: int = 1, align_to_bos: bool = True, *,
                               rank: int = 0, world_size: int = 1, bos_id: int = BOS_ID):
    """Yields (inputs int32, targets int64, cu_seqlens int32) per step; ``.send((num_tokens,
    max_seq_len, grad_accum_steps))`` changes the next step's sizes, as in the original."""
    assert align_to_bos, "only the BOS-aligned walk is copied"
    assert num_tokens % (world_size * grad_accum_steps) == 0, "Batch size must be divisible by world size"
    num_tokens = num_tokens // grad_accum_steps

    files = [Path(file) for file in sorted(glob.glob(filename_pattern))]
    if not files:
        raise FileNotFoundError(f"No files found for pattern: {filename_pattern}")

    file_iter = iter(files)
    tokens = _load_data_shard(next(file_iter))
    shard = Shard(tokens, world_size, bos_id)

    while True:
        num_tokens_local = num_tokens // world_size
        max_num_docs = TRAIN_MAX_NUM_DOCS.get(num_tokens_local, next_multiple_of_n(num_tokens_local // 300, n=128))

        try:
            seq_starts, seq_ends = shard.next_batch(num_tokens_local, max_seq_len)
            start_idxs = np.array(seq_starts[rank], dtype=np.int64)
            end_idxs = np.array(seq_ends[rank], dtype=np.int64)
        except StopIteration:
            # This shard is exhausted, load the next one in the next loop iteration.
            nxt = next(file_iter, None)
            if nxt is None:
                return
            shard = Shard(_load_data_shard(nxt), world_size, bos_id)
            tokens = shard.tokens
            continue

        buf = np.concatenate([tokens[i:j] for i, j in zip(start_idxs, end_idxs)])
        _inputs = buf[:-1]
        _targets = buf[1:]
        end_idxs[-1] -= 1  # last document was too long to account for _targets offset
        cum_lengths = (end_idxs - start_idxs).cumsum(0)

        _cum_lengths = np.full((max_num_docs,), num_tokens_local, dtype=np.int64)
        _cum_lengths[0] = 0
        _cum_lengths[1:len(cum_lengths) + 1] = cum_lengths

        new_params = yield (
            _inputs.astype(np.int32),
            _targets.astype(np.int64),
            _cum_lengths.astype(np.int32),
        )

        if new_params is not None:
            new_num_tokens, new_max_seq_len, new_grad_accum_steps = new_params
            assert new_num_tokens % (world_size * new_grad_accum_steps) == 0, "Num tokens must be divisible by world size"
            num_tokens = new_num_tokens // new_grad_accum_steps
            max_seq_len = new_max_seq_len


def steps(pattern, *, tokens_per_batch, max_seq_len, rank=0, world_size=1, bos_id=BOS_ID,
          schedule=None, limit=None):
    """The generator driven the way modded-nanogpt's training loop drives it: step 0 by
    ``send(None)``, step ``k`` by ``send(args)`` where ``args`` are the schedule's sizes
    from step ``k`` on (``(from_step, tokens_per_batch, max_seq_len)`` entries, tokens per
    rank as pinring counts them) when they change at ``k``, else ``None``. Yields
    ``(inputs, targets, cu_seqlens)`` for ``rank``, at most ``limit`` steps."""
    changes = {}
    for from_step, tpb, msl in schedule or []:
        changes[from_step] = (tpb * world_size, msl, 1)
    num_tokens, max_len, _ = changes.pop(0, (tokens_per_batch * world_size, max_seq_len, 1))
    gen = distributed_data_generator(pattern, num_tokens, max_len,
                                     rank=rank, world_size=world_size, bos_id=bos_id)
    k = 0
    while limit is None or k < limit:
        try:
            out = gen.send(changes.get(k) if k > 0 else None)
        except StopIteration:
            return
        yield out
        k += 1
