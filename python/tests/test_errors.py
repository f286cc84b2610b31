"""Bad input gives a pinring.Error subclass with a clear message, never a crash; timeouts,
closing and stopping."""

import threading

import numpy as np
import pytest

import pinring
from conftest import BOUND, drain, write_shard


def test_the_exception_classes():
    for cls, builtin in [
        (pinring.ConfigError, ValueError),
        (pinring.SourceError, OSError),
        (pinring.DecodeError, ValueError),
        (pinring.PopTimeout, TimeoutError),
        (pinring.StoppedError, RuntimeError),
        (pinring.CudaError, RuntimeError),
    ]:
        assert issubclass(cls, pinring.Error) and issubclass(cls, builtin)
        assert cls.__module__ == "pinring" and cls.__doc__
    assert issubclass(pinring.Error, Exception)


def test_a_missing_file(tmp_path):
    missing = str(tmp_path / "nope.bin")
    with pytest.raises(pinring.SourceError) as info:
        pinring.TokenWindows(missing, seq_len=8)
    assert missing in str(info.value) and info.value.path == missing
    assert "No such file" in str(info.value)
    with pytest.raises(pinring.SourceError, match="no file matches"):
        pinring.TokenWindows(str(tmp_path / "none_*.bin"), seq_len=8)
    with pytest.raises(pinring.SourceError, match="nope.bin"):
        pinring.FixedRecords([missing], record_bytes=4)


def test_a_directory(tmp_path):
    with pytest.raises(pinring.SourceError) as info:
        pinring.TokenWindows(str(tmp_path), seq_len=8)
    assert str(tmp_path) in str(info.value) and "is a directory" in str(info.value)
    assert info.value.path == str(tmp_path)
    with pytest.raises(pinring.SourceError, match="is a directory"):
        pinring.FixedRecords([str(tmp_path)], record_bytes=4)


def test_bad_magic(tmp_path):
    path = tmp_path / "bad.bin"
    header = np.zeros(256, dtype="<i4")
    header[:3] = [12345, 1, 10]
    path.write_bytes(header.tobytes() + np.arange(10, dtype="<u2").tobytes())
    with pytest.raises(pinring.SourceError, match="magic") as info:
        pinring.TokenWindows(str(path), seq_len=4)
    assert str(path) in str(info.value)


def test_a_truncated_shard(tmp_path):
    path = write_shard(tmp_path / "t.bin", np.arange(100))
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-10])
    with pytest.raises(pinring.SourceError, match="beyond the file") as info:
        pinring.TokenWindows(path, seq_len=4)
    assert path in str(info.value)
    short = tmp_path / "h.bin"
    short.write_bytes(data[:100])
    with pytest.raises(pinring.SourceError, match="truncated header"):
        pinring.TokenWindows(str(short), seq_len=4)


def test_seq_len_longer_than_any_shard_names_seq_len_and_the_file(tmp_path):
    """Issue 19 items 16 and 17: the error names seq_len (not a window of units) and the
    longest shard, and sets `path`."""
    path = write_shard(tmp_path / "s.bin", np.arange(50))
    short = write_shard(tmp_path / "t.bin", np.arange(20))
    with pytest.raises(pinring.SourceError) as info:
        pinring.TokenWindows([short, path], seq_len=50)
    text = str(info.value)
    assert info.value.path == path
    assert "seq_len=50" in text and path in text and "holds 50" in text
    assert "seq_len=49 or less" in text and "units" not in text
    assert pinring.TokenWindows(path, seq_len=49).epoch_len == 1


def test_a_glob_matching_nothing_has_a_path_and_is_a_file_not_found_error(tmp_path):
    """Issue 19 item 16: `path` is the pattern; the error is also a FileNotFoundError."""
    pattern = str(tmp_path / "none_*.bin")
    for make in [lambda: pinring.TokenWindows(pattern, seq_len=8), lambda: pinring.FixedRecords(pattern, 4)]:
        with pytest.raises(FileNotFoundError) as info:
            make()
        assert isinstance(info.value, pinring.SourceError)
        assert isinstance(info.value, pinring.SourceFileNotFoundError)
        assert info.value.path == pattern and "no file matches" in str(info.value)


