"""rfabric/cli/collective.py: rank lists and the nccl-tests-style table."""

import argparse

import pytest

from rfabric.cli import main
from rfabric.cli.collective import _ranks


def test_rank_lists():
    assert _ranks("0-3") == [0, 1, 2, 3]
    assert _ranks("0,8,16") == [0, 8, 16]
    assert _ranks("0-1,6-7") == [0, 1, 6, 7]
    for bad in ("a-3", "4-2", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            _ranks(bad)


def test_the_table_has_a_row_per_size(capsys):
    assert main(["collective", "--gpus", "8", "-b", "64KiB", "-e", "256KiB", "--backend", "flow"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# rfabric collective: all_reduce (auto) on ")
    assert "backend flow" in out
    for size in ("65536", "131072", "262144"):
        assert size in out
