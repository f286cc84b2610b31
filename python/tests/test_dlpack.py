"""The DLPack capsules a Batch makes, read field by field through ctypes: versioned (1.x,
non-NULL strides) when max_version allows, legacy otherwise; copy, device and stream
arguments per the Python array API standard."""

import ctypes
import gc

import numpy as np
import pytest

import pinring
from conftest import BOUND


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_api = ctypes.pythonapi
_api.PyCapsule_GetName.restype = ctypes.c_char_p
_api.PyCapsule_GetName.argtypes = [ctypes.py_object]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]


def open_capsule(capsule):
    name = _api.PyCapsule_GetName(capsule)
    ptr = _api.PyCapsule_GetPointer(capsule, name)
    kind = DLManagedTensorVersioned if name == b"dltensor_versioned" else DLManagedTensor
    m = kind.from_address(ptr)
    m.capsule = capsule  # the struct lives only as long as the capsule
    return name, m


def check_tensor(t, batch, type_code, bits):
    assert t.data == batch.ptr
    assert (t.device.device_type, t.device.device_id) == (1, 0)  # kDLCPU
    assert t.ndim == 2
    assert (t.dtype.code, t.dtype.bits, t.dtype.lanes) == (type_code, bits, 1)
    assert [t.shape[0], t.shape[1]] == list(batch.shape)
    assert bool(t.strides), "strides must not be NULL"
    assert [t.strides[0], t.strides[1]] == [batch.shape[1], 1]
    assert t.byte_offset == 0


@pytest.fixture
def loader(shard):
    src = pinring.TokenWindows(shard, seq_len=9, dtype="int32")
    with pinring.Loader(src, batch_size=3, device="cpu", device_slots=1) as loader:
        yield loader


KDL_INT, KDL_UINT = 0, 1


def test_legacy_capsule_without_max_version(loader):
    b = loader.pop(timeout=BOUND)
    for kwargs in [{}, {"max_version": None}, {"max_version": (0, 8)}]:
        capsule = b.__dlpack__(**kwargs)
        name, m = open_capsule(capsule)
        assert name == b"dltensor"
        check_tensor(m.dl_tensor, b, KDL_INT, 32)
        assert m.manager_ctx and m.deleter
    b.release()


@pytest.mark.parametrize("max_version, minor", [((1, 0), 0), ((1, 1), 1), ((1, 99), None)])
def test_versioned_capsule_when_max_version_allows(loader, max_version, minor):
    b = loader.pop(timeout=BOUND)
    name, m = open_capsule(b.__dlpack__(max_version=max_version))
    assert name == b"dltensor_versioned"
    assert m.version.major == 1
    if minor is not None:
        assert m.version.minor == minor
    else:
        assert 1 <= m.version.minor < 99  # the newest this build knows
    assert m.flags == 0  # writable, not a copy
    check_tensor(m.dl_tensor, b, KDL_INT, 32)
    b.release()


@pytest.mark.parametrize("dtype, code, bits", [("uint16", KDL_UINT, 16), ("int64", KDL_INT, 64)])
def test_dtype_fields(shard, dtype, code, bits):
    src = pinring.TokenWindows(shard, seq_len=9, dtype=dtype)
    with pinring.Loader(src, batch_size=3, device="cpu") as loader:
        b = loader.pop(timeout=BOUND)
        _, m = open_capsule(b.__dlpack__(max_version=(1, 0)))
        check_tensor(m.dl_tensor, b, code, bits)
        b.release()


def test_record_bytes_are_uint8(tmp_path):
    path = tmp_path / "r.bin"
    path.write_bytes(bytes(range(40)))
    with pinring.Loader(pinring.FixedRecords(str(path), 8), batch_size=2, device="cpu") as loader:
        b = loader.pop(timeout=BOUND)
        _, m = open_capsule(b.__dlpack__(max_version=(1, 0)))
        check_tensor(m.dl_tensor, b, KDL_UINT, 8)
        np.testing.assert_array_equal(np.from_dlpack(b), np.arange(16, dtype=np.uint8).reshape(2, 8))
        b.release()


def test_copy_device_and_stream_arguments(loader):
    b = loader.pop(timeout=BOUND)
    assert b.__dlpack_device__() == (1, 0)
    with pytest.raises(BufferError):
        b.__dlpack__(copy=True)
    with pytest.raises(BufferError):
        b.__dlpack__(max_version=(1, 0), copy=True)
    assert open_capsule(b.__dlpack__(copy=False))[0] == b"dltensor"
    assert open_capsule(b.__dlpack__(dl_device=(1, 0), max_version=(1, 0)))[0] == b"dltensor_versioned"
    with pytest.raises(BufferError):
        b.__dlpack__(dl_device=(2, 0))  # no cross-device copies
    assert open_capsule(b.__dlpack__(stream=None))[0] == b"dltensor"
    assert open_capsule(b.__dlpack__(stream=-1))[0] == b"dltensor"
    with pytest.raises(BufferError):
        b.__dlpack__(stream=7)  # a CUDA stream means nothing on the cpu backend
    with pytest.raises(TypeError):
        b.__dlpack__(None)  # keyword-only
    b.release()
    with pytest.raises(BufferError):
        b.__dlpack__()