def test_a_missing_file_is_also_a_file_not_found_error(tmp_path):
    """Issue 19 item 16."""
    missing = str(tmp_path / "nope.bin")
    for make in [lambda: pinring.TokenWindows(missing, seq_len=8), lambda: pinring.FixedRecords([missing], 4)]:
        with pytest.raises(FileNotFoundError) as info:
            make()
        assert isinstance(info.value, pinring.SourceError) and info.value.path == missing
        assert info.value.errno == 2 and missing in str(info.value)
    # Other file problems are SourceErrors, not FileNotFoundErrors.
    with pytest.raises(pinring.SourceError) as info:
        pinring.TokenWindows(str(tmp_path), seq_len=8)
    assert not isinstance(info.value, FileNotFoundError)


def test_a_huge_seq_len_says_it_is_too_large(shard):
    """Issue 19 item 17: seq_len=2**70 used to say "seq_len must be at least 1"."""
    for seq_len in [2**70, 2**64, 2**31]:
        with pytest.raises(pinring.ConfigError) as info:
            pinring.TokenWindows(shard, seq_len=seq_len)
        text = str(info.value)
        assert f"seq_len={seq_len} is too large" in text and "at least 1" not in text
        assert info.value.argument == "seq_len"


def write_u32_shard(path, tokens):
    """A shard of llm.c's LLaMA-3 format: magic 20240801, version 7, u32 tokens."""
    header = np.zeros(256, dtype="<i4")
    header[:3] = [20240801, 7, len(tokens)]
    with open(path, "wb") as f:
        f.write(header.tobytes() + np.asarray(tokens, dtype="<u4").tobytes())
    return str(path)


def test_uint16_on_a_u32_shard_is_refused_when_the_source_is_made(tmp_path):
    """Issue 19 item 15: refused by TokenWindows, in Python words, not at the first pop."""
    path = write_u32_shard(tmp_path / "llama.bin", np.arange(100_000, 100_100))
    with pytest.raises(pinring.ConfigError) as info:
        pinring.TokenWindows(path, seq_len=9, dtype="uint16")
    text = str(info.value)
    assert info.value.argument == "dtype" and info.value.path == path
    assert 'dtype="uint16"' in text and path in text and '"int32"' in text
    for rust in ["u16", "u32", "TokenType", "decoder"]:
        assert rust not in text.replace(path, "PATH"), text
    src = pinring.TokenWindows(path, seq_len=9, dtype="int32")
    with pinring.Loader(src, batch_size=2, epochs=1) as loader:
        first = drain(loader)[0]
    np.testing.assert_array_equal(first[0], np.arange(100_000, 100_010))


def test_a_partial_record(tmp_path):
    path = tmp_path / "r.bin"
    path.write_bytes(bytes(10))
    with pytest.raises(pinring.SourceError, match="not a multiple of the record size 4"):
        pinring.FixedRecords(str(path), record_bytes=4)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"seq_len": 0}, "seq_len must be at least 1"),
        ({"seq_len": -3}, "seq_len must be at least 1"),
        ({"seq_len": 8, "dtype": "float32"}, "dtype 'float32' is not one of"),
        ({"seq_len": 8, "dtype": "int8"}, "dtype"),
        ({"seq_len": 8, "order": "backwards"}, "order 'backwards'"),
        ({"seq_len": 8, "rank": 2, "world_size": 2}, "rank must be in 0..world_size (2), got 2"),
        ({"seq_len": 8, "world_size": 0}, "world_size must be at least 1"),
        ({"seq_len": 8, "seed": -1}, "seed"),
    ],
)
def test_bad_source_arguments(shard, kwargs, needle):
    with pytest.raises(pinring.ConfigError) as info:
        pinring.TokenWindows(shard, **kwargs)
    assert needle.replace("'", '"') in str(info.value) or needle in str(info.value)


def test_bad_record_arguments(tmp_path):
    path = tmp_path / "r.bin"
    path.write_bytes(bytes(16))
    with pytest.raises(pinring.ConfigError, match="record_bytes must be at least 1"):
        pinring.FixedRecords(str(path), record_bytes=0)
    with pytest.raises(pinring.ConfigError, match="uint8"):
        pinring.FixedRecords(str(path), record_bytes=4, dtype="int32")
    with pytest.raises(pinring.ConfigError, match="paths must be"):
        pinring.FixedRecords(42, record_bytes=4)


