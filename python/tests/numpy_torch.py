"""A stand-in for the few torch calls modded-nanogpt's data generator makes (and that
``pinring.modded`` makes), on numpy, for the cpu tests where torch is not installed.

Used only where ``torch`` cannot be imported; with torch installed the tests use it. Its
arithmetic is numpy's, which on int32 arrays is torch's: products wrap, ``%`` takes the
divisor's sign, ``^`` is bitwise. Nothing here is registered in ``sys.modules``.
"""

import types

import numpy as np

int32, int64, uint16 = np.int32, np.int64, np.uint16


class Tensor(np.ndarray):
    """An ndarray with the tensor methods master's generator calls."""

    def to(self, dtype=None, device=None, non_blocking=False):
        out = self if dtype is None else self.astype(dtype)
        return out.view(Tensor) if not isinstance(out, Tensor) else out

    def cpu(self):
        return self

    def numpy(self):
        return np.asarray(self)

    def numel(self):
        return self.size

    def copy_(self, other):
        np.copyto(self, other)
        return self

    def nonzero(self, as_tuple=False):
        idx = np.nonzero(np.asarray(self))
        if as_tuple:
            return tuple(i.view(Tensor) for i in idx)
        return np.stack(idx, axis=1).view(Tensor)

    def view(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (int, np.integer)):
            return np.ndarray.reshape(self, shape)
        if shape and isinstance(shape[0], type) and issubclass(shape[0], np.ndarray):
            return np.ndarray.view(self, shape[0])
        return np.ndarray.view(self, *shape)

    def __index__(self):
        return int(self)


def _t(a):
    return np.asarray(a).view(Tensor)


def from_file(path, shared, size, dtype):
    return _t(np.fromfile(path, dtype=dtype, count=size))


def empty(n, dtype, pin_memory=False):
    return _t(np.empty(n, dtype=dtype))


def empty_like(x, pin_memory=False):
    return _t(np.empty_like(np.asarray(x)))


def tensor(values):
    return _t(np.array([int(v) for v in values], dtype=np.int64))


def cat(parts):
    return _t(np.concatenate([np.asarray(p) for p in parts]))


def full(shape, value):
    return _t(np.full(shape, value, dtype=np.int64))


def nonzero(x):
    return x.nonzero()


def bitwise_xor(a, b):
    return _t(np.bitwise_xor(np.asarray(a), np.asarray(b)))


def from_dlpack(x):
    return _t(np.from_dlpack(x))


class _Stream:
    pass


cuda = types.SimpleNamespace(current_stream=lambda: _Stream())


class _Dist:
    @staticmethod
    def is_available():
        return True

    @staticmethod
    def is_initialized():
        return False


distributed = _Dist()