def test_numpy_consumes_both_kinds_and_can_write_the_slot(loader):
    b = loader.pop(timeout=BOUND)
    x = np.from_dlpack(b)  # numpy 2 asks for a versioned capsule
    assert x.flags.writeable
    x[0, 0] = 12345
    np.testing.assert_array_equal(np.from_dlpack(b)[0, 0], 12345)

    class Legacy:  # a consumer path that only takes the legacy ABI
        def __init__(self, batch):
            self.batch = batch

        def __dlpack__(self, stream=None):
            return self.batch.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.batch.__dlpack_device__()

    y = np.from_dlpack(Legacy(b))
    assert y.ctypes.data == b.ptr and y[0, 0] == 12345
    b.release()


def test_a_capsule_is_released_by_its_consumer_exactly_once(loader):
    b = loader.pop(timeout=BOUND)
    capsule = b.__dlpack__(max_version=(1, 0))
    x = np.from_dlpack(type("P", (), {"__dlpack__": lambda self, **k: capsule, "__dlpack_device__": lambda self: (1, 0)})())
    assert _api.PyCapsule_GetName(capsule) == b"used_dltensor_versioned"
    del b
    gc.collect()
    with pytest.raises(pinring.PopTimeout):
        loader.pop(timeout=0.05)  # numpy's array holds the slot
    del capsule  # a used capsule's destructor does nothing
    gc.collect()
    with pytest.raises(pinring.PopTimeout):
        loader.pop(timeout=0.05)
    del x
    gc.collect()
    assert loader.pop(timeout=BOUND).seq == 1

DELETER_WITHOUT_THE_GIL = r'''
import ctypes, gc, sys
import numpy as np
import pinring

api = ctypes.pythonapi
api.PyCapsule_GetPointer.restype = ctypes.c_void_p
api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
# A CFUNCTYPE call releases the GIL for the call, as torch's C++ does around its work.
DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
pending = []

def consumer(export):
    # Called by pop() (a pinring method) at a slot's first use: the deleter of a capsule
    # taken earlier runs here, on a thread pinring entered, with the GIL released.
    while pending:
        ptr = pending.pop()
        deleter = ctypes.c_void_p.from_address(ptr + DELETER_OFFSET).value
        DELETER(deleter)(ptr)
    return np.from_dlpack(export)

# DLManagedTensor: the DLTensor (48 bytes on 64-bit), manager_ctx, deleter.
DELETER_OFFSET = 56
src = pinring.TokenWindows(sys.argv[1], seq_len=9, dtype="int32")
with pinring.Loader(src, batch_size=3, device="cpu", device_slots=2, fixed_views=consumer) as loader:
    b = loader.pop(timeout=30)
    capsule = b.__dlpack__()
    ptr = api.PyCapsule_GetPointer(capsule, b"dltensor")
    api.PyCapsule_SetName(capsule, b"used_dltensor")  # taken: the deleter is ours to call
    pending.append(ptr)
    del b, capsule
    gc.collect()
    second = loader.pop(timeout=30)  # slot 1's first use: the consumer runs the deleter
    assert not pending
    second.release()
    # The deleter released batch 0: its slot comes round again.
    print("popped", [loader.pop(timeout=30).seq for _ in range(2)])
'''


def test_a_deleter_run_without_the_gil_inside_a_pinring_call_releases_its_batch(shard, tmp_path):
    """A DLPack deleter may run on a thread that is inside a pinring call and has let the
    GIL go in C code: torch's C++ frees tensors under `gil_scoped_release` (it did so during
    a CUDA-graph capture), here a ctypes call from the fixed_views consumer that pop()
    calls. The deleter must release the batch it held without detaching from the
    interpreter again: it used to, and the process died with "PyEval_SaveThread: the
    function must be called with the GIL held"."""
    import subprocess
    import sys

    script = tmp_path / "deleter_without_the_gil.py"
    script.write_text(DELETER_WITHOUT_THE_GIL)
    run = subprocess.run([sys.executable, str(script), shard], capture_output=True, text=True, timeout=BOUND * 4)
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])
    assert run.stdout.strip() == "popped [2, 3]"