@pytest.mark.parametrize(
    "kwargs, needle",
    [
        ({"batch_size": 0}, "batch_size must be at least 1, got 0"),
        ({"batch_size": -1}, "batch_size must be at least 1"),
        ({"batch_size": 2, "host_slots": 0}, "host_slots must be at least 1"),
        ({"batch_size": 2, "device_slots": 0}, "device_slots must be at least 1"),
        ({"batch_size": 2, "device_slots": 5000}, "device_slots"),
        ({"batch_size": 2, "decode_threads": 0}, "decode_threads must be at least 1"),
        ({"batch_size": 2, "pop_timeout": -1.0}, "pop_timeout"),
        ({"batch_size": 2, "epochs": 0}, "epochs must be at least 1"),
        ({"batch_size": 2, "device": "tpu"}, 'device "tpu" is not one of'),
        ({"batch_size": 2, "device": "cuda:x"}, "cuda:x"),
        ({"batch_size": 2, "device": -1}, "device=-1"),
        ({"batch_size": 2, "device": True}, "bool"),
        ({"batch_size": 2, "device": 2.5}, "device=2.5"),
        ({"batch_size": 1 << 40}, "budget"),
    ],
)
def test_bad_loader_arguments(shard, kwargs, needle):
    src = pinring.TokenWindows(shard, seq_len=9)
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Loader(src, **kwargs)
    assert needle in str(info.value)


def test_cuda_99_is_a_clear_error_never_a_crash(shard):
    src = pinring.TokenWindows(shard, seq_len=9)

    class TorchDevice:
        type, index = "cuda", 99

    for device in ["cuda:99", 99, TorchDevice()]:
        with pytest.raises(pinring.Error) as info:
            pinring.Loader(src, batch_size=2, device=device)
        assert isinstance(info.value, pinring.CudaError)
        assert 'device="cuda:99"' in str(info.value)
        # Without a driver it says so; with one, that there is no device 99.
        assert "driver" in str(info.value) or "no CUDA device 99" in str(info.value)


def test_a_source_that_is_not_one(shard):
    with pytest.raises(TypeError, match="pinring.TokenWindows, pinring.FixedRecords, pinring.Documents or pinring.Mixture"):
        pinring.Loader([shard], batch_size=2)


def test_pop_timeout_names_the_stage_behind(shard):
    src = pinring.TokenWindows(shard, seq_len=9)
    with pinring.Loader(src, batch_size=2, device_slots=1, pop_timeout=0.05) as loader:
        held = loader.pop()
        with pytest.raises(pinring.PopTimeout) as info:
            loader.pop()  # the loader's pop_timeout
        assert isinstance(info.value, TimeoutError)
        assert info.value.behind == "consumer" and info.value.waited >= 0.05
        assert "you hold every device slot: release a batch" in str(info.value)
        with pytest.raises(pinring.PopTimeout):
            loader.pop(timeout=0)  # never waits
        with pytest.raises(pinring.ConfigError):
            loader.pop(timeout=-1)
        held.release()
        assert loader.pop(timeout=BOUND).seq == 1  # nothing was lost


def test_pop_after_close_and_a_pop_blocked_in_another_thread(shard):
    src = pinring.TokenWindows(shard, seq_len=9)
    loader = pinring.Loader(src, batch_size=2, device_slots=1)
    held = loader.pop(timeout=BOUND)
    started, outcome = threading.Event(), []

    def blocked():
        started.set()
        try:
            loader.pop()  # no slot will be free: waits until closed
        except BaseException as e:
            outcome.append(e)

    t = threading.Thread(target=blocked)
    t.start()
    started.wait(BOUND)
    loader.close()  # wherever the other thread is, its pop ends in StoppedError
    t.join(BOUND)
    assert not t.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], pinring.StoppedError), outcome
    with pytest.raises(pinring.StoppedError, match="closed"):
        loader.pop()
    with pytest.raises(pinring.StoppedError):
        next(iter(loader))
    loader.close()  # idempotent
    assert loader.stats()["closed"] is True
    held.release()


def test_stats(shard):
    src = pinring.TokenWindows(shard, seq_len=9)
    with pinring.Loader(src, batch_size=10, device_slots=3) as loader:
        for b in loader:
            b.release()
        s = loader.stats()
    assert s["batches"] == 12 and s["bytes"] == 111 * 10 * 4
    assert set(s["decode"]) == {"busy", "waited"}
    assert len(s["host_slots"]) == 4 and len(s["device_slots"]) == 3
    assert all(isinstance(seq, int) and isinstance(state, str) for seq, state in s["device_slots"])


