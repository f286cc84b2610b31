"""pinring keeps a GPU training loop fed.

Rust threads decode samples (token windows from llm.c shards, packed documents as
modded-nanogpt feeds its model, fixed-size records) straight into a pinned host ring; a copy thread moves each batch to a device slot on a side CUDA
stream; ``Loader.pop()`` hands you a ``Batch`` that ``torch.from_dlpack`` views without a
copy. ``batch.release(event=stream)`` gives the slot back: its reuse waits for your stream
on the device, never by blocking the host.

    import pinring, torch

    src = pinring.TokenWindows("data/fineweb_train_*.bin", seq_len=1024, dtype="int32",
                               order="shuffled", seed=1337)
    with pinring.Loader(src, batch_size=64, device="cuda:0") as loader:
        for epoch in range(3):
            for batch in loader:                  # one epoch per iter(loader)
                x = torch.from_dlpack(batch)      # (64, 1025) int32 on cuda:0, zero copy
                loss = model(x[:, :-1], x[:, 1:]); loss.backward(); opt.step()
                batch.release(event=torch.cuda.current_stream())

Importing pinring needs neither torch, numpy nor cupy: their objects are duck-typed. The
type stubs (``_pinring.pyi``) are generated from the Rust code.
"""

from ._pinring import (
    AllSlotsLeased,
    Batch,
    CheckpointError,
    ConfigError,
    CudaError,
    DecodeError,
    Documents,
    EpochIterator,
    Error,
    Field,
    FixedRecords,
    Loader,
    Mixture,
    PopTimeout,
    RankError,
    RankGuard,
    RankWarning,
    Sampler,
    Source,
    SourceError,
    SourceFileNotFoundError,
    StoppedError,
    TokenWindows,
    Topology,
    __version__,
    merge_states,
)
from ._lineage import Location

__all__ = [
    "AllSlotsLeased",
    "Batch",
    "CheckpointError",
    "ConfigError",
    "CudaError",
    "DecodeError",
    "Documents",
    "EpochIterator",
    "Error",
    "Field",
    "FixedRecords",
    "Loader",
    "Location",
    "Mixture",
    "PopTimeout",
    "RankError",
    "RankGuard",
    "RankWarning",
    "Sampler",
    "Source",
    "SourceError",
    "SourceFileNotFoundError",
    "StoppedError",
    "TokenWindows",
    "Topology",
    "__version__",
    "merge_states",
]
