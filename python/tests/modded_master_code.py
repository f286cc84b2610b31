"""master's own data generator (modded-nanogpt ``train_gpt.py`` at ``f411b3d``), extracted
at test time from the vendored text ``vendor/train_gpt_f411b3d_loader.py.txt`` (its lines
1168-1169 and 1697-1875, verbatim) and run on the cpu: its device moves pointed at the cpu
(``device="cuda"`` → ``"cpu"``, ``pin_memory=True`` → ``False``: the only edits), with
torch where it is installed and ``numpy_torch`` (a numpy stand-in for the calls it makes)
where it is not; ``dist`` saying the rank and world size asked for, and
``args.bigram_vocab_size`` given."""

import glob
import math
import threading
import types
from pathlib import Path

VENDORED = Path(__file__).parent / "vendor" / "train_gpt_f411b3d_loader.py.txt"
COMMIT = "f411b3d3"


def _torch():
    try:
        import torch

        return torch, "torch"
    except ImportError:
        import numpy_torch

        return numpy_torch, "numpy_torch"


def source_text():
    """The vendored source with its device moves pointed at the cpu."""
    text = VENDORED.read_text()
    assert COMMIT in text.splitlines()[0], "the vendored text names its commit"
    for name in ("def next_multiple_of_n", "def _load_data_shard", "class Shard",
                 "def get_bigram_hash", "def distributed_data_generator"):
        assert name in text, f"{name} is missing from the vendored text"
    cpu = text.replace('device="cuda"', 'device="cpu"').replace("pin_memory=True", "pin_memory=False")
    assert cpu.count('device="cpu"') == 4, "master moves its four tensors to the device"
    return cpu


def load(bigram_vocab_size, rank=0, world_size=1):
    """master's namespace, as rank ``rank`` of ``world_size`` (what its ``dist`` says):
    ``distributed_data_generator`` and what it calls, and which torch it runs on."""
    torch, which = _torch()
    ns = {
        "torch": torch,
        "Tensor": getattr(torch, "Tensor"),
        "dist": types.SimpleNamespace(
            is_initialized=lambda: True,
            get_rank=lambda: rank,
            get_world_size=lambda: world_size,
        ),
        "args": types.SimpleNamespace(bigram_vocab_size=bigram_vocab_size),
        "glob": glob,
        "math": math,
        "threading": threading,
        "Path": Path,
    }
    exec(compile(source_text(), str(VENDORED), "exec"), ns)
    return ns, which
