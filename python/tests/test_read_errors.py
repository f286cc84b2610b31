"""Reads that a real file system fails (issue 28): a FUSE pass-through answering EIO on a
byte range of a shard (eio_fs.py), as NFS, Lustre, gcsfuse or s3fs answer a read they
cannot serve. Read through a memory map, such a page was a SIGBUS that pinring's handler
turned into zeros (delivered as tokens) or into "it shrank to N bytes from the N it had".
Read by position it is what it is: pop raises SourceError saying the file could not be
read, after the batches before it; a new run over the same source reads the file again;
an index build that meets it fails and caches nothing.

Skipped, with the reason, where FUSE cannot be mounted (no /dev/fuse, no mfusepy or
libfuse3, neither root nor fusermount3); failed instead with PINRING_REQUIRE_FUSE=1."""

import errno
import os

import numpy as np
import pytest

import eio_fs
import pinring
from conftest import BOUND, write_shard

T = 128 * 1024  # tokens a window (256 KiB of the shard), plus one
WINDOWS = 12
B = 2
BAD = 5  # the window whose middle page fails: batch 2, sample 1


def unavailable(why):
    """Skips the test (fails it where PINRING_REQUIRE_FUSE=1, as .ci/run sets where FUSE
    works)."""
    message = f"needs a FUSE file system that fails reads: {why}"
    if os.environ.get("PINRING_REQUIRE_FUSE") == "1":
        pytest.fail(f"PINRING_REQUIRE_FUSE=1, but it {message}")
    pytest.skip(message)


@pytest.fixture
def failing(tmp_path):
    """mount(name, start, end): the failing pass-through of tmp_path/src, mounted; yields
    (the mounted folder, heal) where heal() makes every read succeed from then on."""
    why = eio_fs.missing()
    if why:
        unavailable(why)
    src, mnt, control = tmp_path / "src", tmp_path / "mnt", tmp_path / "failing"
    src.mkdir()
    control.write_bytes(b"")
    mounts = []

    def mount(name, start, end):
        cm = eio_fs.mounted(str(src), str(mnt), name, start, end, str(control))
        try:
            cm.__enter__()
        except eio_fs.Unavailable as e:
            unavailable(e)
        mounts.append(cm)
        return mnt, lambda: control.unlink()

    mount.src = src
    yield mount
    for cm in mounts:
        cm.__exit__(None, None, None)


def tokens():
    return (np.arange(WINDOWS * T + 1) % 50_021).astype(np.uint16)


def bad_page():
    middle = 1024 + 2 * (BAD * T + T // 2)
    page = middle - middle % 4096
    return page, page + 4096


@pytest.mark.parametrize("dtype", ["uint16", "int32"])
def test_a_window_the_file_system_fails_is_a_source_error_that_says_it_could_not_be_read(
    failing, dtype
):
    t = tokens()
    write_shard(failing.src / "train_000.bin", t)
    mnt, heal = failing("train_000.bin", *bad_page())
    path = str(mnt / "train_000.bin")
    src = pinring.TokenWindows(path, seq_len=T, dtype=dtype)

    def run():
        loader = pinring.Loader(src, batch_size=B, device="cpu", decode_threads=1, epochs=1)
        seqs = []
        try:
            while (batch := loader.pop(timeout=BOUND)) is not None:
                got = np.from_dlpack(batch)
                first = batch.seq * B
                want = np.stack([t[w * T:(w + 1) * T + 1] for w in range(first, first + B)])
                assert np.array_equal(got, want), f"batch {batch.seq} holds other tokens"
                seqs.append(batch.seq)
                batch.release()
        except pinring.SourceError as e:
            return seqs, e
        finally:
            loader.close()
        return seqs, None

    seqs, err = run()
    assert err is not None, "the failing read was delivered as tokens"
    assert seqs == list(range(BAD // B)), "the batches before it, in order"
    message = str(err)
    assert err.path == path and path in message
    assert "could not be read" in message and "os error 5" in message, message
    assert f"(batch {BAD // B}, sample {BAD % B})" in message, message
    assert "shrank" not in message and "must not change" not in message, message
    assert err.errno == errno.EIO, err.errno
    # The file system reads again: a new run over the same source object, every batch.
    heal()
    seqs, err = run()
    assert err is None, err
    assert seqs == list(range(WINDOWS // B))


def test_an_index_build_the_file_system_fails_raises_and_caches_nothing(failing, tmp_path):
    bos = 7
    t = np.where(np.arange(200_000) % 10 == 0, bos, 100 + np.arange(200_000) % 50)
    write_shard(failing.src / "docs.bin", t)
    page = 1024 + 2 * 100_000
    page -= page % 4096
    mnt, heal = failing("docs.bin", page, page + 4096)
    cache = tmp_path / "cache"

    def build():
        # Shuffled: every shard is indexed when the source is made.
        return pinring.Documents(str(mnt / "docs.bin"), bos=bos, tokens_per_batch=19,
                                 max_seq_len=64, order="shuffled", index_cache=cache)

    with pytest.raises(pinring.SourceError) as info:
        build()
    assert "could not be read" in str(info.value), str(info.value)
    # (Lock files, `.NAME.lock`, stay beside the index files.)
    indexes = lambda: [n for n in os.listdir(cache) if not n.startswith(".")]  # noqa: E731
    assert not cache.exists() or indexes() == [], "an index of a failed read was cached"
    heal()
    docs = build()
    assert docs.documents == 20_000
    assert len(indexes()) == 1
