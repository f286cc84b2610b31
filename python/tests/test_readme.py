"""The README's examples run as written: the cpu quick start, packed documents, mixing\ndatasets and tracing a loss spike."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def _block(text, heading):
    return re.search(r"```python\n(.*?)```", text.split(heading, 1)[1], re.S).group(1)


def _run(heading, scope=None):
    """Runs the first Python block under `heading` (in `scope`, to continue an earlier
    block's)."""
    exec(compile(_block(README.read_text(), heading), str(README), "exec"), {} if scope is None else scope)


def test_the_cpu_quick_start(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _run("## Quick start (cpu)")
    assert capsys.readouterr().out.strip() == "10 batches"


def test_the_packed_documents_example(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    _run("## Packed documents")
    lines = capsys.readouterr().out.split("\n")
    steps = [line.split() for line in lines if line.strip()]
    assert [int(s[0]) for s in steps] == list(range(8))
    assert [int(s[1]) for s in steps] == [1024] * 5 + [2048] * 3


def test_the_mixing_and_tracing_examples(tmp_path, monkeypatch, capsys):
    """Issue 22: "Mixing datasets" runs as written, and "Tracing a loss spike" continues it."""
    monkeypatch.chdir(tmp_path)
    scope = {}
    _run("## Mixing datasets", scope)
    lines = capsys.readouterr().out.strip().split("\n")
    assert lines[0] == "320 10 [224, 64, 32]"
    assert [int(line.split()[0]) for line in lines[1:6]] == [10, 11, 12, 13, 14]
    assert lines[6] == "[0.5, 0.4, 0.1]"
    _run("## Tracing a loss spike", scope)
    lines = capsys.readouterr().out.strip().split("\n")
    assert len(lines) == 4 and lines[-1] == "[10, 13, 14]"


def test_the_speedrun_example(tmp_path, monkeypatch, capsys):
    """Issue 31: the speedrun settings' example runs as written."""
    monkeypatch.chdir(tmp_path)
    _run("### modded-nanogpt's speedrun")
    lines = [line.split() for line in capsys.readouterr().out.strip().split("\n")]
    assert [(int(a), int(b)) for a, b in lines] == [(0, 0), (0, 1), (1, 0), (1, 1)]
