"""The collective a ``pinring.RankGuard`` reduces its lanes with when it is given a
``group`` (or nothing): one ``all_reduce`` with ``ReduceOp.MAX`` of a small int64 tensor
over ``torch.distributed``. torch is imported here, when a guard is made, never by
``import pinring``."""


def torch_max(group=None):
    """``(reduce, rank, world_size)`` for ``group`` (None: the default group):
    ``reduce(lanes)`` returns the element-wise maximum of ``lanes`` over the group's ranks
    (on the current CUDA device for NCCL, on the cpu otherwise)."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        raise ImportError(
            "pinring.RankGuard without collective= reduces over torch.distributed, which "
            "needs torch: install it, or pass collective=fn (fn(lanes) -> the element-wise "
            "max of lanes over the ranks)"
        ) from e
    if not (dist.is_available() and dist.is_initialized()):
        raise RuntimeError(
            "pinring.RankGuard without collective= needs torch.distributed initialized "
            "(dist.init_process_group) first, or pass collective=fn"
        )
    backend = dist.get_backend(group)
    if backend == "nccl":
        device = torch.device("cuda", torch.cuda.current_device())
    else:
        device = torch.device("cpu")

    def reduce(lanes):
        t = torch.tensor(lanes, dtype=torch.int64, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
        return t.tolist()

    return reduce, dist.get_rank(group), dist.get_world_size(group)
