"""docs/cli.md: every `rfabric ...` command of its bash blocks and every Python block runs as
written (in a scratch working folder, where their outputs go)."""

import re
import shlex
from pathlib import Path

import pytest

from rfabric.cli import main

DOC = (Path(__file__).parent.parent / "docs" / "cli.md").read_text()
COMMANDS = [
    line.split("#")[0].strip()
    for block in re.findall(r"```bash\n(.*?)```", DOC, re.S)
    for line in block.splitlines()
    if line.startswith("rfabric ")
]
PYTHON = re.findall(r"```python\n(.*?)```", DOC, re.S)


def test_the_page_has_examples():
    assert len(COMMANDS) >= 6 and len(PYTHON) >= 2


@pytest.mark.parametrize("command", COMMANDS)
def test_command_runs(command, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(shlex.split(command)[1:]) == 0
    assert capsys.readouterr().out


@pytest.mark.parametrize("index", range(len(PYTHON)))
def test_python_block_runs(index, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    exec(compile(PYTHON[index], f"docs/cli.md block {index}", "exec"), {"__name__": "__main__"})
