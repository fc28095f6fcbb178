"""Every Python example in the README runs as written (from the repository root)."""

import os
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index, tmp_path, capsys):
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        code = BLOCKS[index].replace('"iter.arrow"', repr(str(tmp_path / "iter.arrow")))
        exec(compile(code, f"README.md block {index}", "exec"), {})
    finally:
        os.chdir(cwd)
