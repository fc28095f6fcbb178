"""Running the engine: configuration, a steppable Simulation, and simulate(); the packet
backend (every frame) or the flow backend (max-min fair rates, ``backend="flow"``).

Python builds the spec and the flows, the C++ engine runs the event loop with the GIL
released, and results come back as numpy columns wrapped into Arrow tables. Python never
runs per packet or per event; it may run between ``run(until=...)`` epochs.

Modules (docs/python-layers.md): ``setup`` (the workload's
rewrites and a controller's checks), ``core`` (the Simulation class), ``circuits`` (failures
and circuit plans), ``stepping`` (``run``), ``streams`` (rows and samples out of the engine),
``collect`` (``results()``), ``runner`` (``simulate()``). The engine's settings
(EngineConfig) are ``rfabric.config``, re-exported here.
"""

from __future__ import annotations

from ..config import (
    BACKENDS,
    ECMP_MODES,
    ENGINE_FIELDS,
    PYTHON_ONLY,
    EngineConfig,
    as_spec,
    make_config,
)
from .core import Simulation
from .runner import simulate

# the names rfabric.forwarding, rfabric.bounds and rfabric.collective import (before the split)
_as_spec = as_spec
_make_config = make_config

__all__ = [
    "EngineConfig",
    "Simulation",
    "simulate",
    "BACKENDS",
    "ECMP_MODES",
    "ENGINE_FIELDS",
    "PYTHON_ONLY",
    "as_spec",
    "make_config",
]
