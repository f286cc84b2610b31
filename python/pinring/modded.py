"""modded-nanogpt's data generator, fed by pinring: one import to swap.

``distributed_data_generator`` has the signature and the ``.send((num_tokens, max_seq_len,
grad_accum_steps))`` protocol of ``train_gpt.py``'s (KellerJordan/modded-nanogpt, master
``f411b3d``), and yields exactly its 5-tuple — ``inputs`` (int32), ``targets`` (int64),
``cu_seqlens`` (int32), ``bigram_inputs`` (int32), all torch tensors on ``device``, and
``bigram_cpu``, a numpy view of the host bytes of ``bigram_inputs`` — with the same data
bit for bit, in both of its modes (``align_to_bos=True`` for training, ``False`` for
validation). The work is pinring's: decode workers pack each step (and hash its bigrams)
straight into a pinned slot ahead of the loop, a copy thread moves it to the device, and
the training thread only pops a ready slot and views it::

    from pinring.modded import distributed_data_generator   # in place of train_gpt.py's

Each yielded step stays valid until the next one is asked for: it is then released, fenced
on the current CUDA stream (the slot is reused only after the work queued on it so far).
On the cpu the tensors are the loader's fixed views (``Loader(fixed_views=)``): the same
tensor objects each time a device slot comes round, so a step's tensors must not be kept
past the next send (copy what you keep).

What differs from master, none of it in what a step holds: past the last shard the walk
goes on from the first (a next epoch; master's file iterator ends); the shards are indexed
off the training thread; a change of sizes by ``.send()`` restarts pinring's loader from
where the walk stands (a few milliseconds, at each of the schedule's transitions) — pass
``index_cache=`` to keep each shard's index across those restarts and across runs.
"""

from __future__ import annotations

from typing import Any

from ._pinring import ConfigError, Documents, Loader

__all__ = ["distributed_data_generator", "BIGRAM_VOCAB_SIZE"]

#: master's ``args.bigram_vocab_size``.
BIGRAM_VOCAB_SIZE = 50304 * 15 // 2

# Settings of the source (pinring.Documents); the rest of **loader_settings go to the Loader.
_SOURCE_SETTINGS = {"bos", "max_docs", "seq_cap", "index_cache", "positions"}


def _torch():
    import torch

    return torch


def _place(torch, rank, world_size):
    dist = getattr(torch, "distributed", None)
    initialized = dist is not None and dist.is_available() and dist.is_initialized()
    if rank is None:
        rank = dist.get_rank() if initialized else 0
    if world_size is None:
        world_size = dist.get_world_size() if initialized else 1
    return rank, world_size


def _per_rank(num_tokens, world_size, grad_accum_steps, what):
    if grad_accum_steps < 1 or num_tokens % (world_size * grad_accum_steps) != 0:
        raise ConfigError(
            f"{what}: num_tokens={num_tokens} must be a multiple of world_size * "
            f"grad_accum_steps = {world_size} * {grad_accum_steps} (each of the "
            f"{grad_accum_steps} sends a step gives each of the {world_size} ranks "
            f"num_tokens // (world_size * grad_accum_steps) tokens): pick sizes that divide"
        )
    return num_tokens // (world_size * grad_accum_steps)


