"""rfabric/cli/parser.py: the parser, main, help and clean errors."""

import pytest

import rfabric as rf
from rfabric.cli import main


def test_cli_errors_are_clean(capsys, tmp_path):
    assert main(["run", str(tmp_path / "missing.toml")]) == 2
    assert "no such topology file" in capsys.readouterr().err
    assert main(["run", "topologies/fat_tree_128_200g.toml", "--trace", str(tmp_path / "none.arrow")]) == 2
    assert "none.arrow" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["demo", "--size", "lots"])
    assert main(["demo", "--model", "no-such-model"]) == 2
    assert "unknown model 'no-such-model'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["collective", "--ranks", "0-3,7-5"])
    assert "range '7-5' runs backwards" in capsys.readouterr().err
    # an incast of no sender used to run nothing and exit 0
    assert main(["run", "topologies/fat_tree_128_200g.toml", "--pattern", "incast", "--fan-in", "0"]) == 2
    assert "--fan-in must be at least 1" in capsys.readouterr().err


def test_importing_a_source_tree_without_the_engine_says_what_to_do(tmp_path):
    # a script run from a checkout's root imports ./rfabric, which has no compiled engine
    # when the package was installed elsewhere: the error says so instead of
    # "cannot import name '_engine'" (-S: no site packages, so no editable-install finder)
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    src = Path(rf.__file__).parent
    shutil.copytree(src, tmp_path / "rfabric", ignore=shutil.ignore_patterns("_engine*", "__pycache__"))
    run = subprocess.run(
        [sys.executable, "-S", "-c", "import rfabric"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode != 0
    assert "the compiled engine (rfabric._engine) is not in" in run.stderr
    assert "pip install -e ." in run.stderr


def test_every_cli_option_has_help_and_shows_its_default():
    import argparse

    from rfabric.cli.parser import _parsers, build_parser

    missing = []
    for sp in _parsers(build_parser()):
        for action in sp._actions:
            if isinstance(action, argparse._SubParsersAction) or action.dest == "help":
                continue
            if not action.help:
                missing.append(f"{sp.prog} {action.option_strings or action.dest}")
    assert not missing
    run = next(p for p in _parsers(build_parser()) if p.prog.endswith(" run"))
    assert "(default: 9216)" in " ".join(run.format_help().split())


def test_python_dash_m_runs_the_command(tmp_path):
    import subprocess
    import sys

    # from another folder, so that the rfabric this suite tests is imported (the installed
    # package in CI; a checkout with its engine built in place when PYTHONPATH names it), not
    # a source tree without the compiled engine
    done = subprocess.run(
        [sys.executable, "-m", "rfabric.cli", "run", "--help"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "all_to_all" in done.stdout and "stage_aware" in done.stdout
