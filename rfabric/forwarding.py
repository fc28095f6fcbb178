"""A fabric's forwarding without a simulation: paths between GPUs on its routing tables.

``Forwarding`` holds the engine's forwarding layer alone (``csrc/fabric/forwarding.hpp``): the
topology, each channel's state (links up or down, circuits in place) and the routing tables,
with no packets, queues or event loop. Its paths are the ones the packet engine's frames take
on the same fabric state (``Simulation.engine.trace_path``), so controllers, cost models and
a flow-level backend can ask "which links does GPU a's traffic to GPU b cross" as links fail
and circuits change, in microseconds rather than a simulation.
"""

from __future__ import annotations

import numpy as np

from . import _engine
from .config import EngineConfig
from .config import as_spec as _as_spec
from .config import make_config as _make_config
from .errors import SpecError
from .validators import integer


class Forwarding:
    """The forwarding state of a fabric: topology, link and circuit states, routing tables.

    Parameters
    ----------
    topology : Topology or NetworkSpec
    config : EngineConfig, optional
        Its routing (``ecmp``; default: the fabric's own, ``NetworkSpec.routing``) and
        ``mtu_bytes`` are what forwarding reads.
    **settings
        Any EngineConfig field, e.g. ``ecmp="flow"``.

    Notes
    -----
    Paths follow one frame of a flow: ECMP hash ``flow_hash``, sequence number 0, and idle
    queues where routing is adaptive (the packet engine's adaptive choices see live queues).
    Around a failed NIC the engine spreads a flow's frames over its server's working NICs
    frame by frame; ``path`` gives the first frame's.
    """

    def __init__(self, topology, config: EngineConfig | None = None, **settings):
        self.spec = _as_spec(topology)
        self.config = _make_config(config, settings)
        #: the routing the tables follow: the config's ``ecmp``, else the fabric's own
        self.routing = self.config.ecmp if self.config.ecmp is not None else self.spec.routing
        self._fwd = _engine.Forwarding(self.spec.arrays(), self.config.to_engine(self.spec.routing))

    @property
    def num_gpus(self) -> int:
        return self._fwd.num_gpus

    def _check_pair(self, src: int, dst: int) -> tuple[int, int]:
        n = self._fwd.num_gpus
        for name, g in (("src", src), ("dst", dst)):
            integer(g, f"{name} (a GPU id)", lo=0, hi=n - 1)
        if src == dst:
            raise SpecError(f"src and dst are both GPU {src}")
        return int(src), int(dst)

    def ports(self, src: int, dst: int, flow_hash: int = 0) -> np.ndarray:
        """Ports (uint32; port ``2 l + d`` is direction ``d`` of link row ``l``) a frame from
        GPU ``src`` to GPU ``dst`` crosses, for the ECMP hash ``flow_hash``. The same as
        ``Simulation.engine.trace_path`` on the same fabric state."""
        src, dst = self._check_pair(src, dst)
        return self._fwd.path(src, dst, int(flow_hash) & 0xFFFFFFFF)

    def path(self, src: int, dst: int, flow_hash: int = 0) -> np.ndarray:
        """Link rows (int64, rows of ``spec.links``) the path from ``src`` to ``dst`` crosses,
        in order. A port facing an optical device stands for its whole circuit chain; its row
        is the first link of the chain."""
        return (self.ports(src, dst, flow_hash) // 2).astype(np.int64)

    def path_cost(self, src: int, dst: int) -> tuple[int, int]:
        """(latency_ps, rate_bps) of the path from ``src`` to ``dst`` (hash 0): propagation
        plus per-hop processing, and the slowest channel's rate."""
        src, dst = self._check_pair(src, dst)
        return tuple(self._fwd.path_cost(src, dst))

    def set_link_state(self, link: int, up: bool) -> None:
        """Take link row ``link`` down (``up=False``) or up; the tables are rebuilt at once."""
        self._fwd.set_link_state(int(link), bool(up))

    def fail_link(self, link: int) -> None:
        """Take link row ``link`` down (as ``Simulation.fail_link``)."""
        self.set_link_state(link, False)

    def restore_link(self, link: int) -> None:
        """Bring link row ``link`` back up."""
        self.set_link_state(link, True)

    def fail_nic(self, gpu: int) -> None:
        """Fail GPU ``gpu``'s NIC link: its traffic relays over its server's other NICs."""
        self.fail_link(self.spec.nic_link(gpu))

    def apply_circuits(self, plan) -> tuple[int, int]:
        """Switch to circuit plan ``plan`` (a CircuitTable) at once: circuits not in it are
        removed, new ones carry light immediately (no ``t_ocs`` here: there is no clock).
        Returns (circuits added, circuits removed)."""
        from .spec import CircuitTable

        if not isinstance(plan, CircuitTable):
            raise SpecError(f"plan must be a CircuitTable, got {type(plan).__name__}")
        self.spec.validate_circuits(plan, where="apply_circuits")
        added, removed = self._fwd.set_plan(
            plan.ocs.astype(np.uint32), plan.a.astype(np.uint32), plan.b.astype(np.uint32)
        )
        return int(added), int(removed)

    def current_circuits(self):
        """The circuits in place as a CircuitTable."""
        from .spec import CircuitTable

        flat = self._fwd.current_circuits().reshape(-1, 3).astype(np.int64)
        return CircuitTable.build(flat[:, 0], flat[:, 1], flat[:, 2])

    def channels(self) -> dict[str, np.ndarray]:
        """Per-port columns: ``link_id``, ``src`` and ``dst`` nodes (a port facing an optical
        device reaches the far end of its circuit chain), ``up`` (carries traffic now),
        ``rate_bps`` and ``latency_ps`` (of the chain: slowest rate, summed propagation)."""
        d = self._fwd.channels()
        d["up"] = d["up"].astype(bool)
        return d
