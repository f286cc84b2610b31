"""The Python examples as a user runs them (they need torch: skipped without it)."""

import pathlib
import subprocess
import sys

import pytest

TRAIN_GPT = pathlib.Path(__file__).resolve().parents[1] / "examples" / "train_gpt.py"


def test_train_gpt_check_says_whether_it_passed(tmp_path):
    """Issue 29 item 6: `train_gpt.py --check` prints a line saying it passed (it printed
    nothing on success before); a failed check exits non-zero and says it failed."""
    pytest.importorskip("torch")
    run = subprocess.run(
        [sys.executable, str(TRAIN_GPT), "--synthetic", str(tmp_path / "syn"), "--check",
         "--device", "cpu", "--synthetic-tokens", "400000", "--steps", "200", "--batch", "8",
         "--seq-len", "64"],
        capture_output=True, text=True, timeout=1800,
    )
    if run.returncode == 0:
        assert "check passed: the loss fell by" in run.stdout, run.stdout
    else:
        assert "check passed" not in run.stdout and "failed" in run.stderr, (run.stdout, run.stderr)