def distributed_data_generator(
    filename_pattern: str,
    num_tokens: int,
    max_seq_len: int,
    grad_accum_steps: int = 1,
    align_to_bos: bool = True,
    *,
    bigram_vocab_size: int = BIGRAM_VOCAB_SIZE,
    rank: int | None = None,
    world_size: int | None = None,
    device: str = "cuda",
    **loader_settings: Any,
):
    """modded-nanogpt's ``distributed_data_generator``, fed by a ``pinring.Loader``.

    Args:
        filename_pattern: the shards' glob (sorted, as master sorts it).
        num_tokens: tokens of inputs per optimizer step over all ranks; each send gives
            this rank ``num_tokens // (world_size * grad_accum_steps)``.
        max_seq_len: where documents are cut (``align_to_bos=True``); ignored otherwise
            (master's validation passes -1).
        grad_accum_steps: sends per optimizer step.
        align_to_bos: True: whole documents from their BOS (training); False: contiguous
            windows, ``cu_seqlens`` at the BOS positions (validation).
        bigram_vocab_size: ``V`` of the bigram hash (``M = V - 1``).
        rank, world_size: None: from ``torch.distributed`` when initialized, else 0 and 1.
        device: where the tensors are ("cuda", "cuda:N" or "cpu").
        **loader_settings: ``bos``, ``max_docs`` (None: master's rule; "formula": the
            medium track's), ``seq_cap``, ``index_cache`` for the source; anything else
            (``host_slots``, ``device_slots``, ``decode_threads``, ...) for the Loader.

    Yields:
        ``(inputs, targets, cu_seqlens, bigram_inputs, bigram_cpu)`` per send.

    Raises:
        ConfigError: a ``num_tokens`` (given or sent) not a multiple of ``world_size *
            grad_accum_steps``, and every argument ``pinring.Documents`` or
            ``pinring.Loader`` refuses.
    """
    torch = _torch()
    rank, world_size = _place(torch, rank, world_size)
    source_settings = {k: v for k, v in loader_settings.items() if k in _SOURCE_SETTINGS}
    loader_args = {k: v for k, v in loader_settings.items() if k not in _SOURCE_SETTINGS}
    cuda = str(device).startswith("cuda")
    # On the cpu, fixed views (one tensor per device slot and field, made once): a step is
    # four cached tensors, no DLPack export a step. On cuda they would need the stream
    # declared up front (`Loader(stream=)`), and a trainer may queue its step on another:
    # there each step is exported on the stream that reads it (`torch.from_dlpack`).
    fixed = not cuda and "fixed_views" not in loader_args and "stream" not in loader_args
    views = {"fixed_views": torch.from_dlpack} if fixed else {}

    def open_loader(tokens, seq_len, state):
        return Loader(Documents(
            filename_pattern,
            tokens_per_batch=tokens,
            max_seq_len=seq_len if align_to_bos else 1,
            align_to_bos=align_to_bos,
            rank=rank,
            world_size=world_size,
            dtype="int32",
            targets_dtype="int64",
            bigram_vocab_size=bigram_vocab_size,
            **source_settings,
        ), device=device, state=state, **views, **loader_args)

    tokens = _per_rank(num_tokens, world_size, grad_accum_steps, "distributed_data_generator")
    sizes = (tokens, max_seq_len)
    loader = open_loader(tokens, max_seq_len, None)
    held = None
    try:
        while True:
            batch = loader.pop()
            view = batch.view if fixed else (lambda name: torch.from_dlpack(batch[name]))
            step = (
                view("inputs"),
                view("targets"),
                view("cu_seqlens"),
                view("bigram_inputs"),
                batch.host("bigram_inputs"),
            )
            held = batch
            new_params = yield step
            # The step is done with once the next is asked for: fenced on the stream its
            # work was queued on.
            if cuda:
                held.release(event=torch.cuda.current_stream())
            else:
                held.release()
            held = None
            if new_params is None:
                continue
            new_num_tokens, new_max_seq_len, new_grad_accum_steps = new_params
            new_tokens = _per_rank(new_num_tokens, world_size, new_grad_accum_steps, ".send()")
            new_sizes = (new_tokens, new_max_seq_len if align_to_bos else max_seq_len)
            if new_sizes == sizes:
                continue
            # The walk goes on from where it stands with the new sizes, as master's does:
            # the loader restarts there (its state, re-based on the new sizes).
            state = loader.state_dict()
            loader.close()
            state["schedule"] = [[0, new_tokens, new_sizes[1] if align_to_bos else 1]]
            state["step"] = 0
            sizes = new_sizes
            loader = open_loader(new_tokens, new_sizes[1], state)
    finally:
        if held is not None:
            held.release()
        loader.close()
