"""MixNet's circuit allocation: the greedy its topology manager runs inside each regional OCS.

Read from a spec only (what :class:`rfabric.topologies.MixNet` emits: OCS devices whose ports
are GPU NICs), so that :class:`~rfabric.controllers.MixNetController` and
``MixNet.plan_for_demand`` share one implementation and neither the controller nor this
module imports a topology module.
"""

from __future__ import annotations

import numpy as np

from ..errors import SpecError
from ..spec import NODE_KINDS, CircuitTable, NetworkSpec

__all__ = ["Regions", "greedy_circuits", "plan_for_demand"]


def greedy_circuits(demand, free) -> list[tuple[int, int]]:
    """MixNet's greedy bottleneck-pair allocation inside one region.

    One circuit at a time goes to the server pair ``i < j`` with the largest
    ``(D[i, j] + D[j, i]) / (circuits it has + 1)`` among pairs with demand and a free OCS
    NIC at both servers (lowest ``(i, j)`` on ties); stops when no such pair is left.

    Parameters
    ----------
    demand : array_like, shape (r, r)
        Bytes between the region's servers (row = sender); the diagonal is ignored.
    free : array_like of int, shape (r,)
        OCS NICs each server may use.

    Returns
    -------
    list of (i, j)
        The circuits in the order they were chosen (server indices within the region).
    """
    w = np.asarray(demand, dtype=np.float64)
    w = w + w.T
    r = len(w)
    np.fill_diagonal(w, 0)
    free = np.asarray(free, dtype=np.int64).copy()
    have = np.zeros((r, r))
    lower = np.tril(np.full((r, r), -1.0))
    out = []
    while True:
        score = np.where((free[:, None] > 0) & (free[None, :] > 0) & (w > 0), w / (have + 1), -1.0)
        score = np.triu(score, 1) + lower
        i, j = np.unravel_index(int(np.argmax(score)), score.shape)
        if score[i, j] <= 0:
            break
        out.append((int(i), int(j)))
        free[i] -= 1
        free[j] -= 1
        have[i, j] += 1
    return out


class Regions:
    """Regional OCS devices of a MixNet spec: per device, its servers and their OCS NIC links."""

    def __init__(self, spec: NetworkSpec, who: str):
        kind = spec.nodes.kind
        gpu, ocs = NODE_KINDS["gpu"], NODE_KINDS["ocs"]
        src, dst = spec.links.src, spec.links.dst
        server = spec.nodes.server
        self.devices: list[int] = []
        self.servers: list[np.ndarray] = []  # per device: servers, ascending
        self.ports: list[list[list[int]]] = []  # per device, per server: NIC links in GPU order
        self.region_of_server: dict[int, int] = {}
        for dev in np.flatnonzero(kind == ocs).tolist():
            links = np.flatnonzero((src == dev) | (dst == dev))
            far = np.where(src[links] == dev, dst[links], src[links])
            nic = kind[far] == gpu
            if not nic.any():
                continue
            links, far = links[nic], far[nic]
            srv = server[far].astype(np.int64)
            order = np.lexsort((far, srv))
            links, far, srv = links[order], far[order], srv[order]
            members = np.unique(srv)
            self.devices.append(int(dev))
            self.servers.append(members)
            self.ports.append([links[srv == s].tolist() for s in members.tolist()])
            for s in members.tolist():
                self.region_of_server[s] = len(self.devices) - 1
        if not self.devices:
            raise SpecError(
                f"{who}: fabric {spec.name!r} has no OCS whose ports are GPU NICs (a MixNet regional OCS)"
            )
        self.gpu_server = server[spec.gpu_nodes].astype(np.int64)


def plan_for_demand(spec: NetworkSpec, demand, who: str = "MixNet") -> CircuitTable:
    """The circuit plan that follows server x server traffic ``demand`` on a MixNet spec:
    :func:`greedy_circuits` inside each region (its servers' OCS NICs as budgets, every
    circuit on each server's next NIC in GPU order); traffic between regions gets none.

    ``demand`` must be a (servers, servers) array of finite bytes (checked by the caller:
    ``MixNet.plan_for_demand``)."""
    reg = Regions(spec, who)
    d = np.asarray(demand, dtype=np.float64)
    rows = []
    for r, dev in enumerate(reg.devices):
        members = reg.servers[r]
        ports = [list(p) for p in reg.ports[r]]
        w = d[np.ix_(members, members)]
        for i, j in greedy_circuits(w, [len(p) for p in ports]):
            rows.append((dev, ports[i].pop(0), ports[j].pop(0)))
    if not rows:
        return CircuitTable.empty()
    o, a, b = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
    return CircuitTable.build(o, a, b)
