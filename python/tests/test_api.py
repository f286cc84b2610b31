"""What a newcomer sees (issue 20): help() shows the real defaults and documents every
parameter; the trace and the bottleneck verdict; poison_released is an argument."""

import inspect
import json
import os

import pytest

import pinring
from conftest import BOUND, drain

LOADER_ARGS = [
    "src", "batch_size", "device", "host_slots", "device_slots", "decode_threads",
    "pop_timeout", "drop_last", "epochs", "state", "start_step", "skip_steps", "lease_timeout",
    "host_budget", "device_budget", "trace", "poison_released", "stream", "fixed_views", "topology",
]


def test_help_shows_the_real_defaults_and_documents_every_parameter():
    sig = inspect.signature(pinring.Loader)
    assert list(sig.parameters) == LOADER_ARGS
    defaults = {n: p.default for n, p in sig.parameters.items() if p.default is not p.empty}
    assert defaults == {
        "batch_size": None, "device": None, "host_slots": 4, "device_slots": 2, "decode_threads": None,
        "pop_timeout": None, "drop_last": False, "epochs": None, "state": None,
        "start_step": 0, "skip_steps": None, "lease_timeout": 30.0, "host_budget": None,
        "device_budget": 16 << 30, "trace": None, "poison_released": False, "stream": None,
        "fixed_views": None, "topology": None,
    }
    doc = pinring.Loader.__doc__
    for name in LOADER_ARGS:
        assert f"    {name}: " in doc, name
    for cls, args in [
        (pinring.TokenWindows, ["paths", "seq_len", "dtype", "order", "seed", "rank", "world_size", "even_ranks", "topology",
                                "format", "token_type"]),
        (pinring.FixedRecords, ["paths", "record_bytes", "order", "seed", "rank", "world_size", "even_ranks", "dtype", "topology"]),
        (pinring.Documents, ["paths", "bos", "tokens_per_batch", "max_seq_len", "max_docs", "schedule",
                             "order", "seed", "rank", "world_size", "dtype", "positions", "index_cache", "topology",
                             "align_to_bos", "grad_accum_steps", "targets_dtype", "bigram_vocab_size", "seq_cap",
                             "format", "token_type"]),
        (pinring.Mixture, ["sources", "weights", "seed", "rank", "world_size", "stop", "topology"]),
    ]:
        assert list(inspect.signature(cls).parameters) == args
        for name in args:
            assert f"    {name}: " in cls.__doc__, (cls, name)
    load = inspect.signature(pinring.Loader.load_state_dict)
    assert list(load.parameters) == ["self", "state", "weights"]
    for name in ["state", "weights"]:
        assert f"    {name}: " in pinring.Loader.load_state_dict.__doc__, name
    for fn in [pinring.merge_states, pinring.Loader.pop, pinring.Loader.load_state_dict, pinring.Batch.locate,
               pinring.Loader.write_trace, pinring.Batch.release, pinring.Batch.__dlpack__,
               pinring.Field.__dlpack__, pinring.Batch.__getitem__]:
        assert fn.__doc__ and inspect.signature(fn), fn
    assert "Ellipsis" not in str(sig) and "..." not in str(sig)


def test_trace_writes_the_chrome_timeline_at_close(shard, tmp_path):
    src = pinring.TokenWindows(shard, seq_len=9)
    path = tmp_path / "trace.json"
    with pinring.Loader(src, batch_size=4, epochs=1, trace=str(path)) as loader:
        drain(loader)
        spans = loader.write_trace(str(tmp_path / "now.json"))
        assert spans > 0
    events = json.loads(path.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    assert len(events) >= spans
    with pinring.Loader(src, batch_size=4) as loader:
        with pytest.raises(pinring.ConfigError, match="tracing is off") as info:
            loader.write_trace(str(tmp_path / "x.json"))
        assert info.value.argument == "trace"
    with pytest.raises(pinring.ConfigError, match="cannot write there") as info:
        pinring.Loader(src, batch_size=4, trace=str(tmp_path / "no" / "such" / "dir.json"))
    assert info.value.argument == "trace"


def test_stats_say_the_bottleneck(shard):
    src = pinring.TokenWindows(shard, seq_len=9)
    with pinring.Loader(src, batch_size=4, epochs=1) as loader:
        drain(loader)
        s = loader.stats()
    assert s["bottleneck"] in {"not_yet", "consumer", "source", "decode", "copy",
                               "device_slots", "cpu", "hand_off"}
    assert isinstance(s["verdict"], str) and s["verdict"]
    assert s["elapsed"] > 0 and s["copies"] >= 1


def test_poison_released_is_an_argument(shard):
    """Issue 19 item 5 (the Python half): passed to the core's builder."""
    src = pinring.TokenWindows(shard, seq_len=9)
    with pinring.Loader(src, batch_size=4, epochs=1, poison_released=True) as loader:
        assert len(drain(loader)) == 28
