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

from . import bounds, controllers, cost, pareto, plot, rewrites, sweeps, topology, traces, units
from .collective import collective, op_trace
from .errors import LayoutFitError, SpecError, SweepError, TraceError
from .flows import Flows
from .forwarding import Forwarding
from .results import Results
from .simulation import EngineConfig, Simulation, simulate
from .spec import CircuitTable, NetworkSpec
from .sweeps import sweep
from .topology import Topology

topologies = topology  # DESIGN §11 spells it rf.topologies

__version__ = "0.1.0"

__all__ = [
    "CircuitTable",
    "EngineConfig",
    "Flows",
    "Forwarding",
    "LayoutFitError",
    "NetworkSpec",
    "Results",
    "Simulation",
    "SpecError",
    "SweepError",
    "Topology",
    "TraceError",
    "bounds",
    "controllers",
    "collective",
    "op_trace",
    "cost",
    "pareto",
    "plot",
    "rewrites",
    "simulate",
    "sweep",
    "sweeps",
    "topologies",
    "topology",
    "traces",
    "units",
    "__version__",
]
