"""rfabric: a packet-level network and fabric emulator for disaggregated RL post-training.

A C++ discrete-event engine simulates every packet through NICs, switch queues, links and
NVLink domains; this package builds fabrics, runs workloads and returns Arrow tables.
"""

from __future__ import annotations

from . import bounds, controllers, cost, pareto, topology, traces, units
from .collective import collective, op_trace
from .errors import SpecError, TraceError
from .flows import Flows
from .forwarding import Forwarding
from .results import Results
from .simulation import EngineConfig, Simulation, simulate
from .spec import CircuitTable, NetworkSpec
from .sweep import sweep
from .topology import Topology

topologies = topology  # DESIGN §11 spells it rf.topologies

__version__ = "0.1.0"

__all__ = [
    "CircuitTable",
    "EngineConfig",
    "Flows",
    "Forwarding",
    "NetworkSpec",
    "Results",
    "Simulation",
    "SpecError",
    "Topology",
    "TraceError",
    "bounds",
    "controllers",
    "collective",
    "op_trace",
    "cost",
    "pareto",
    "simulate",
    "sweep",
    "topologies",
    "topology",
    "traces",
    "units",
    "__version__",
]
