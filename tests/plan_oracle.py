"""An independent check that a circuit plan keeps GPU pairs routable (test helper).

It knows nothing of the controllers or of :class:`rfabric.controllers.layout.RFabricLayout`:
it reads the spec's node and link tables and a CircuitTable, builds with networkx the graph a
packet can cross (packet switches joined by electrical links; an optical link is a node of its
own, joined to its electrical end and, by each circuit of the plan, to the link the circuit
joins it to at that device) and asks whether the switch a GPU pair's traffic leaves from
reaches the switch of the receiver's NIC. With PXN the traffic leaves through the NIC of the
sender's server-mate on the receiver's rail (its position in the server), else through the
sender's own NIC. Pairs in one server never leave it.
"""

from __future__ import annotations

import networkx as nx
import numpy as np

from rfabric.spec import CIRCUIT_KINDS, NODE_KINDS


class PlanOracle:
    def __init__(self, spec):
        self.spec = spec
        kind = np.asarray(spec.nodes.kind)
        self.optical = np.isin(kind, [NODE_KINDS[k] for k in CIRCUIT_KINDS])
        self.switch = kind == NODE_KINDS["eps"]
        src, dst = np.asarray(spec.links.src), np.asarray(spec.links.dst)
        lk = np.asarray(spec.links.kind)
        gpus = np.asarray(spec.gpu_nodes, dtype=np.int64)
        gpu_of = {int(n): i for i, n in enumerate(gpus.tolist())}
        self.nic_switch = np.full(len(gpus), -1, dtype=np.int64)
        for link in np.flatnonzero(lk == "nic").tolist():
            a, b = int(src[link]), int(dst[link])
            if a in gpu_of and self.switch[b]:
                self.nic_switch[gpu_of[a]] = b
            elif b in gpu_of and self.switch[a]:
                self.nic_switch[gpu_of[b]] = a
        server = np.asarray(spec.nodes.server, dtype=np.int64)[gpus]
        order = np.lexsort((gpus, server))
        rail = np.empty(len(gpus), dtype=np.int64)
        first = np.searchsorted(server[order], server[order], side="left")
        rail[order] = np.arange(len(gpus)) - first
        self.server, self.rail = server, rail
        self.by_server_rail = {(int(s), int(r)): g for g, (s, r) in enumerate(zip(server, rail, strict=True))}
        self.pxn = bool(spec.pxn)
        base = nx.Graph()
        base.add_nodes_from(int(n) for n in np.flatnonzero(self.switch))
        for link in range(len(src)):
            a, b = int(src[link]), int(dst[link])
            if self.switch[a] and self.switch[b]:
                base.add_edge(a, b)
            elif self.optical[a] or self.optical[b]:
                for end in (a, b):
                    if self.switch[end]:
                        base.add_edge(end, ("link", link))
        self.base = base

    def graph(self, plan, down=()):
        g = self.base.copy()
        down = set(int(x) for x in down)
        for link in down:
            if g.has_node(("link", link)):
                g.remove_node(("link", link))
        for a, b in zip(np.asarray(plan.a).tolist(), np.asarray(plan.b).tolist(), strict=True):
            if a not in down and b not in down:
                g.add_edge(("link", a), ("link", b))
        return g

    def ends(self, src, dst):
        """(leaving switch, receiving switch) of each GPU pair that leaves its server."""
        out = []
        for s, d in zip(np.asarray(src).tolist(), np.asarray(dst).tolist(), strict=True):
            if self.server[s] == self.server[d]:
                continue
            g = self.by_server_rail.get((int(self.server[s]), int(self.rail[d])), s) if self.pxn else s
            out.append((int(self.nic_switch[g]), int(self.nic_switch[d])))
        return out

    def apart(self, plan, src, dst, down=()):
        """The GPU pairs' (leaving, receiving) switch pairs that ``plan`` leaves unjoined."""
        g = self.graph(plan, down)
        comp = {}
        for i, c in enumerate(nx.connected_components(g)):
            for n in c:
                comp[n] = i
        return sorted({(a, b) for a, b in self.ends(src, dst) if comp[a] != comp[b]})
