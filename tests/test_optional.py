"""Optional dependencies (rfabric/_optional.py, docs/api-style.md "Extras").

rfabric's core needs numpy and pyarrow only: a subprocess that cannot import any optional
package must still import rfabric, validate and run a fabric, and get, at each optional
feature, a MissingDependency naming the extra that installs it. The numpy connected
components that replaced scipy's in spec validation are checked against networkx.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rfabric._graph import connected_components
from rfabric._optional import EXTRAS, MissingDependency, _PlainBar, progress_bar, require

ROOT = Path(__file__).resolve().parents[1]

# Every optional package, blocked at import by a meta-path finder; the script prints one
# line per check and the test reads them.
_SCRIPT = textwrap.dedent(
    """
    import importlib.abc, sys
    BLOCK = ("scipy", "matplotlib", "google", "tqdm", "ray", "pandas", "networkx", "plotly")
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path, target=None):
            if name.split(".")[0] in BLOCK:
                raise ImportError(f"blocked: {name}")
    sys.meta_path.insert(0, Block())

    import rfabric as rf
    fab = rf.topologies.FatTree(16)
    res = rf.simulate(fab, rf.Flows.permutation(16, "1MiB", seed=1))
    print("simulate", res.run["makespan_ps"] > 0)
    def missing(what, call):
        try:
            call()
        except rf.MissingDependency as exc:
            print(what, isinstance(exc, ImportError), exc)
        else:
            print(what, "no error")
    missing("bounds", lambda: rf.bounds.collective_bound(fab, "all_reduce", "1MiB"))
    missing("chakra", lambda: rf.traces.importers.chakra.read(sys.argv[1]))
    missing("chakra-node", lambda: rf.traces.importers.chakra.Node)
    missing("graph", lambda: fab.to_spec().to_networkx())
    import pyarrow as pa
    missing("report", lambda: rf.report.render(pa.table({"fabric": ["FT"]})))
    from rfabric._optional import progress_bar
    class TTY:  # a terminal: without tqdm, the plain bar
        def isatty(self): return True
        def write(self, text): pass
        def flush(self): pass
    print("bar", type(progress_bar(3, desc="sweep", unit="point", file=TTY())).__name__)
    print("loaded", sorted({m.split(".")[0] for m in sys.modules} & set(BLOCK)))
    """
)


def test_rfabric_runs_without_any_optional_package(tmp_path):
    # the rfabric this test imported (the installed package in CI, a checkout with its engine
    # here), not necessarily ROOT's source tree, which may hold no compiled engine
    import rfabric

    pkg_parent = str(Path(rfabric.__file__).resolve().parents[1])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pkg_parent, os.environ.get("PYTHONPATH", "")]))
    run = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr
    lines = dict(line.split(" ", 1) for line in run.stdout.splitlines())
    assert lines["simulate"] == "True"
    assert lines["bounds"] == (
        "True rf.bounds needs scipy, which is not installed: pip install 'rfabric[lp]' (or scipy)"
    )
    assert lines["chakra"].startswith("True rf.traces.importers.chakra (Chakra ET files) needs google")
    assert "pip install 'rfabric[chakra]' (or protobuf)" in lines["chakra"]
    assert "pip install 'rfabric[chakra]'" in lines["chakra-node"]
    assert lines["graph"] == (
        "True NetworkSpec.to_networkx needs networkx, which is not installed: "
        "pip install 'rfabric[graph]' (or networkx)"
    )
    assert lines["report"] == (
        "True rf.report needs plotly, which is not installed: pip install 'rfabric[report]' (or plotly)"
    )
    assert lines["bar"] == "_PlainBar"
    assert lines["loaded"] == "[]"


def test_extras_match_pyproject():
    """_optional.EXTRAS names the same extras and packages as pyproject.toml, and [test]
    installs every one of them (each optional feature has its tests)."""
    with open(ROOT / "pyproject.toml", "rb") as fh:
        project = tomllib.load(fh)["project"]
    extras = project["optional-dependencies"]

    def names(reqs):
        return {r.split(">")[0].split("=")[0].split("[")[0].strip() for r in reqs}

    for extra, (packages, _) in EXTRAS.items():
        assert names(extras[extra]) == set(packages), extra
    assert set(extras) - set(EXTRAS) == {"test", "lint"}
    test_needs = names(extras["test"])
    for extra, (packages, _) in EXTRAS.items():
        # no test converts to pandas (pyarrow's own to_pandas()); docs builds the site, which
        # no test imports (.ci/docs installs it and runs mkdocs build --strict)
        if extra not in ("pandas", "docs"):
            assert set(packages) <= test_needs, extra
    assert names(project["dependencies"]) == {"numpy", "pyarrow"}


def test_require_names_the_extra():
    assert require("math", "lp", "x").sqrt(4) == 2
    with pytest.raises(MissingDependency, match=r"feature X needs no_such_pkg_rf, .*'rfabric\[plot\]'"):
        require("no_such_pkg_rf.sub", "plot", "feature X")
    with pytest.raises(ValueError, match="unknown extra 'nope'"):
        require("math", "nope", "x")


def test_plain_bar_counts_to_the_total(capsys):
    bar = _PlainBar(4, initial=1, desc="sweep", unit="point")
    bar.set_postfix_str("fat_tree 200Gbps 16 GPUs", refresh=False)
    for _ in range(3):
        bar.update(1)
    bar.close()
    err = capsys.readouterr().err
    last = err.rstrip("\n").split("\r")[-1]
    assert last.startswith("sweep: [" + "#" * 30 + "] 4/4 point")
    assert "fat_tree 200Gbps 16 GPUs" in last
    assert "1/4 point" in err.split("\r")[1]  # drawn at the start, with the resumed point


def test_progress_bar_is_tqdm_on_a_terminal_when_installed():
    tqdm = pytest.importorskip("tqdm")
    tty = io.StringIO()
    tty.isatty = lambda: True
    bar = progress_bar(2, desc="sweep", unit="point", file=tty)
    try:
        assert isinstance(bar, tqdm.tqdm)
    finally:
        bar.close()


@settings(max_examples=200, deadline=None)
@given(
    st.integers(1, 40).flatmap(
        lambda n: st.tuples(
            st.just(n), st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=60)
        )
    )
)
def test_connected_components_match_networkx(case):
    n, edges = case
    label = connected_components(n, [a for a, _ in edges], [b for _, b in edges])
    g = nx.Graph()
    g.add_nodes_from(range(n))
    g.add_edges_from(edges)
    for comp in nx.connected_components(g):
        members = sorted(comp)
        assert set(label[members].tolist()) == {members[0]}  # one label: the smallest id


def test_connected_components_of_a_long_shuffled_chain():
    """The worst case for label propagation; hooking with pointer jumping ends in few rounds."""
    n = 100_000
    order = np.random.default_rng(3).permutation(n)
    label = connected_components(n, order[:-1], order[1:])
    assert (label == 0).all()
    label = connected_components(n + 1, order[:-1], order[1:])  # node n is alone
    assert label[n] == n and (label[:n] == 0).all()
