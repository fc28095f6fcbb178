"""RFabric: static rail-aligned packet ToRs under reconfigurable OCS aggregation and core layers."""

from __future__ import annotations

import numpy as np

from ..errors import SpecError
from ._common import MAX_PORTS, check_bool, check_int, check_radix, group_servers, round_robin_offsets
from .base import Topology, TopologyBuilder

__all__ = ["RFabric"]

#: Servers per PoD when not given: 16 (128 GPUs), see the class docstring.
POD_SERVERS = 16
#: OCS port count when not given: 576, the piezo OCS of paper Table 2, whose 25 ms switching
#: time is the paper's default T_ocs (§7.2).
OCS_RADIX = 576


class RFabric(Topology):
    """The paper's hybrid EPS–OCS fabric (OrchestrRL §5.1, Figure 7).

    Structure
    ---------
    * Access layer, static packet switching (§5.1): servers connect only to EPS ToRs,
      rail-aligned as in :class:`RailOptimized`. A PoD's servers form rail groups of
      ``down = radix - tor_uplinks`` consecutive servers; a rail group has one ToR per rail
      (``pod{P}/tor{g}.r{j}``) and NIC ``j`` of each of its servers goes to rail-ToR ``j``.
      Traffic inside a ToR always stays on the packet switch.
    * OCS-Agg (intra-PoD): ``ocs_agg`` OCS devices per PoD (``pod{P}/ocs_agg{a}``); ToR uplink
      ``i`` goes to OCS-Agg ``i mod ocs_agg`` (``tor-ocs`` links), so every ToR has
      ``tor_uplinks / ocs_agg`` ports on each. Each OCS-Agg also has ``core_ports / ocs_agg``
      uplink ports to the core (``ocs-ocs`` links).
    * OCS-Core (inter-PoD): ``ocs_core`` OCS devices (``ocs_core{c}``); every OCS-Agg spreads
      its uplink ports evenly over all of them, so each OCS-Core device has ports from every
      PoD. Built only with more than one PoD.
    * Circuits (CircuitTable rows) can join, inside an OCS-Agg, two ToR ports (a ToR–ToR
      circuit within the PoD) or a ToR port and an uplink port (lift/drop toward the core),
      and inside an OCS-Core two uplink ports of different PoDs. A ToR–uplink, uplink–uplink,
      uplink–ToR chain is one ToR-to-ToR channel across PoDs (§5.2, Appendix D).
    * Routing (``deadlock_free = True``): ToRs relay for each other over circuit rings, and
      shortest paths over rings can close cyclic buffer dependencies under PFC (a lossless
      1024-GPU permutation deadlocks). The switches therefore route up*/down*: ToRs ordered by
      BFS from the best-connected one; a path climbs, then only descends. Tables are
      recomputed with the order at every circuit change; link failures keep the order.
    * PXN (``pxn=True``, default): cross-rail traffic crosses the source server's NVSwitch to
      its GPU on the destination's rail, so the network carries same-rail traffic only (the
      access layer is rail-aligned, §5.1, and §5.4 relays traffic over NVLink to another NIC).

    Default circuit plan (the paper's "uniform splitting", Appendix I, used until a
    controller installs its own): every ToR's uplinks are taken in pairs (an "out" and an
    "in" port on the same OCS-Agg), and each pair carries one ring permutation.

    * With more than one PoD, half of each ToR's port pairs (rounded down) are lifted to the
      core, within the PoD's ``core_ports`` budget; lifts are handed out round-robin over the
      ToRs (group 0's rails first). Lift ring ``n`` of rail ``j`` joins that ToR's out port in
      PoD ``P`` to the in port of the ToR at the same position in PoD ``P + q`` with
      ``q = 1 + (n + j) mod (PoDs - 1)`` (``q = 1`` for a rail with a single lift ring): the
      offsets rotate across rails, so circuits spread evenly over PoD pairs, and consecutive
      offsets keep every rail's ToRs connected across all PoDs.
    * The remaining pairs join ToRs of the same PoD: with PXN the same-rail ToRs of the PoD's
      rail groups (the only ToR pairs PXN traffic needs), without PXN all ToRs of the PoD;
      ring ``m`` over such a set uses offset ``1, 2, ...`` (nearest first, cycling over half
      the set). A rail group alone in its PoD has no same-rail peer under PXN, so all its
      pairs go to the core. Ports that fit no ring stay dark, free for a controller.

    With the defaults, 1024 GPUs form 8 PoDs of 16 ToRs with 8 uplinks each: 2 port pairs per
    ToR lift to the core (64 core ports per PoD, all used) and 2 pairs join the ToR to its
    same-rail peer; 128 GPUs form one PoD whose two rail-``j`` ToRs are joined by all 8 ports.

    Routing (``routing = "dmodk"``): up*/down* tables (above) with D-mod-K among a switch's
    equal next hops, by the destination's position below its ToR (its server's place in the
    rail group) at the first switch and the ToR's rank after, so parallel circuits between two
    ToRs all carry traffic (on the raw GPU id a rail's traffic took one circuit: 128-GPU
    all_to_all 4.34x FatTree's time, 1.00x with this routing).

    Collective placement: the executor's default ring order (``ring_orders()`` is ``None``):
    servers in rank order (rail groups, then PoDs), channel ``c`` entering each server at GPU
    ``c``; with PXN each channel's inter-server hops stay on rail ``c``, whose ToRs the
    circuits join.

    Parameters
    ----------
    gpus : int
        GPUs (= NICs); a multiple of ``gpus_per_server``.
    link : str or int
        Rate of every NIC, ToR and OCS link (default "200Gbps", paper §7.2).
    radix : int, optional
        ToR port count (even, >= 4). Default: the smallest power of two that is at least
        ``2 · gpus_per_server`` (16 for 8-GPU servers), the ToRs of FatTree at 128-1024 GPUs
        ("compatibility for standard fat-trees", §5.1).
    tor_uplinks : int, optional
        ToR ports to the OCS-Agg layer (default ``radix / 2``: a non-blocking ToR).
    pod_servers : int, optional
        Servers per PoD; must divide the servers. Default: all servers when there are at most
        16, else ``gcd(servers, 16)``. Assumption: the paper gives no PoD size; 16 servers =
        128 GPUs hold its largest intra-PoD groups (Train TP8·PP2·CP3 = 48 GPUs for Qwen-72B,
        TP4·EP16 = 64 for Qwen2-57B-A14B, Appendix C; an AFD instance of 40 GPUs, §7.3.2).
    core_ports : int, optional
        OCS-Agg to OCS-Core links per PoD (even). Default: half the PoD's ToR uplinks, a 2:1
        taper at the PoD boundary. Assumption: the paper says core-facing ports are limited
        (Appendix E) without a number. Must be 0 with a single PoD.
    ocs_agg : int, optional
        OCS-Agg devices per PoD; ``tor_uplinks / ocs_agg`` and ``core_ports / ocs_agg`` must be
        even. Default: the fewest devices of at most ``ocs_radix`` ports each (1 at 128 and
        1024 GPUs, one PoD's 128 ToR ports plus 64 uplinks).
    ocs_core : int, optional
        OCS-Core devices; ``core_ports / (ocs_agg · ocs_core)`` must be even. Default: the
        fewest of at most ``ocs_radix`` ports each (1 at 1024 GPUs: 512 ports).
    ocs_radix : int
        Port count of one OCS device (default 576, Table 2's piezo OCS, the 25 ms device).
    pxn : bool
        Cross-rail traffic crosses NVLink to the destination's rail (default True).
    **kwargs
        Physical parameters of :class:`~rfabric.topologies.base.Topology`.
    """

    family = "rfabric"
    #: RFabric's control plane (paper §5.2-5.3): ``StageAwareController``
    default_controller = "stage_aware"
    pxn = True
    # ToRs relay over circuit rings and meshes: shortest paths there can close cyclic buffer
    # dependencies under PFC (a 1024-GPU permutation deadlocks), so route up*/down*.
    deadlock_free = True

    def __init__(
        self,
        gpus: int,
        link="200Gbps",
        radix: int | None = None,
        tor_uplinks: int | None = None,
        pod_servers: int | None = None,
        core_ports: int | None = None,
        ocs_agg: int | None = None,
        ocs_core: int | None = None,
        ocs_radix: int = OCS_RADIX,
        pxn: bool = True,
        **kwargs,
    ):
        super().__init__(gpus, link, **kwargs)
        who = "RFabric"
        self.pxn = check_bool(who, "pxn", pxn)
        g, s = self.gpus_per_server, self.servers
        if radix is None:
            radix = 4
            while radix < 2 * g:
                radix *= 2
        self.radix = check_radix(who, radix)
        if tor_uplinks is None:
            tor_uplinks = self.radix // 2
        self.tor_uplinks = check_int(who, "tor_uplinks", tor_uplinks, 2, MAX_PORTS)
        if self.tor_uplinks % 2:
            raise SpecError(
                f"{who}: tor_uplinks={self.tor_uplinks} must be even (circuits use ToR ports in pairs)"
            )
        if self.tor_uplinks >= self.radix:
            raise SpecError(
                f"{who}: tor_uplinks={self.tor_uplinks} leaves no ToR port for servers (radix={self.radix})"
            )
        self.pod_servers = group_servers(who, "pod_servers", pod_servers, s, POD_SERVERS, self.gpus)
        self.ocs_radix = check_int(who, "ocs_radix", ocs_radix, 2, MAX_PORTS)
        u, t_pod = self.tor_uplinks, self.tors_per_pod
        if core_ports is None:
            core_ports = (t_pod * u // 2) // 2 * 2 if self.pods > 1 else 0
        self.core_ports = check_int(who, "core_ports", core_ports, 0, MAX_PORTS)
        if self.pods == 1 and self.core_ports:
            raise SpecError(
                f"{who}: core_ports={self.core_ports} but there is a single PoD (pod_servers="
                f"{self.pod_servers}): no OCS-Core to connect"
            )
        if self.pods > 1 and (self.core_ports < 2 or self.core_ports % 2):
            raise SpecError(
                f"{who}: core_ports must be an even integer >= 2 with {self.pods} PoDs, got {self.core_ports}"
            )

        def agg_ok(n: int) -> bool:
            return (
                u % n == 0
                and (u // n) % 2 == 0
                and self.core_ports % n == 0
                and (self.core_ports // n) % 2 == 0
            )

        if ocs_agg is None:
            ocs_agg = next(
                (
                    n
                    for n in range(1, u + 1)
                    if agg_ok(n) and (t_pod * u + self.core_ports) // n <= self.ocs_radix
                ),
                None,
            )
            if ocs_agg is None:
                raise SpecError(
                    f"{who}: no OCS-Agg count fits ocs_radix={self.ocs_radix} (a PoD has "
                    f"{t_pod * u} ToR ports and {self.core_ports} core ports)"
                )
        self.ocs_agg = check_int(who, "ocs_agg", ocs_agg, 1, MAX_PORTS)
        if not agg_ok(self.ocs_agg):
            raise SpecError(
                f"{who}: ocs_agg={self.ocs_agg} must split tor_uplinks={u} and core_ports="
                f"{self.core_ports} into even port counts per device"
            )
        if self.agg_ports > self.ocs_radix:
            raise SpecError(
                f"{who}: ocs_agg={self.ocs_agg} gives OCS-Agg devices of {self.agg_ports} ports, "
                f"more than ocs_radix={self.ocs_radix}"
            )
        cpa = self.core_ports // self.ocs_agg

        def core_ok(n: int) -> bool:
            return cpa % n == 0 and (cpa // n) % 2 == 0

        if self.pods == 1:
            if ocs_core not in (None, 0):
                raise SpecError(f"{who}: ocs_core={ocs_core!r} but there is a single PoD: no OCS-Core")
            self.ocs_core = 0
        else:
            if ocs_core is None:
                ocs_core = next(
                    (
                        n
                        for n in range(1, cpa + 1)
                        if core_ok(n) and self.pods * self.core_ports // n <= self.ocs_radix
                    ),
                    None,
                )
                if ocs_core is None:
                    raise SpecError(
                        f"{who}: no OCS-Core count fits ocs_radix={self.ocs_radix} "
                        f"({self.pods} PoDs x {self.core_ports} core ports)"
                    )
            self.ocs_core = check_int(who, "ocs_core", ocs_core, 1, MAX_PORTS)
            if not core_ok(self.ocs_core):
                raise SpecError(
                    f"{who}: ocs_core={self.ocs_core} must split each OCS-Agg's {cpa} core ports "
                    "into even counts per device"
                )
            if self.core_device_ports > self.ocs_radix:
                raise SpecError(
                    f"{who}: ocs_core={self.ocs_core} gives OCS-Core devices of "
                    f"{self.core_device_ports} ports, more than ocs_radix={self.ocs_radix}"
                )
        self._plan_template()

    # -- sizes -------------------------------------------------------------------------------

    @property
    def tor_down(self) -> int:
        """ToR ports to servers = servers per rail group."""
        return self.radix - self.tor_uplinks

    @property
    def pods(self) -> int:
        return self.servers // self.pod_servers

    @property
    def groups_per_pod(self) -> int:
        return -(-self.pod_servers // self.tor_down)

    @property
    def tors_per_pod(self) -> int:
        return self.groups_per_pod * self.gpus_per_server

    @property
    def agg_ports(self) -> int:
        """Ports of one OCS-Agg device."""
        return (self.tors_per_pod * self.tor_uplinks + self.core_ports) // self.ocs_agg

    @property
    def core_device_ports(self) -> int:
        """Ports of one OCS-Core device."""
        return self.pods * self.core_ports // self.ocs_core if self.ocs_core else 0

    # -- default plan, computed once per PoD position (identical in every PoD) ---------------

    def _pair_ports(self, b: int) -> tuple[int, int, int]:
        """(OCS-Agg, out port, in port) of a ToR's uplink pair ``b``; pairs alternate devices."""
        n = self.ocs_agg
        a, r = b % n, b // n
        return a, a + 2 * r * n, a + (2 * r + 1) * n

    def _plan_template(self) -> None:
        who = "RFabric"
        rails, groups, t_pod = self.gpus_per_server, self.groups_per_pod, self.tors_per_pod
        pairs = self.tor_uplinks // 2
        if self.pxn:
            sets = [[g * rails + j for g in range(groups)] for j in range(rails)]
        else:
            sets = [list(range(t_pod))]
        has_local = any(len(m) > 1 for m in sets)
        free = [set(range(pairs)) for _ in range(t_pod)]
        lifts = []  # (position, pair, core device, core port out, core port in, pod offset)
        if self.pods > 1:
            if has_local and pairs < 2:
                raise SpecError(
                    f"{who}: tor_uplinks={self.tor_uplinks} is too few for both ToR-ToR and "
                    "core circuits in the default plan (needs >= 4)"
                )
            target = pairs // 2 if has_local else pairs
            n_lift = min(self.core_ports // 2, t_pod * target)
            if n_lift < (rails if self.pxn else 1):
                raise SpecError(
                    f"{who}: core_ports={self.core_ports} is too few for the default plan to "
                    f"lift every rail to the core (needs >= {2 * rails})"
                )
            n_agg, n_core = self.ocs_agg, self.ocs_core
            per_dev = self.core_ports // n_agg // n_core
            used = np.zeros((n_agg, n_core), dtype=np.int64)
            positions = [r % t_pod for r in range(n_lift)]
            per_rail = np.bincount([p % rails for p in positions], minlength=rails)
            nth = np.zeros(rails, dtype=np.int64)
            for r, t in enumerate(positions):
                k, j = r // t_pod, t % rails
                pick = None
                for i in range(n_agg):
                    a = (k + i) % n_agg
                    mine = [b for b in free[t] if b % n_agg == a]
                    c = int(np.argmin(used[a]))
                    if mine and used[a, c] + 2 <= per_dev:
                        pick = (max(mine), a, c)
                        break
                if pick is None:
                    raise SpecError(
                        f"{who}: the default plan cannot place lift circuit {r} "
                        f"(ToR position {t}); adjust core_ports, ocs_agg or ocs_core"
                    )
                b, a, c = pick
                free[t].discard(b)
                ko = c * per_dev + int(used[a, c])
                used[a, c] += 2
                q = 1 if per_rail[j] == 1 else 1 + int((nth[j] + j) % (self.pods - 1))
                nth[j] += 1
                lifts.append((t, b, c, ko, ko + 1, q))
        local = []  # (members, pair, ring offset)
        for members in sets:
            if len(members) < 2:
                continue
            common = sorted(set.intersection(*(free[t] for t in members)))
            if not common:
                raise SpecError(
                    f"{who}: tor_uplinks={self.tor_uplinks} leaves no port pair for ToR-ToR "
                    "circuits in the default plan"
                )
            for b, p in zip(common, round_robin_offsets(len(members), len(common)), strict=True):
                local.append((members, b, p))
        self._lifts, self._local = lifts, local

    # -- build -------------------------------------------------------------------------------

    def locality(self):
        """The PoDs, each with its PoD-boundary (OCS-Core) ports as budget (at least 1): the
        ``d_p`` of appendix E. One PoD (128 GPUs by default): one domain."""
        from ..rewrites import rfabric_locality

        return rfabric_locality(self.to_spec())

    def build(self, net: TopologyBuilder) -> None:
        rails, down, u = self.gpus_per_server, self.tor_down, self.tor_uplinks
        pods, groups, t_pod = self.pods, self.groups_per_pod, self.tors_per_pod
        n_agg, n_core, cpa = self.ocs_agg, self.ocs_core, self.core_ports // self.ocs_agg
        gpu = net.add_servers(self.servers, rails)
        tor = net.add_nodes(
            "eps",
            pods * t_pod,
            names=[f"pod{p}/tor{g}.r{j}" for p in range(pods) for g in range(groups) for j in range(rails)],
        )
        agg = net.add_nodes(
            "ocs", pods * n_agg, names=[f"pod{p}/ocs_agg{a}" for p in range(pods) for a in range(n_agg)]
        )
        core = net.add_nodes("ocs", n_core, prefix="ocs_core")

        srv = np.arange(self.servers)
        first_tor = (srv // self.pod_servers) * t_pod + (srv % self.pod_servers) // down * rails
        net.add_links(
            gpu.ravel(), tor[(first_tor[:, None] + np.arange(rails)).ravel()], rate=self.link_bps, kind="nic"
        )
        pod_of_tor = np.arange(pods * t_pod) // t_pod
        # uplink i of ToR x is tor_link[x, i]; uplink port k of OCS-Agg a of PoD p is core_link[p, a, k]
        agg_of_port = agg[(pod_of_tor[:, None] * n_agg + np.arange(u) % n_agg).ravel()]
        tor_link = net.add_links(np.repeat(tor, u), agg_of_port, rate=self.link_bps, kind="tor-ocs").reshape(
            pods, t_pod, u
        )
        if n_core:
            per_dev = cpa // n_core
            core_of_port = np.tile(core[np.arange(cpa) // per_dev], pods * n_agg)
            core_link = net.add_links(
                np.repeat(agg, cpa), core_of_port, rate=self.link_bps, kind="ocs-ocs"
            ).reshape(pods, n_agg, cpa)

        pod = np.arange(pods)
        agg_of = agg.reshape(pods, n_agg)
        for t, b, c, ko, ki, q in self._lifts:
            a, po, pi = self._pair_ports(b)
            net.add_circuits(agg_of[:, a], tor_link[:, t, po], core_link[:, a, ko])
            net.add_circuits(agg_of[:, a], tor_link[:, t, pi], core_link[:, a, ki])
            net.add_circuits(core[c], core_link[:, a, ko], core_link[(pod + q) % pods, a, ki])
        for members, b, p in self._local:
            a, po, pi = self._pair_ports(b)
            m = np.asarray(members)
            nxt = np.roll(m, -p)
            net.add_circuits(
                np.repeat(agg_of[:, a], len(m)), tor_link[:, m, po].ravel(), tor_link[:, nxt, pi].ravel()
            )
