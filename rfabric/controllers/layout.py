"""What a circuit controller needs to know about an RFabric, read from its NetworkSpec.

:class:`RFabricLayout` derives the endpoints of the paper's allocation abstraction (appendix
D.1: ToRs per PoD, PoD-boundary uplink ports, PoDs), the OCS ports behind each of them and
how a GPU pair's traffic lands on a ToR pair, from the spec's node and link tables alone, so
it also works on a spec that was loaded or edited rather than built by
:class:`rfabric.topologies.RFabric`. It knows nothing about intents, plans or the engine.
"""

from __future__ import annotations

import re

import numpy as np

from ..errors import SpecError
from ..spec import NODE_KINDS, NetworkSpec

__all__ = ["RFabricLayout"]

_TOR = re.compile(r"^pod(\d+)/tor(\d+)\.r(\d+)$")
_AGG = re.compile(r"^pod(\d+)/ocs_agg(\d+)$")
_CORE = re.compile(r"^ocs_core(\d+)$")


class RFabricLayout:
    """Endpoints, ports and GPU-to-ToR mapping of an RFabric spec.

    Read from the spec, generically (what :class:`rfabric.topologies.RFabric` emits, and what
    a hand-made or loaded spec must follow to be driven by the stage-aware controller):

    * ToRs: ``eps`` nodes named ``pod{P}/tor{g}.r{j}``; OCS-Agg devices: ``ocs`` nodes named
      ``pod{P}/ocs_agg{a}``; OCS-Core devices: ``ocs`` nodes named ``ocs_core{c}``.
    * ToR uplink ports: links of kind ``tor-ocs`` between a ToR and an OCS-Agg of its PoD;
      PoD-boundary (core) ports: links of kind ``ocs-ocs`` between an OCS-Agg and an OCS-Core.
    * GPUs reach their ToR through their NIC link; a GPU's rail is its position in its server.

    Attributes
    ----------
    tors : numpy.ndarray
        Node ids of the ToRs (int64), in node order; a ToR's index in this array is its
        endpoint id below.
    tor_pod : numpy.ndarray
        PoD of each ToR.
    pods : int
        Number of PoDs.
    pod_tors : list of numpy.ndarray
        ToR indices of each PoD, ascending.
    gpu_tor : numpy.ndarray
        ToR index of each GPU's NIC.
    gpu_server, gpu_rail : numpy.ndarray
        Server of each GPU and its position in the server.
    server_rail_tor : numpy.ndarray
        ``(servers, rails)`` ToR index of the NIC of GPU ``rail`` of each server (-1: none).
    tor_port_link, tor_port_tor, tor_port_agg : numpy.ndarray
        One entry per ToR uplink port: its link id, ToR index and OCS-Agg node id.
    core_port_link, core_port_pod, core_port_agg, core_port_core : numpy.ndarray
        One entry per PoD-boundary port: its link id, PoD, OCS-Agg node and OCS-Core node.
    agg_pod : dict
        OCS-Agg node id -> PoD.
    core_nodes : numpy.ndarray
        OCS-Core node ids.
    pxn : bool
        Cross-rail traffic crosses NVLink first (the spec's ``pxn``).
    link_rate_bps : int
        Rate of the ToR uplinks (the circuits' line rate).

    Raises
    ------
    rfabric.SpecError
        If the spec has no ToRs or OCS-Agg devices named as above, a ToR uplink does not
        join a ToR to an OCS-Agg of its PoD, or a GPU's NIC is not on a ToR.
    """

    def __init__(self, spec: NetworkSpec, who: str = "StageAwareController"):
        self.spec = spec
        names = spec.nodes.name
        kind = spec.nodes.kind
        eps, ocs = NODE_KINDS["eps"], NODE_KINDS["ocs"]
        tor_pod, agg_pod, core = {}, {}, []
        for n in np.flatnonzero(kind == eps).tolist():
            m = _TOR.match(str(names[n]))
            if m:
                tor_pod[n] = int(m.group(1))
        for n in np.flatnonzero(kind == ocs).tolist():
            nm = str(names[n])
            m = _AGG.match(nm)
            if m:
                agg_pod[n] = int(m.group(1))
            elif _CORE.match(nm):
                core.append(n)
        if not tor_pod or not agg_pod:
            raise SpecError(
                f"{who}: fabric {spec.name!r} is not an RFabric: it needs eps nodes named "
                "pod{P}/tor{g}.r{j} and ocs nodes named pod{P}/ocs_agg{a} (rfabric.topologies.RFabric)"
            )
        self.tors = np.array(sorted(tor_pod), dtype=np.int64)
        tor_index = {int(n): i for i, n in enumerate(self.tors.tolist())}
        self.tor_pod = np.array([tor_pod[n] for n in self.tors.tolist()], dtype=np.int64)
        self.pods = int(max(max(tor_pod.values()), max(agg_pod.values()))) + 1
        self.pod_tors = [np.flatnonzero(self.tor_pod == p) for p in range(self.pods)]
        self.agg_pod = agg_pod
        self.core_nodes = np.array(sorted(core), dtype=np.int64)
        self.pxn = bool(spec.pxn)

        src, dst, lk = spec.links.src, spec.links.dst, spec.links.kind
        tp_link, tp_tor, tp_agg = [], [], []
        cp_link, cp_pod, cp_agg, cp_core = [], [], [], []
        core_set = set(core)
        for link in np.flatnonzero(lk == "tor-ocs").tolist():
            a, b = int(src[link]), int(dst[link])
            t, g = (a, b) if a in tor_index else (b, a)
            if t not in tor_index or g not in agg_pod or agg_pod[g] != tor_pod[t]:
                raise SpecError(
                    f"{who}: link {link} of kind 'tor-ocs' must join a ToR to an OCS-Agg of its PoD, "
                    f"it joins {spec.node_label(a)} and {spec.node_label(b)}"
                )
            tp_link.append(link)
            tp_tor.append(tor_index[t])
            tp_agg.append(g)
        for link in np.flatnonzero(lk == "ocs-ocs").tolist():
            a, b = int(src[link]), int(dst[link])
            g, c = (a, b) if a in agg_pod else (b, a)
            if g not in agg_pod or c not in core_set:
                raise SpecError(
                    f"{who}: link {link} of kind 'ocs-ocs' must join an OCS-Agg to an OCS-Core, "
                    f"it joins {spec.node_label(a)} and {spec.node_label(b)}"
                )
            cp_link.append(link)
            cp_pod.append(agg_pod[g])
            cp_agg.append(g)
            cp_core.append(c)
        i64 = np.int64
        self.tor_port_link = np.array(tp_link, dtype=i64)
        self.tor_port_tor = np.array(tp_tor, dtype=i64)
        self.tor_port_agg = np.array(tp_agg, dtype=i64)
        self.core_port_link = np.array(cp_link, dtype=i64)
        self.core_port_pod = np.array(cp_pod, dtype=i64)
        self.core_port_agg = np.array(cp_agg, dtype=i64)
        self.core_port_core = np.array(cp_core, dtype=i64)
        self.link_rate_bps = int(spec.links.rate_bps[tp_link[0]]) if tp_link else 1

        # GPUs: NIC ToR, server and rail (position in the server)
        g_nodes = spec.gpu_nodes
        self.gpu_server = spec.nodes.server[g_nodes].astype(np.int64)
        order = np.lexsort((g_nodes, self.gpu_server))
        rail = np.empty(len(g_nodes), dtype=np.int64)
        first = np.searchsorted(self.gpu_server[order], self.gpu_server[order], side="left")
        rail[order] = np.arange(len(g_nodes)) - first
        self.gpu_rail = rail
        node_gpu = {int(n): i for i, n in enumerate(g_nodes.tolist())}
        gpu_tor = np.full(len(g_nodes), -1, dtype=np.int64)
        nic = lk == "nic"
        for link in np.flatnonzero(nic).tolist():
            a, b = int(src[link]), int(dst[link])
            if a in node_gpu and b in tor_index:
                gpu_tor[node_gpu[a]] = tor_index[b]
            elif b in node_gpu and a in tor_index:
                gpu_tor[node_gpu[b]] = tor_index[a]
        if (gpu_tor < 0).any():
            g = int(np.flatnonzero(gpu_tor < 0)[0])
            raise SpecError(f"{who}: GPU {g} of fabric {spec.name!r} has no NIC link to a pod{{P}}/tor ToR")
        self.gpu_tor = gpu_tor
        servers = int(self.gpu_server.max()) + 1
        self.server_rail_tor = np.full((servers, int(rail.max()) + 1), -1, dtype=np.int64)
        self.server_rail_tor[self.gpu_server, rail] = gpu_tor
        self._tor_index = tor_index
        self._defaults = None
        self._default_rows = None
        self._components: dict[tuple, np.ndarray] = {}  # plan (and dead links) -> labels, recent
        self._channel_cache: dict[tuple, list] = {}  # plan -> its channels, recent
        self.tor_rail = np.array(
            [int(_TOR.match(str(names[n])).group(3)) for n in self.tors.tolist()], dtype=np.int64
        )
        self.port_of_link = {}  # link id -> ("tor", ToR index) or ("core", PoD)
        for link, t in zip(tp_link, tp_tor, strict=True):
            self.port_of_link[link] = ("tor", t)
        for link, p in zip(cp_link, cp_pod, strict=True):
            self.port_of_link[link] = ("core", p)

    def default_channels(self) -> list[tuple[tuple, int, int]]:
        """The spec's initial plan (the uniform splitting) as channels between ToRs:
        ``(rows, ToR, ToR)`` with ``rows`` the ``(device, link, link)`` circuits of the chain."""
        if self._defaults is None:
            self._defaults = self._channels(self.spec.circuits)
        return self._defaults

    def default_rows(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, bool]:
        """The rows of :meth:`default_channels` as arrays, in channel order: device, link a,
        link b and the channel's index; and whether no link is in two channels (each link of
        a valid plan is, at most, in one chain: then what one channel takes no other needs).
        Read once."""
        if self._default_rows is None:
            ch = self.default_channels()
            flat = [(r, i) for i, (rws, _, _) in enumerate(ch) for r in rws]
            o = np.array([r[0] for r, _ in flat], dtype=np.int64)
            a = np.array([r[1] for r, _ in flat], dtype=np.int64)
            b = np.array([r[2] for r, _ in flat], dtype=np.int64)
            chan = np.array([i for _, i in flat], dtype=np.int64)
            links = np.concatenate([a, b])
            owners = np.unique(np.stack([links, np.concatenate([chan, chan])], axis=1), axis=0)
            disjoint = len(np.unique(owners[:, 0])) == len(owners)
            self._default_rows = (o, a, b, chan, bool(disjoint))
        return self._default_rows

    def channels_of(self, rows) -> list[tuple[int, int]]:
        """ToR index pairs joined end to end by the given ``(device, link, link)`` rows."""
        from ..spec import CircuitTable

        if not rows:
            return []
        o, a, b = (np.array(c, dtype=np.int64) for c in zip(*rows, strict=True))
        return [(x, y) for _, x, y in self._channels(CircuitTable.build(o, a, b))]

    def apart(self, plan, ts: np.ndarray, td: np.ndarray) -> np.ndarray:
        """Mask of the ToR index pairs ``(ts[i], td[i])`` that the channels of ``plan`` (a
        CircuitTable) leave in different connected components: no route joins them."""
        label = self.components(plan)
        return label[np.asarray(ts)] != label[np.asarray(td)]

    def components(self, plan, dead=()) -> np.ndarray:
        """Connected component of each ToR (int64 label per ToR index) on the ToR graph of the
        channels of ``plan`` (the forwarding relays through any ToR); channels with a row on a
        link of ``dead`` (failed ports) are left out."""
        from .._graph import connected_components

        dead_arr = np.asarray(dead, dtype=np.int64)
        key = (plan.ocs.tobytes(), plan.a.tobytes(), plan.b.tobytes(), dead_arr.tobytes())
        hit = self._components.get(key)
        if hit is not None:  # the plan in force is asked about at every call
            return hit
        n = self.num_tors
        dead = set(dead_arr.tolist())
        ends = np.array(
            [
                (a, b)
                for rows, a, b in self._channels(plan)
                if not dead or not any(r[1] in dead or r[2] in dead for r in rows)
            ],
            dtype=np.int64,
        ).reshape(-1, 2)
        # labels are each component's smallest ToR index: ordered as scipy's were (components
        # numbered in order of their smallest node), so `splits` picks the same pairs
        label = np.asarray(connected_components(n, ends[:, 0], ends[:, 1]), dtype=np.int64)
        label.flags.writeable = False
        if len(self._components) >= 16:
            self._components.pop(next(iter(self._components)))
        self._components[key] = label
        return label

    @property
    def reach_group(self) -> np.ndarray:
        """Per ToR index, the group of ToRs that must be able to reach each other: with PXN the
        ToRs of one rail (PXN traffic only joins same-rail ToRs), else all ToRs (group 0)."""
        return self.tor_rail if self.pxn else np.zeros(self.num_tors, dtype=np.int64)

    def reach_codes(self) -> np.ndarray:
        """ToR pairs (``a * num_tors + b``) that join each :attr:`reach_group`: its first ToR
        with every other one."""
        grp = self.reach_group
        out = []
        for g in np.unique(grp).tolist():
            members = np.flatnonzero(grp == g)
            out.append(members[0] * self.num_tors + members[1:])
        return np.concatenate(out).astype(np.int64) if out else np.zeros(0, dtype=np.int64)

    def splits(self, before: np.ndarray, after: np.ndarray) -> list[tuple[int, int]]:
        """ToR index pairs ``(a, b)`` of one :attr:`reach_group` that the components
        ``before`` join and ``after`` do not (:meth:`components` labels): one pair per ToR
        cut off, each with a ToR it was joined to."""
        n = self.num_tors
        key = self.reach_group * (n + 1) + before
        order = np.lexsort((after, key))
        k, lab = key[order], after[order]
        cut = np.flatnonzero((k[1:] == k[:-1]) & (lab[1:] != lab[:-1]))
        return [(int(order[i]), int(order[i + 1])) for i in cut.tolist()]

    def _channels(self, plan) -> list[tuple[tuple, int, int]]:
        """The channels of ``plan`` (a list not to be modified: recent plans are cached)."""
        key = (plan.ocs.tobytes(), plan.a.tobytes(), plan.b.tobytes())
        hit = self._channel_cache.get(key)
        if hit is not None:
            return hit
        out = self._resolve(plan)
        if len(self._channel_cache) >= 16:
            self._channel_cache.pop(next(iter(self._channel_cache)))
        self._channel_cache[key] = out
        return out

    def _resolve(self, plan) -> list[tuple[tuple, int, int]]:
        u, v, chains = self.spec.resolve_circuits(plan)
        by_links = {}
        for o, a, b in zip(plan.ocs.tolist(), plan.a.tolist(), plan.b.tolist(), strict=True):
            by_links[(min(a, b), max(a, b))] = (o, a, b)
        out = []
        for x, y, chain in zip(u.tolist(), v.tolist(), chains, strict=True):
            if x in self._tor_index and y in self._tor_index:
                rows = tuple(by_links[(min(p, q), max(p, q))] for p, q in zip(chain, chain[1:], strict=False))
                out.append((rows, self._tor_index[x], self._tor_index[y]))
        return out

    @property
    def num_tors(self) -> int:
        return len(self.tors)

    def tor_pairs(self, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sender and receiver ToR of each GPU pair's traffic, and which pairs use the network.

        With PXN the sender's traffic first crosses its server's NVSwitch to the GPU on the
        receiver's rail, so it leaves through ``ToR(server(src), rail(dst))``; without PXN
        through the sender's own NIC ToR. Pairs in one server (NVLink) or whose two ToRs are
        the same (the ToR switches them) never reach the OCS layer: ``net`` is False there.
        """
        src = np.asarray(src, dtype=np.int64)
        dst = np.asarray(dst, dtype=np.int64)
        td = self.gpu_tor[dst]
        if self.pxn:
            ts = self.server_rail_tor[self.gpu_server[src], self.gpu_rail[dst]]
            ts = np.where(ts < 0, self.gpu_tor[src], ts)
        else:
            ts = self.gpu_tor[src]
        net = (self.gpu_server[src] != self.gpu_server[dst]) & (ts != td)
        return ts, td, net

    def tor_eligible(self, tors: np.ndarray) -> np.ndarray:
        """Which pairs of the given ToRs (one PoD) an OCS-Agg circuit may join: all distinct
        pairs, or with PXN only same-rail pairs (the only ToR pairs PXN traffic uses)."""
        n = len(tors)
        ok = ~np.eye(n, dtype=bool)
        if self.pxn:
            rail = self.tor_rail[tors]
            ok &= rail[:, None] == rail[None, :]
        return ok
