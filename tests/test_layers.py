"""rfabric's Python is layered, without import cycles (issue 24 item 2).

The import graph is read from the sources with ``ast`` (every ``import`` and ``from ...
import``, those inside functions included; ``if TYPE_CHECKING:`` blocks left out), so a lazy
import cannot hide a cycle. Layers, lowest first; a module may import its own layer and the
layers below:

    model        units, validators, errors, catalog, _optional and _graph (helpers), spec,
                 flows, topology, traces, rewrites, placement,
                 the engine, and the spec readers controllers/layout and controllers/forest
    run          simulation, results, timeline, plot, forwarding, the control loop and the controller
                 interface (controllers/base, controllers/loop)
    policy       rfabric.controllers (the controllers and their allocators)
    experiments  sweeps, cost, pareto, bounds, collectives, report, tables
    cli          the command lines and the package's top level

Layers are given by module prefix, so a module split into a package keeps its layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1] / "rfabric"

#: (layer, prefixes), lowest first; the longest matching prefix decides a module's layer
LAYERS = [
    (
        "model",
        [
            "rfabric._engine",
            "rfabric._optional",
            "rfabric._version",
            "rfabric._graph",
            "rfabric.units",
            "rfabric.validators",
            "rfabric.errors",
            "rfabric.catalog",
            "rfabric.spec",
            "rfabric.flows",
            "rfabric.jobs",
            "rfabric.topologies",
            "rfabric.traces",
            "rfabric.rewrites",
            "rfabric.placement",
            "rfabric.controllers.layout",
            "rfabric.controllers.forest",
        ],
    ),
    (
        "run",
        [
            "rfabric.simulation",
            "rfabric.results",
            "rfabric.timeline",
            "rfabric.plot",
            "rfabric.forwarding",
            "rfabric.run",
            "rfabric.config",
            "rfabric.controllers.base",
            "rfabric.controllers.loop",
        ],
    ),
    ("policy", ["rfabric.controllers"]),
    (
        "experiments",
        [
            "rfabric.sweeps",
            "rfabric.cost",
            "rfabric.pareto",
            "rfabric.bounds",
            "rfabric.collectives",
            "rfabric.report",
            "rfabric.tables",
        ],
    ),
    ("cli", ["rfabric.cli", "rfabric.traces.cli", "rfabric"]),
]

#: imports allowed to point up a layer, each with its reason. Compatibility shims import the
#: policy layer lazily, when called, and only there.
UPWARD = {
    # Topology.controller(): kept for callers, implemented as controllers.default_for(self)
    ("rfabric.topologies.base", "rfabric.controllers"),
    # MixNet(demand=D) / plan_for_demand: a fabric built to follow a demand runs MixNet's
    # allocator (rfabric.controllers.regional) at build time
    ("rfabric.topologies.mixnet", "rfabric.controllers.regional"),
}

#: known cycles other work items of issue 24 remove; an edge listed here is not counted when
#: looking for cycles (none left)
CYCLE_EDGES_BEING_REMOVED: set[tuple[str, str]] = set()
#: upward edges other work items of issue 24 remove (none left)
UPWARD_BEING_REMOVED: set[tuple[str, str]] = set()


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def modules() -> dict[str, Path]:
    out = {module_name(p): p for p in sorted(ROOT.rglob("*.py"))}
    out["rfabric._engine"] = None  # the compiled engine: imports nothing from rfabric
    return out


def _type_checking(node) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The rfabric modules ``name`` imports anywhere in its source."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    skip = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            skip |= {id(n) for b in node.body for n in ast.walk(b)}
    out = set()

    def add(target: str):
        # the deepest known module of a dotted target (``a.b.C`` -> ``a.b``)
        while target and target not in known:
            target = target.rpartition(".")[0]
        if target and target != name:
            out.add(target)

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("rfabric"):
                    add(a.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("rfabric"):
                continue
            for a in node.names:
                sub = f"{mod}.{a.name}"
                add(sub if sub in known else mod)
    return out


def graph() -> nx.DiGraph:
    mods = modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        if path is None:
            continue
        for dst in imports(name, path, set(mods)):
            g.add_edge(name, dst)
    return g


def layer_of(module: str) -> int:
    best, level = "", None
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > len(best):
                best, level = p, i
    assert level is not None, f"{module} is in no layer: add it to LAYERS"
    return level


def test_the_graph_sees_lazy_imports():
    # the oracle works: an import inside a function is an edge
    g = graph()
    assert g.has_edge("rfabric.topologies.base", "rfabric.controllers")  # inside controller()
    assert any(b == "rfabric.controllers.allocate" for _, b in g.out_edges("rfabric.controllers.materialize"))
    assert len(g) > 40 and g.number_of_edges() > 100


def test_no_import_cycles():
    # the declared upward shims (UPWARD) close a loop by construction (the policy layer
    # imports the run layer, which imports topologies): they are the only loops allowed
    g = graph()
    g.remove_edges_from(CYCLE_EDGES_BEING_REMOVED | UPWARD)
    cycles = [c for c in nx.simple_cycles(g) if len(c) > 1]
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c + [c[0]]) for c in cycles[:10])


def test_each_layer_imports_only_its_own_and_lower_layers():
    g = graph()
    names = [n for n, _ in LAYERS]
    bad = [
        f"{a} ({names[layer_of(a)]}) imports {b} ({names[layer_of(b)]})"
        for a, b in g.edges
        if layer_of(b) > layer_of(a) and (a, b) not in UPWARD | UPWARD_BEING_REMOVED
    ]
    assert not bad, "imports up a layer:\n" + "\n".join(sorted(bad))


def test_every_allowed_upward_import_still_exists():
    # an exception that is no longer needed is removed from the list
    g = graph()
    assert all(g.has_edge(a, b) for a, b in UPWARD)


def test_controllers_import_no_topology_module():
    g = graph()
    bad = [
        (a, b)
        for a, b in g.edges
        if a.startswith("rfabric.controllers")
        and (b == "rfabric.topologies" or b.startswith("rfabric.topologies."))
    ]
    assert not bad
