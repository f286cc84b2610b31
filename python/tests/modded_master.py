"""A faithful, torch-free copy of modded-nanogpt's data generator at master ``f411b3d``
(``train_gpt.py`` L1697-1875): ``get_bigram_hash`` and ``distributed_data_generator`` in
both of its modes, yielding all five outputs, with numpy arrays for torch tensors, line for
line where the logic lives (``_load_data_shard``, ``Shard`` and the ``max_num_docs`` rule are
``modded_reference.py``'s copies).
``test_speedrun.py`` checks it against master's own code (``modded_master_code.py``) and
runs it beside ``pinring.Documents`` and ``pinring.modded.distributed_data_generator``.

What differs from the original, none of it in what a step holds:

- ``rank``, ``world_size`` and ``bigram_vocab_size`` are arguments (the original reads
  ``torch.distributed`` and ``args``).
- Each shard's BOS index is built in full before it is used (the original starts with the
  first 6,000,000 tokens' and swaps in the full one when a thread finishes; the test
  shards are shorter than that, where the two agree), and shards load synchronously.
- After the last shard the generator returns (the original raises).
"""

import glob
from pathlib import Path

import numpy as np

# The parts modded_reference.py already copies, line for line: the shard reader (u16 shards
# here), the BOS index and its walk, and the max_num_docs table.
from modded_reference import BOS_ID, TRAIN_MAX_NUM_DOCS, Shard, _load_data_shard, next_multiple_of_n

BIGRAM_VOCAB_SIZE = 50304 * 15 // 2


def get_bigram_hash(x, bigram_vocab_size=BIGRAM_VOCAB_SIZE):
    rand_int_1 = 36313
    rand_int_2 = 27191
    mod = bigram_vocab_size - 1
    x = x.astype(np.int32)
    out = np.empty_like(x)
    np.copyto(out, x)
    out[0] = mod
    # numpy, as torch on int32: the products wrap, % takes the divisor's sign.
    out[1:] = np.bitwise_xor(np.int32(rand_int_1) * out[1:], np.int32(rand_int_2) * out[:-1]) % np.int32(mod)
    return out


def distributed_data_generator(filename_pattern, num_tokens, max_seq_len, grad_accum_steps=1,
                               align_to_bos=True, *, rank=0, world_size=1,
                               bigram_vocab_size=BIGRAM_VOCAB_SIZE, max_num_docs_rule=None):
    """Yields ``(inputs int32, targets int64, cu_seqlens int32, bigram_inputs int32,
    bigram_cpu int32)`` per send; ``.send((num_tokens, max_seq_len, grad_accum_steps))``
    changes the sizes of the step it returns, as in the original. ``max_num_docs_rule``:
    a function of the tokens per rank in place of master's (the medium track's formula)."""
    assert num_tokens % (world_size * grad_accum_steps) == 0, "Batch size must be divisible by world size"
    num_tokens = num_tokens // grad_accum_steps

    files = [Path(file) for file in sorted(glob.glob(filename_pattern))]
    if not files:
        raise FileNotFoundError(f"No files found for pattern: {filename_pattern}")

    file_iter = iter(files)
    tokens = _load_data_shard(next(file_iter))
    if align_to_bos:
        shard = Shard(tokens, world_size, BOS_ID)
    else:
        pos = 0

    while True:
        num_tokens_local = num_tokens // world_size
        if max_num_docs_rule is None:
            max_num_docs = TRAIN_MAX_NUM_DOCS.get(num_tokens_local, next_multiple_of_n(num_tokens_local // 300, n=128))
        else:
            max_num_docs = max_num_docs_rule(num_tokens_local)

        if align_to_bos:
            try:
                seq_starts, seq_ends = shard.next_batch(num_tokens_local, max_seq_len)
                start_idxs = np.array(seq_starts[rank], dtype=np.int64)
                end_idxs = np.array(seq_ends[rank], dtype=np.int64)
            except StopIteration:
                nxt = next(file_iter, None)
                if nxt is None:
                    return
                shard = Shard(_load_data_shard(nxt), world_size, BOS_ID)
                tokens = shard.tokens
                continue

            buf = np.concatenate([tokens[i:j] for i, j in zip(start_idxs, end_idxs)])
            _inputs = buf[:-1]
            _targets = buf[1:]
            end_idxs[-1] -= 1
            cum_lengths = (end_idxs - start_idxs).cumsum(0)
        else:
            if pos + num_tokens + 1 >= len(tokens):
                nxt = next(file_iter, None)
                if nxt is None:
                    return
                tokens, pos = _load_data_shard(nxt), 0

            pos_local = pos + rank * num_tokens_local
            buf = tokens[pos_local: pos_local + num_tokens_local + 1]
            _inputs = buf[:-1].reshape(num_tokens_local)
            _targets = buf[1:].reshape(num_tokens_local)

            cum_lengths = np.nonzero(_inputs == BOS_ID)[0]
            pos += num_tokens

        _cum_lengths = np.full((max_num_docs,), num_tokens_local, dtype=np.int64)
        _cum_lengths[0] = 0
        _cum_lengths[1:len(cum_lengths) + 1] = cum_lengths

        _inputs = _inputs.astype(np.int32)
        _targets = _targets.astype(np.int64)
        _cum_lengths = _cum_lengths.astype(np.int32)
        _bigram_inputs = get_bigram_hash(_inputs, bigram_vocab_size)

        new_params = yield (_inputs, _targets, _cum_lengths, _bigram_inputs, _bigram_inputs)

        if new_params is not None:
            new_num_tokens, new_max_seq_len, new_grad_accum_steps = new_params
            assert new_num_tokens % (world_size * new_grad_accum_steps) == 0, "Num tokens must be divisible by world size"
            num_tokens = new_num_tokens // new_grad_accum_steps
            max_seq_len = new_max_seq_len


def capped(cu, n, cap):
    """The ANVIL cap on master's ``cu_seqlens`` (``cu``, padded with ``n``): every segment
    longer than ``cap`` split from its start into pieces of ``cap``; padded to its length."""
    entries = list(cu)
    while len(entries) > 1 and entries[-1] == n:
        entries.pop()
    out = []
    for i, a in enumerate(entries):
        out.append(int(a))
        b = int(entries[i + 1]) if i + 1 < len(entries) else n
        at = int(a) + cap
        while at < b:
            out.append(at)
            at += cap
    assert len(out) <= len(cu), "the cap's pieces do not fit max_docs"
    return np.array(out + [n] * (len(cu) - len(out)), dtype=np.int32)
