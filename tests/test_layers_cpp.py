"""The C++ tree's include rule (docs/architecture.md): each folder of csrc/ includes only its
own headers and those of the layers below it, so the layout is the architecture.

engine <- fabric <- coll <- {packet, flow} <- bindings: the collective executor sees a network
only through fabric's FlowFabric, the two backends never include each other, and nothing
below bindings sees pybind11.
"""

import re
from pathlib import Path

CSRC = Path(__file__).resolve().parent.parent / "csrc"

#: folder -> the folders its files may include (its own among them)
ALLOWED = {
    "engine": {"engine"},
    "fabric": {"engine", "fabric"},
    "coll": {"engine", "fabric", "coll"},
    "packet": {"engine", "fabric", "coll", "packet"},
    "flow": {"engine", "fabric", "coll", "flow"},
    "bindings": {"engine", "fabric", "coll", "packet", "flow", "bindings"},
}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _sources():
    return sorted(p for p in CSRC.rglob("*") if p.suffix in (".hpp", ".cpp"))


def test_every_folder_has_a_rule():
    folders = {p.relative_to(CSRC).parts[0] for p in _sources()}
    assert folders == set(ALLOWED)


def test_includes_run_down_the_layers():
    bad = []
    for path in _sources():
        layer = path.relative_to(CSRC).parts[0]
        for inc in INCLUDE.findall(path.read_text()):
            target = inc.split("/")[0]
            assert (CSRC / inc).exists(), f"{path.relative_to(CSRC)}: includes missing {inc}"
            if target not in ALLOWED[layer]:
                bad.append(f"{path.relative_to(CSRC)} includes {inc}")
    assert not bad, "includes running back up the layers:\n" + "\n".join(bad)


def test_rule_catches_a_violation(tmp_path):
    # the checker itself: a flow file including a packet header is flagged
    text = '#include "packet/network.hpp"\n#include "fabric/spec.hpp"\n'
    found = [inc for inc in INCLUDE.findall(text) if inc.split("/")[0] not in ALLOWED["flow"]]
    assert found == ["packet/network.hpp"]


def test_no_python_below_bindings():
    for path in _sources():
        if path.relative_to(CSRC).parts[0] != "bindings":
            assert "pybind11" not in path.read_text(), path
