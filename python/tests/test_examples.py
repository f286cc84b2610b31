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


def test_train_gpt_packed_bigram_matches_its_reference_and_a_wrong_hash_differs(tmp_path):
    """Issue 31: `train_gpt.py --packed --bigram` (the bigram embedding fed by pinring's
    bigram_inputs) and `--reference` (fed by master's get_bigram_hash) give the same loss
    at every step; a reference hashing with another bigram_vocab_size does not. (Steps of at
    least 300 tokens: below that master's max_num_docs rule gives 0.)"""
    pytest.importorskip("torch")
    common = [sys.executable, str(TRAIN_GPT), "--packed", "--bigram", "--synthetic", str(tmp_path / "docs"),
              "--device", "cpu", "--steps", "10", "--tokens-per-batch", "384", "--max-seq-len", "64",
              "--schedule", "5:512:128"]
    losses = tmp_path / "bigram.npy"

    def run(*extra):
        return subprocess.run(common + list(extra), capture_output=True, text=True, timeout=1800)

    first = run("--losses-out", str(losses))
    assert first.returncode == 0, (first.stdout[-2000:], first.stderr[-2000:])
    same = run("--reference", "--compare", str(losses))
    assert same.returncode == 0 and ": MATCH" in same.stdout, (same.stdout[-2000:], same.stderr[-2000:])
    other = run("--reference", "--bigram-vocab", "8191", "--compare", str(losses))
    assert other.returncode != 0 and ": DIFFER" in other.stdout, (other.stdout[-2000:], other.stderr[-2000:])


def test_train_gpt_refuses_bigram_where_it_does_not_apply(tmp_path):
    """--bigram without --packed, with --ddp --packed (a Mixture takes no bigram hash), or
    with a bigram vocabulary the hash cannot use: refused, saying why, before any work."""
    pytest.importorskip("torch")
    base = [sys.executable, str(TRAIN_GPT), "--synthetic", str(tmp_path / "never"), "--device", "cpu"]
    for extra, says in [(["--bigram"], "--bigram goes with --packed"),
                        (["--packed", "--ddp", "--bigram"], "--bigram runs with --packed on one process"),
                        (["--packed", "--bigram", "--bigram-vocab", "1"], "--bigram-vocab 1")]:
        run = subprocess.run(base + extra, capture_output=True, text=True, timeout=600)
        assert run.returncode != 0 and says in run.stderr, (extra, run.stderr[-2000:])
    assert not (tmp_path / "never").exists(), "nothing was written"
