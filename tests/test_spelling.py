"""One spelling of names (issue 25 item 5): underscores everywhere, the hyphenated spelling
still accepted wherever a name is typed (command-line choices, sweeps, rf.collective,
rf.bounds), and giving the same result."""

import argparse

import pyarrow.parquet as pq
import pytest

import rfabric as rf
from rfabric import catalog
from rfabric.cli import main
from rfabric.cli.parser import _parsers, build_parser


def test_every_cli_choice_with_an_underscore_takes_its_hyphenated_spelling():
    seen = []
    for parser in _parsers(build_parser()):
        for action in parser._actions:
            choices = action.choices
            if not choices or isinstance(choices, dict) or isinstance(action, argparse._SubParsersAction):
                continue
            for choice in choices:
                if isinstance(choice, str) and "_" in choice:
                    assert action.type is not None, (parser.prog, action.dest)
                    assert action.type(choice.replace("_", "-")) == choice, (parser.prog, action.dest)
                    seen.append((parser.prog.split()[-1], action.dest))
    # the ones there are today (a new one is covered by the loop above)
    assert {
        ("run", "pattern"),
        ("run", "controller"),
        ("collective", "op"),
        ("generate", "weight_sync"),
    } <= set(seen)


def test_run_pattern_all_to_all_either_spelling(tmp_path):
    outs = []
    for spelling in ("all_to_all", "all-to-all"):
        out = tmp_path / spelling
        assert (
            main(["run", "FT", "--gpus", "8", "--pattern", spelling, "--size", "16KiB", "-o", str(out)]) == 0
        )
        outs.append(pq.read_table(out.with_suffix(".flows.parquet")))
    assert outs[0].equals(outs[1]) and outs[0].num_rows == 8 * 7


def test_collectives_either_spelling(capsys):
    fab = rf.topologies.FatTree(8)
    a = rf.collective(fab, "all-to-all", sizes=[1 << 16])
    b = rf.collective(fab, "all_to_all", sizes=[1 << 16])
    assert a.equals(b) and a["kind"][0].as_py() == "all_to_all"
    assert rf.collectives.op_trace("all-to-all", range(4), 1024).equals(
        rf.collectives.op_trace("all_to_all", range(4), 1024)
    )
    assert main(["collective", "--gpus", "8", "--op", "all-to-all", "-b", "64KiB", "-e", "64KiB"]) == 0
    assert "all_to_all" in capsys.readouterr().out
    assert catalog.canonical("Reduce-Scatter", "collective") == "reduce_scatter"
    with pytest.raises(rf.TraceError, match="unknown kind"):
        rf.collective(fab, "all-to-none", sizes=[1 << 16])


def test_sweep_patterns_either_spelling():
    from rfabric.sweeps import pattern_flows

    a = pattern_flows("all-to-all", 8, 1024, seed=1)
    b = pattern_flows("all_to_all", 8, 1024, seed=1)
    for col in ("src", "dst", "size_bytes", "start_ps"):
        assert (getattr(a, col) == getattr(b, col)).all()
    assert len(a) == 8 * 7


def test_bounds_either_spelling():
    pytest.importorskip("scipy")
    fab = rf.topologies.FatTree(8)
    assert rf.bounds.collective_bound(fab, "all-to-all", "1MiB") == rf.bounds.collective_bound(
        fab, "all_to_all", "1MiB"
    )
