"""Type stubs of pinring (the compiled module pinring._pinring, re-exported)."""

import os
from types import TracebackType
from typing import Any, Dict, Iterator, List, Optional, Protocol, Sequence, Tuple, Union

__version__: str

StrPath = Union[str, "os.PathLike[str]"]
Paths = Union[StrPath, Sequence[StrPath]]

class _TorchDevice(Protocol):
    @property
    def type(self) -> str: ...
    @property
    def index(self) -> Optional[int]: ...

DeviceLike = Union[str, int, _TorchDevice]
"""'cpu', 'cuda', 'cuda:N', an int N, or a torch.device (duck-typed)."""

class _TorchEvent(Protocol):
    @property
    def cuda_event(self) -> int: ...

class _TorchStream(Protocol):
    def record_event(self, event: Any = ...) -> Any: ...

class _CupyStream(Protocol):
    def record(self, event: Any = ...) -> Any: ...

class _CupyEvent(Protocol):
    @property
    def ptr(self) -> int: ...

Fence = Union[None, int, _TorchEvent, _TorchStream, _CupyStream, _CupyEvent]
"""What Batch.release(event=...) accepts."""

class Error(Exception):
    """Base class of every error pinring raises."""

class ConfigError(Error, ValueError):
    """A Loader or source argument was rejected."""

class SourceError(Error, OSError):
    """A data source could not be opened or sampled; names the file (``path``)."""

    path: str

class DecodeError(Error, ValueError):
    """Decoding a sample failed; ``seq`` and ``sample`` name the batch and the sample."""

    seq: int
    sample: int

class PopTimeout(Error, TimeoutError):
    """pop() waited for its timeout; ``waited`` (s) and ``behind`` (the stage) say more."""

    waited: float
    behind: str

class StoppedError(Error, RuntimeError):
    """The loader has stopped (closed, or after an error reported earlier)."""

class CudaError(Error, RuntimeError):
    """A CUDA driver call failed, or no driver / no such device; ``call`` and ``code``."""

    call: str
    code: int

class CheckpointError(Error, ValueError):
    """A loader state was refused: not a state dict, another dataset (file names and
    sizes), seq_len, record size, order or seed, ranks that consumed unequal counts, or a
    loader that already delivered a batch."""

State = Dict[str, Any]
"""A loader's position as plain data (ints, strings, lists of them): `Loader.state_dict()`."""

def merge_states(states: Sequence[State]) -> State:
    """Every rank's state_dict(), in rank order, as the one state they share; raises
    CheckpointError when the ranks consumed unequal counts or belong to different runs."""

class TokenWindows:
    """Windows of ``seq_len + 1`` tokens (stride ``seq_len``) from llm.c token shards."""

    def __init__(
        self,
        paths: Paths,
        seq_len: int,
        dtype: str = "int32",
        order: str = "sequential",
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        even_ranks: bool = True,
    ) -> None: ...
    @property
    def seq_len(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def files(self) -> List[str]: ...
    @property
    def tokens(self) -> int: ...
    @property
    def order(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def even_ranks(self) -> bool: ...
    @property
    def epoch_len(self) -> int: ...
    def __len__(self) -> int: ...

class FixedRecords:
    """Records of ``record_bytes`` bytes from one or more files; batches are uint8."""

    def __init__(
        self,
        paths: Paths,
        record_bytes: int,
        order: str = "sequential",
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
        even_ranks: bool = True,
        dtype: str = "uint8",
    ) -> None: ...
    @property
    def record_bytes(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def files(self) -> List[str]: ...
    @property
    def records(self) -> int: ...
    @property
    def order(self) -> str: ...
    @property
    def seed(self) -> int: ...
    @property
    def rank(self) -> int: ...
    @property
    def world_size(self) -> int: ...
    @property
    def even_ranks(self) -> bool: ...
    @property
    def epoch_len(self) -> int: ...
    def __len__(self) -> int: ...

class Batch:
    """One batch in a device slot, leased until released. A DLPack producer."""

    @property
    def seq(self) -> int: ...
    @property
    def samples(self) -> int: ...
    @property
    def shape(self) -> Tuple[int, int]: ...
    @property
    def dtype(self) -> str: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def device(self) -> str: ...
    @property
    def ptr(self) -> int: ...
    @property
    def slot(self) -> int: ...
    @property
    def released(self) -> bool: ...
    @property
    def epoch(self) -> int: ...
    @property
    def sample_ids(self) -> Any:
        """numpy.ndarray of uint64 (read-only): each sample's id, in row order."""
    def __dlpack_device__(self) -> Tuple[int, int]: ...
    def __dlpack__(
        self,
        *,
        stream: Optional[int] = None,
        max_version: Optional[Tuple[int, int]] = None,
        dl_device: Optional[Tuple[int, int]] = None,
        copy: Optional[bool] = None,
    ) -> Any: ...
    def release(self, event: Fence = None) -> None: ...
    def __enter__(self) -> "Batch": ...
    def __exit__(
        self,
        exc_type: Optional[type],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...

class Loader:
    """Feeds batches of a source to a device; iterate it or pop() from it."""

    def __init__(
        self,
        src: Union[TokenWindows, FixedRecords],
        batch_size: int,
        device: DeviceLike = "cpu",
        host_slots: int = 4,
        device_slots: int = 2,
        decode_threads: Optional[int] = None,
        pop_timeout: Optional[float] = None,
        drop_last: bool = False,
        epochs: Optional[int] = 1,
        state: Union[None, State, Sequence[State]] = None,
    ) -> None: ...
    def pop(self, timeout: Optional[float] = None) -> Optional[Batch]: ...
    def state_dict(self) -> State: ...
    def load_state_dict(self, state: Union[State, Sequence[State]]) -> None: ...
    def stats(self) -> Dict[str, Any]: ...
    def close(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    @property
    def batch_size(self) -> int: ...
    @property
    def device(self) -> str: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> Tuple[int, int]: ...
    @property
    def host_slots(self) -> int: ...
    @property
    def device_slots(self) -> int: ...
    @property
    def drop_last(self) -> bool: ...
    @property
    def epochs(self) -> Optional[int]: ...
    @property
    def epoch_len(self) -> int: ...
    @property
    def epoch_batches(self) -> int: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Batch]: ...
    def __next__(self) -> Batch: ...
    def __enter__(self) -> "Loader": ...
    def __exit__(
        self,
        exc_type: Optional[type],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool: ...
