"""rfabric: a packet-level network and fabric emulator for disaggregated RL post-training.

A C++ discrete-event engine simulates every packet through NICs, switch queues, links and
NVLink domains; this package builds fabrics, runs workloads and returns Arrow tables.
"""

from __future__ import annotations

try:
    from . import _engine  # noqa: F401  (the compiled engine; the modules below use it)
except ImportError as exc:  # pragma: no cover - exercised in a subprocess by tests/test_cli.py
    import os as _os

    raise ImportError(
        f"rfabric: the compiled engine (rfabric._engine) is not in {_os.path.dirname(__file__)}. "
        "Python most likely imported a source checkout (a script run from the repository root) "
        "instead of the installed package: run from another directory, or install the checkout "
        "itself with `pip install -e .` (needs a C++17 compiler and CMake; the build takes about "
        "a minute on 2 cores)."
    ) from exc

import sys as _sys
import warnings as _warnings

from . import (
    bounds,
    collectives,
    controllers,
    cost,
    jobs,
    pareto,
    placement,
    plot,
    report,
    rewrites,
    sweeps,
    tables,
    topologies,
    traces,
    units,
)
from ._version import __version__
from .collectives import collective, op_trace
from .errors import LayoutFitError, MissingDependency, SimulationError, SpecError, SweepError, TraceError
from .flows import Flows
from .forwarding import Forwarding
from .jobs import Job
from .placement import place
from .results import Results
from .simulation import EngineConfig, Simulation, simulate
from .spec import CircuitTable, NetworkSpec
from .sweeps import sweep
from .tables import format_table
from .topologies import Topology

# One public name per module (docs/api-style.md). `rfabric.topologies` is the fabrics'
# module; its old path `rfabric.topology` still imports it for a release.
_sys.modules.setdefault(__name__ + ".topology", topologies)

# `rfabric.collective` was the module that the function rf.collective shadowed; the module
# is `rfabric.collectives` now, and the old path still imports it for a release (an alias in
# sys.modules does not rebind the function's name here, as importing a submodule would).
_sys.modules.setdefault(__name__ + ".collective", collectives)
# `rf.topology`: the old second name of rf.topologies, deprecated (__getattr__ below).


def __getattr__(name: str):
    if name == "topology":
        _warnings.warn(
            "rf.topology is deprecated: the module is rf.topologies (docs/api-style.md); "
            "rf.topology goes in rfabric 0.3",
            DeprecationWarning,
            stacklevel=2,
        )
        return topologies
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CircuitTable",
    "EngineConfig",
    "Flows",
    "Forwarding",
    "Job",
    "LayoutFitError",
    "MissingDependency",
    "NetworkSpec",
    "Results",
    "Simulation",
    "SimulationError",
    "SpecError",
    "SweepError",
    "Topology",
    "TraceError",
    "bounds",
    "catalog",
    "controllers",
    "collective",
    "collectives",
    "op_trace",
    "cost",
    "format_table",
    "jobs",
    "pareto",
    "place",
    "placement",
    "plot",
    "report",
    "rewrites",
    "simulate",
    "sweep",
    "sweeps",
    "tables",
    "topologies",
    "traces",
    "units",
    "__version__",
]
