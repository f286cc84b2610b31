"""A shard that changes under a running loader (issue 19 item 1, the Python half): pop
raises pinring.SourceError naming the file and the change, after the batches before it,
and the process survives (read through a memory map, it once died of SIGBUS; files are read
by position now). Each case runs in a child process, so that a crash fails the test instead
of killing pytest. A read the file system fails is another error (test_read_errors.py)."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import BOUND, write_shard

CHILD = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    import pinring

    path, mode = sys.argv[1], sys.argv[2]
    src = pinring.TokenWindows(path, seq_len=1023)
    # One host slot and one device slot: at most two batches are decoded ahead.
    loader = pinring.Loader(src, batch_size=4, host_slots=1, device_slots=1, decode_threads=1)
    first = loader.pop(timeout=30)
    assert first.seq == 0
    first.release()
    if mode == "truncate":
        os.truncate(path, 1024 + 2 * 4096)  # the header and 4096 tokens: most windows gone
    else:  # replace: another, shorter shard written in its place
        header = np.zeros(256, dtype="<i4")
        header[:3] = [20240520, 1, 4096]
        with open(path, "r+b") as f:
            f.write(header.tobytes() + np.arange(4096, dtype="<u2").tobytes())
            f.truncate()
    seqs = [0]
    try:
        while True:
            b = loader.pop(timeout=30)
            if b is None:
                print("END", seqs, flush=True)
                break
            seqs.append(b.seq)
            b.release()
    except pinring.SourceError as e:
        print("SOURCE_ERROR", json.dumps({"seqs": seqs, "path": e.path, "message": str(e),
                                          "errno": e.errno}), flush=True)
    loader.close()
    print("ALIVE", flush=True)
    """
)


@pytest.mark.parametrize("mode", ["truncate", "replace"])
def test_a_shard_changed_mid_run_is_a_source_error_naming_it(tmp_path, mode):
    path = write_shard(tmp_path / "train_000.bin", np.arange(2_000_000) % 60000)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    run = subprocess.run(
        [sys.executable, str(script), path, mode], capture_output=True, text=True, timeout=BOUND * 4
    )
    assert run.returncode == 0, f"the process died (exit {run.returncode}): {run.stderr[-2000:]}"
    lines = run.stdout.splitlines()
    assert lines[-1] == "ALIVE", run.stdout
    assert lines[0].startswith("SOURCE_ERROR "), run.stdout
    got = json.loads(lines[0].split(" ", 1)[1])
    assert got["path"] == path and path in got["message"]
    # A change, said as one: not an I/O error.
    assert "must not change" in got["message"], got["message"]
    assert "could not be read" not in got["message"], got["message"]
    assert got["errno"] is None
    # Batches before the failure were delivered, in order.
    assert got["seqs"] == list(range(len(got["seqs"])))
