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