def test_pop_timeout_zero_names_the_real_stage(shard):
    """Issue 19 item 13: `pop(timeout=0)` said behind="source" whatever held it up."""
    src = pinring.TokenWindows(shard, seq_len=9)
    with pinring.Loader(src, batch_size=2, device_slots=1) as loader:
        held = loader.pop(timeout=BOUND)
        with pytest.raises(pinring.PopTimeout) as info:
            loader.pop(timeout=0)
        assert info.value.behind == "consumer", info.value
        assert "you hold every device slot" in str(info.value)
        held.release()
        assert loader.pop(timeout=BOUND).seq == 1


def test_merge_states_of_nothing_is_a_checkpoint_error(shard):
    """Issue 19 item 14: an empty list is a CheckpointError in Python words (it was a
    SourceError, an OSError, naming a Rust parameter)."""
    src = pinring.TokenWindows(shard, seq_len=9)
    for call in [lambda: pinring.merge_states([]), lambda: pinring.Loader(src, 2, state=[])]:
        with pytest.raises(pinring.CheckpointError) as info:
            call()
        assert not isinstance(info.value, OSError)
        assert "no state given" in str(info.value) and "state_dict()" in str(info.value)
    with pinring.Loader(src, 2) as loader:
        with pytest.raises(pinring.CheckpointError, match="no state given"):
            loader.load_state_dict(())


@pytest.mark.parametrize(
    "kwargs, argument, needle",
    [
        ({"host_budget": 1000}, "host_budget", "over the host_budget of 1000 bytes: raise host_budget"),
        ({"device_budget": 1000}, "device_budget", "over the device_budget of 1000 bytes: raise device_budget"),
        ({"device_slots": 5000}, "device_slots", "device_slots=5000 is over the most"),
        ({"decode_threads": 100_000}, "decode_threads", "decode_threads=100000 is over the most"),
        ({"host_budget": 0}, "host_budget", "host_budget must be at least 1"),
    ],
)
def test_config_errors_name_the_loader_argument(shard, kwargs, argument, needle):
    """Issue 20: the core's ConfigError is mapped by its field onto the Loader argument
    (`e.argument`), in the Loader's words."""
    src = pinring.TokenWindows(shard, seq_len=99)
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Loader(src, batch_size=8, **kwargs)
    assert info.value.argument == argument
    assert needle in str(info.value), str(info.value)


def test_the_budgets_can_be_raised(shard):
    """Issue 20: host_budget and device_budget are Loader arguments; a batch over the
    default budget fits a raised one."""
    src = pinring.TokenWindows(shard, seq_len=99)  # 400-byte samples
    # 4 host and 2 device slots of one page each, and a page for the batches' bookkeeping
    # (their descriptions count in the budgets too).
    small = dict(host_budget=5 * 4096, device_budget=3 * 4096)
    with pinring.Loader(src, batch_size=8, epochs=1, **small) as loader:  # 3200-byte batches
        assert len(drain(loader)) == 2
    with pytest.raises(pinring.ConfigError) as info:
        pinring.Loader(src, batch_size=11, **small)  # 4400 bytes: two pages a slot
    assert info.value.argument == "host_budget"
    # Two pages of bookkeeping: each row's id, length, source and step count too.
    big = dict(host_budget=4 * 8192 + 2 * 4096, device_budget=2 * 8192 + 2 * 4096)
    with pinring.Loader(src, batch_size=11, epochs=1, **big) as loader:
        assert len(drain(loader)) == 1


def test_sampling_errors_speak_of_seq_len_and_samples(tmp_path):
    """Issue 19 item 17: messages name the Python parameters (seq_len, drop_last=False),
    not the core's windows and builder calls."""
    path = write_shard(tmp_path / "s.bin", np.arange(31))  # seq_len 10: 3 samples
    with pytest.raises(pinring.SourceError) as info:
        pinring.TokenWindows(path, seq_len=10, world_size=4)
    assert "seq_len" in str(info.value) and "window" not in str(info.value)
    src = pinring.TokenWindows(path, seq_len=10)
    with pytest.raises(pinring.SourceError) as info:
        pinring.Loader(src, batch_size=4, drop_last=True)
    text = str(info.value)
    assert "drop_last=False" in text and "batch_size" in text and "window" not in text
