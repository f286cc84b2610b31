"""The README's cpu quick start runs as written."""

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[1] / "README.md"


def test_the_cpu_quick_start(tmp_path, monkeypatch, capsys):
    text = README.read_text()
    section = text.split("## Quick start (cpu)", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {})
    assert capsys.readouterr().out.strip() == "10 batches"


def test_the_packed_documents_example(tmp_path, monkeypatch, capsys):
    text = README.read_text()
    section = text.split("## Packed documents", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    monkeypatch.chdir(tmp_path)
    exec(compile(code, str(README), "exec"), {})
    lines = capsys.readouterr().out.split("\n")
    steps = [line.split() for line in lines if line.strip()]
    assert [int(s[0]) for s in steps] == list(range(8))
    assert [int(s[1]) for s in steps] == [1024] * 5 + [2048] * 3
