"""A state knows its data (issue 29): every state dict records each file's content
fingerprint (`contents`: a hash of the file's size, its first KiB and 32 eight-byte words
spread evenly to its end), so a state saved on one dataset is refused on another of the same
file names and sizes (the tokens reversed) with a CheckpointError naming the file; the same
files copied to another folder resume exactly; a state of the version before `contents` is
refused naming its version. For TokenWindows, FixedRecords, Documents and a Mixture of each."""

import json
import pathlib
import shutil

import numpy as np
import pytest

import pinring
from conftest import popped, write_shard
from docs_data import write_doc_shards

SEQ = 8
M = (1 << 64) - 1
GAMMA = 0x9E3779B97F4A7C15


def mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
    return z ^ (z >> 31)


def content(path):
    """The content fingerprint of the file at `path`, by the documented rule, in Python."""
    raw = pathlib.Path(path).read_bytes()
    n = len(raw)
    if n <= 1024 + 8 * 32:
        sample = raw
    else:
        span = n - 1024 - 8
        sample = raw[:1024] + b"".join(raw[1024 + k * span // 31:][:8] for k in range(32))
    h = n
    for i in range(0, len(sample), 8):
        h = mix64(((h + GAMMA) & M) ^ int.from_bytes(sample[i:i + 8].ljust(8, b"\0"), "little"))
    return h


@pytest.fixture
def folders(tmp_path):
    """good/ (two shards), other/ (the same names and sizes, good.bin's tokens reversed) and
    copy/ (good/'s files copied)."""
    good, other, copy = (tmp_path / name for name in ("good", "other", "copy"))
    for folder in (good, other):
        folder.mkdir()
    tokens = np.random.default_rng(3).integers(0, 50000, 3001)
    write_shard(good / "first.bin", np.arange(1000, 1000 + 2001))
    write_shard(good / "good.bin", tokens)
    write_shard(other / "first.bin", np.arange(1000, 1000 + 2001))
    write_shard(other / "good.bin", tokens[::-1])
    shutil.copytree(good, copy)
    return good, other, copy


def windows(folder, **kw):
    return pinring.TokenWindows([str(folder / "first.bin"), str(folder / "good.bin")], seq_len=SEQ,
                                order="shuffled", seed=5, **kw)


def rows(loader, n):
    return popped(loader, n, lambda b: (b.step, b.sample_ids.copy(), np.from_dlpack(b).copy()))


def saved(src, **kw):
    """The state after 3 steps, through JSON."""
    with pinring.Loader(src, device="cpu", **kw) as loader:
        assert len(rows(loader, 3)) == 3
        return json.loads(json.dumps(loader.state_dict()))


def same(a, b):
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert x[0] == y[0]
        for u, v in zip(x[1:], y[1:]):
            np.testing.assert_array_equal(u, v)


def refused_naming(name, make):
    with pytest.raises(pinring.CheckpointError, match=f"the content of {name} .* is 0x[0-9a-f]{{16}} in the "
                       "checkpoint but 0x[0-9a-f]{16} here") as info:
        make()
    return str(info.value)


def test_a_windows_state_records_each_files_content(folders):
    good, other, _ = folders
    state = saved(windows(good), batch_size=4)
    assert list(state)[:6] == ["version", "format", "record_bytes", "files", "sizes", "contents"]
    assert state["version"] == 3
    assert state["files"] == ["first.bin", "good.bin"]
    assert state["contents"] == [content(good / "first.bin"), content(good / "good.bin")]
    assert content(other / "good.bin") != content(good / "good.bin")
    assert pathlib.Path(other / "good.bin").stat().st_size == pathlib.Path(good / "good.bin").stat().st_size


def test_a_windows_state_is_refused_on_other_data_and_resumes_on_a_copy(folders):
    good, other, copy = folders
    state = saved(windows(good), batch_size=4)
    text = refused_naming("good.bin", lambda: pinring.Loader(windows(other), batch_size=4, device="cpu", state=state))
    assert f"{content(good / 'good.bin'):#018x}" in text and f"{content(other / 'good.bin'):#018x}" in text
    with pinring.Loader(windows(other), batch_size=4, device="cpu") as loader:
        refused_naming("good.bin", lambda: loader.load_state_dict(state))
    resume = lambda folder: pinring.Loader(windows(folder), batch_size=4, device="cpu", state=state)  # noqa: E731
    with resume(good) as a, resume(copy) as b:
        want = rows(a, 6)
        assert want[0][0] == 3
        same(rows(b, 6), want)


def test_the_newcomers_case_other_good_bin_is_refused(folders, monkeypatch):
    """Issue 29's case as written: a state of good/good.bin given to
    Loader(TokenWindows("other/good.bin", ...)): the same size, the tokens reversed."""
    monkeypatch.chdir(folders[0].parent)
    s = saved(pinring.TokenWindows("good/good.bin", seq_len=SEQ), batch_size=4)
    assert s["step"] == 3
    text = refused_naming("good.bin", lambda: pinring.Loader(pinring.TokenWindows("other/good.bin", seq_len=SEQ),
                                                             batch_size=4, state=s))
    assert "the same name and size, other bytes" in text
    with pinring.Loader(pinring.TokenWindows("copy/good.bin", seq_len=SEQ), batch_size=4, device="cpu",
                        state=s) as loader:
        assert rows(loader, 1)[0][0] == 3


def test_a_records_state_is_refused_on_other_data_and_resumes_on_a_copy(folders):
    good, other, copy = folders

    def records(folder):
        return pinring.FixedRecords([str(folder / "first.bin"), str(folder / "good.bin")], record_bytes=2,
                                    order="shuffled", seed=2)

    state = saved(records(good), batch_size=4)
    assert state["format"] == "records" and len(state["contents"]) == 2
    refused_naming("good.bin", lambda: pinring.Loader(records(other), batch_size=4, device="cpu", state=state))
    resume = lambda folder: pinring.Loader(records(folder), batch_size=4, device="cpu", state=state)  # noqa: E731
    with resume(good) as a, resume(copy) as b:
        same(rows(b, 6), rows(a, 6))


def documents(pattern):
    return pinring.Documents(pattern, tokens_per_batch=256, max_seq_len=96, order="shuffled", seed=4)


def doc_steps(loader, n):
    return popped(loader, n, lambda b: (b.step, b.doc_ids.copy(), np.from_dlpack(b["tokens"]).copy()))


@pytest.fixture
def doc_folders(tmp_path):
    """docs/good/ and docs/other/ of two documents shards each, of the same names and sizes
    (other/train_001.bin's tokens reversed), and docs/copy/ (good/ copied)."""
    root = tmp_path / "docs"
    good = write_doc_shards(root / "good", [5000, 4000], seed=1, mean=60)
    write_doc_shards(root / "other", [5000, 4000], seed=1, mean=60)
    shard = root / "other" / "train_001.bin"
    raw = shard.read_bytes()
    shard.write_bytes(raw[:1024] + np.frombuffer(raw[1024:], "<u2")[::-1].tobytes())
    shutil.copytree(root / "good", root / "copy")
    return good, str(root / "other" / "train_*.bin"), str(root / "copy" / "train_*.bin")


def test_a_documents_state_is_refused_on_other_data_and_resumes_on_a_copy(doc_folders):
    good, other, copy = doc_folders
    with pinring.Loader(documents(good), device="cpu") as loader:
        doc_steps(loader, 3)
        state = json.loads(json.dumps(loader.state_dict()))
    assert state["version"] == 3 and len(state["contents"]) == 2
    assert state["contents"][1] == content(pathlib.Path(good).parent / "train_001.bin")
    refused_naming("train_001.bin", lambda: pinring.Loader(documents(other), device="cpu", state=state))
    with pinring.Loader(documents(good), device="cpu", state=state) as a, \
            pinring.Loader(documents(copy), device="cpu", state=state) as b:
        want = doc_steps(a, 4)
        assert want[0][0] == 3
        same(doc_steps(b, 4), want)


def test_a_mixture_state_is_refused_on_other_data_and_resumes_on_a_copy(folders):
    good, other, copy = folders

    def mixture(folder):
        srcs = [pinring.TokenWindows(str(folder / name), seq_len=SEQ, order="shuffled", seed=s)
                for s, name in enumerate(["first.bin", "good.bin"], 1)]
        return pinring.Mixture(srcs, weights=[0.5, 0.5], seed=3)

    state = saved(mixture(good), batch_size=4)
    assert state["version"] == 2
    assert [s["contents"] for s in state["sources"]] == [[content(good / "first.bin")], [content(good / "good.bin")]]
    refused_naming("good.bin", lambda: pinring.Loader(mixture(other), batch_size=4, device="cpu", state=state))
    resume = lambda folder: pinring.Loader(mixture(folder), batch_size=4, device="cpu", state=state)  # noqa: E731
    with resume(good) as a, resume(copy) as b:
        same(rows(b, 6), rows(a, 6))


def test_a_mixture_of_documents_state_is_refused_on_other_data_and_resumes_on_a_copy(doc_folders):
    good, other, copy = doc_folders

    def mixture(pattern):
        folder = pathlib.Path(pattern).parent
        srcs = [pinring.Documents(str(folder / name), tokens_per_batch=256, max_seq_len=96)
                for name in ("train_000.bin", "train_001.bin")]
        return pinring.Mixture(srcs, weights=[0.5, 0.5])

    with pinring.Loader(mixture(good), device="cpu") as loader:
        doc_steps(loader, 3)
        state = json.loads(json.dumps(loader.state_dict()))
    refused_naming("train_001.bin", lambda: pinring.Loader(mixture(other), device="cpu", state=state))
    with pinring.Loader(mixture(good), device="cpu", state=state) as a, \
            pinring.Loader(mixture(copy), device="cpu", state=state) as b:
        same(doc_steps(b, 4), doc_steps(a, 4))


def test_a_state_of_the_version_before_contents_is_refused_by_name(folders, doc_folders):
    good = folders[0]
    old = {k: v for k, v in saved(windows(good), batch_size=4).items() if k != "contents"}
    old["version"] = 2
    with pytest.raises(pinring.CheckpointError, match="a TokenWindows or FixedRecords state of version 2, which "
                       "this build \\(version 3\\) cannot read: .*\"contents\" is missing"):
        pinring.Loader(windows(good), batch_size=4, device="cpu", state=old)
    # One of version 2 with every key is refused by the sampler, by its version.
    with pytest.raises(pinring.CheckpointError, match="the checkpoint version is 2 in the checkpoint but 3 here"):
        pinring.Loader(windows(good), batch_size=4, device="cpu",
                       state=dict(saved(windows(good), batch_size=4), version=2))
    with pinring.Loader(documents(doc_folders[0]), device="cpu") as loader:
        doc_steps(loader, 1)
        state = loader.state_dict()
    old = {k: v for k, v in state.items() if k != "contents"}
    old["version"] = 2
    with pytest.raises(pinring.CheckpointError, match="a Documents state of version 2, which this build "
                       "\\(version 3\\) cannot read: .*\"contents\" is missing"):
        pinring.Loader(documents(doc_folders[0]), device="cpu", state=old)
    srcs = [pinring.TokenWindows(str(good / name), seq_len=SEQ) for name in ("first.bin", "good.bin")]
    mix = saved(pinring.Mixture(srcs), batch_size=4)
    mix["version"] = 1
    for s in mix["sources"]:
        s["version"] = 2
        del s["contents"]
    with pytest.raises(pinring.CheckpointError, match="a Mixture state of version 1, which this build "
                       "\\(version 2\\) cannot read: .*\"contents\" is missing"):
        pinring.Loader(pinring.Mixture(srcs), batch_size=4, device="cpu", state=mix)
