"""MixNet: per server, most NICs on a regional OCS and the rest on a non-blocking packet fabric."""

from __future__ import annotations

import math

import numpy as np

from ..errors import SpecError
from ._common import (
    add_clos_tiers,
    check_radix,
    check_server_matrix,
    default_radix,
    group_servers,
    ring_circuits,
    ring_row,
    round_robin_offsets,
)
from .base import Topology, TopologyBuilder

__all__ = ["MixNet"]


#: Servers per region when not given: 16 (128 GPUs), see the class docstring.
REGION_SERVERS = 16


class MixNet(Topology):
    """A regional-OCS + packet-switched hybrid (Liao et al., SIGCOMM'25; paper §7.2).

    Structure
    ---------
    * Per server, GPUs ``0 .. ocs_nics-1`` have their NIC on the server's regional OCS and the
      other ``gpus_per_server - ocs_nics`` GPUs on a non-blocking packet fabric for global
      traffic (paper §7.2: 6 of 8 GPUs on a "local OCS", 2 on a non-blocking fat-tree).
    * Regions: consecutive groups of ``region_servers`` servers, each sharing one OCS node
      (``ocs{r}``, ``region_servers · ocs_nics`` ports, 96 by default) that the MoE all-to-all
      of the region is meant to reconfigure.
    * Packet fabric: the packet-switched NICs in server order fill radix-``k`` ToRs with
      ``k/2`` ports down and ``k/2`` up (not rail-aligned, as in FatTree); above them a spine
      tier (when at most ``k`` ToRs) or a fat-tree's aggregation and core tiers (more ToRs).
      Aggregation and core switches are kept whole, so the fabric is non-blocking.
    * GPUs and NVSwitches forward for other servers (``host_forwarding = True``): an OCS-side
      GPU reaches the packet fabric over NVLink through a packet-side GPU of its server, and
      OCS circuits carry traffic relayed by intermediate servers.

    Demand-following circuits: ``MixNet(..., demand=D)`` starts from, and
    ``plan_for_demand(D)`` returns, the plan that follows a server x server traffic matrix
    ``D`` (bytes; e.g. the MoE all-to-all of a period): in each region, circuits go one at a
    time to the server pair with the most demand per circuit it already has (the greedy
    bottleneck-pair allocation of MixNet's topology manager), while both servers have a free
    OCS NIC; pairs with no demand get none, and unused NICs stay dark.

    Initial circuit plan without ``demand`` (before any controller): in each region of ``R`` servers, ring
    permutations over the region's servers: ring ``m`` joins OCS NIC ``2m`` of server ``i``
    to OCS NIC ``2m+1`` of server ``i + p_m (mod R)`` with offsets ``p_m = 1, 2, 3, ...``
    (cycling over ``1..R/2``), so with 6 OCS NICs every server reaches the 6 distinct peers
    ``i±1, i±2, i±3`` when ``R >= 7``. With an odd ``ocs_nics`` the last OCS NIC pairs
    servers ``2x`` and ``2x+1`` (the last server of an odd region keeps it dark). A region of
    one server has no circuits.

    Routing (``routing = "adaptive"``)
    ----------------------------------
    Per packet, the least-queued of the equal-cost next hops. Between servers that no circuit
    joins, the packet fabric (NVLink, EPS NIC, ToR, spine, ToR, EPS NIC, NVLink) and two
    circuits through a relaying server are equally short, so a MixNet operator spreads traffic
    over both by load; measured at 128 GPUs, 256 MiB (bench/compare_fabrics.py), all_to_all
    takes 19.1 ms adaptive against 23.8 ms with D-mod-K (all_reduce, all_gather and a
    rail-aligned permutation are unchanged). Not ``"multipath"`` (TopoOpt's): spreading a
    server's frames over NICs whose paths cross one more server takes the rail-aligned
    permutation from 64.9 to 45.7 ms but all_to_all from 19.1 to 20.2 ms (16-256 MiB: +4% to
    +7%; equal below), since detours crowd circuits that carry the region's own traffic, and
    all-to-all is what MixNet is built for. The price: a failed optical NIC's ring detours
    over one other path, so a 256 MiB all_reduce takes 1.35x (bench/nic_failure.py).

    Collective placement (``ring_orders()``), with the default circuit plan
    -----------------------------------------------------------------------
    Rings follow the circuits, as MixNet runs data-parallel rings over its regional OCS:

    * One region: each ring permutation ``m`` whose offset is coprime with the region size is
      one Hamiltonian cycle and carries two channels, forward (servers ``0, p, 2p, ...``,
      entering at OCS NIC ``2m+1``, leaving through ``2m``) and backward over the same
      full-duplex circuits. The first permutation that splits into ``g`` cycles (offset 2 of
      16 servers: evens and odds) runs its cycles one after another; at each cycle's last
      server the ring leaves through the first packet-switched NIC to the next cycle's start
      (entered at the second packet-switched NIC), and a packet-switched ring takes over the
      circuits those jumps leave free (it visits the cycle's last server right before the
      cycle's start), so both rings, forward and backward, use each NIC once. Otherwise
      the packet-switched NICs carry a ring of their own, servers in order (two channels).
      At 128 GPUs (offsets 1, 2, 3; 2 packet-switched NICs) that is 8 channels and every NIC
      of every server sends on one.
    * Several regions: each coprime permutation's channel runs through the regions in turn,
      following the circuits inside a region and crossing to the next region through the
      packet fabric (leaving through the first packet-switched NIC); permutations that split
      into cycles carry no channel. The region crossings share those NICs.
    * ``demand=`` plans (circuits follow traffic, not rings): the executor's default order.

    Parameters
    ----------
    gpus : int
        GPUs (= NICs); a multiple of ``gpus_per_server``.
    link : str or int
        Rate of every NIC and switch link (default "200Gbps", paper §7.2).
    ocs_nics : int, optional
        NICs per server on the regional OCS (0 .. gpus_per_server-1). Default 6 of 8 (paper
        §7.2), i.e. ``3/4 · gpus_per_server`` rounded down for other server sizes.
    region_servers : int, optional
        Servers per region; must divide the number of servers. Default: all servers when there
        are at most 16, else ``gcd(servers, 16)``: 16 servers = 128 GPUs per region
        (assumption: the paper gives no region size; 128 GPUs hold its largest expert-parallel
        groups, EP = 16 at TP = 4 for Qwen2-57B-A14B in Appendix C, and a 96-port OCS is within
        every commodity OCS radix of Table 2).
    radix : int, optional
        Packet-switch port count ``k`` (even). Default: FatTree's rule, the smallest power of
        two that is at least ``2 · gpus_per_server`` and fits the packet-switched NICs.
    demand : array (servers, servers), optional
        Traffic matrix in bytes; the initial circuits follow it (see above).
    **kwargs
        Physical parameters of :class:`~rfabric.topologies.base.Topology`.
    """

    family = "mixnet"
    #: MixNet reconfigures each region's circuits for its demand (``MixNetController``)
    default_controller = "mixnet"
    host_forwarding = True
    routing = "adaptive"

    def __init__(
        self,
        gpus: int,
        link="200Gbps",
        ocs_nics: int | None = None,
        region_servers: int | None = None,
        radix: int | None = None,
        demand=None,
        **kwargs,
    ):
        super().__init__(gpus, link, **kwargs)
        self.demand = None if demand is None else self._check_demand(demand)
        g, s = self.gpus_per_server, self.servers
        if ocs_nics is None:
            ocs_nics = 3 * g // 4
        if (
            isinstance(ocs_nics, bool)
            or not isinstance(ocs_nics, (int, np.integer))
            or not 0 <= ocs_nics <= g - 1
        ):
            raise SpecError(
                f"MixNet: ocs_nics must be an integer in 0..{g - 1} (gpus_per_server={g} "
                f"minus at least one packet-switched NIC), got {ocs_nics!r}"
            )
        self.ocs_nics = int(ocs_nics)
        self.region_servers = group_servers(
            "MixNet", "region_servers", region_servers, s, REGION_SERVERS, self.gpus
        )
        if self.region_servers < 2 and self.ocs_nics > 0:
            raise SpecError(
                f"MixNet: a region of {self.region_servers} server holds no circuit, so its "
                f"ocs_nics={self.ocs_nics} optical NICs would carry nothing; pass ocs_nics=0 or a larger region"
            )
        if radix is None:
            radix = default_radix("MixNet", g, self._capacity, self.eps_nics_total)
        self.radix = check_radix("MixNet", radix)
        if self._capacity(self.radix) < self.eps_nics_total:
            raise SpecError(
                f"MixNet: the {self.eps_nics_total} packet-switched NICs exceed the capacity "
                f"of radix={self.radix} ({self._capacity(self.radix)} NICs)"
            )

    def _check_demand(self, demand) -> np.ndarray:
        return check_server_matrix("MixNet", "demand", demand, self.servers)

    def _greedy_pairs(self, demand: np.ndarray) -> list[tuple[int, int, int, int]]:
        """(server a, NIC index at a, server b, NIC index at b) for every circuit, per region."""
        # MixNet's allocator is policy (rfabric.controllers.regional); a fabric built to follow a
        # demand runs it at build time, the one import of a controller module by a topology
        # (tests/test_layers.py lists it)
        from ..controllers.regional import greedy_circuits

        r, o = self.region_servers, self.ocs_nics
        out = []
        for reg in range(self.regions):
            members = np.arange(reg * r, (reg + 1) * r)
            w = demand[np.ix_(members, members)]
            used = np.zeros(r, dtype=np.int64)
            for i, j in greedy_circuits(w, np.full(r, o)):
                out.append((int(members[i]), int(used[i]), int(members[j]), int(used[j])))
                used[i] += 1
                used[j] += 1
        return out

    def plan_for_demand(self, demand):
        """The circuit plan (a CircuitTable) that follows server x server traffic ``demand``."""
        from ..spec import CircuitTable

        d = self._check_demand(demand)
        self.to_spec()  # records the OCS nodes and NIC links
        pairs = self._greedy_pairs(d)
        if not pairs:
            return CircuitTable.empty()
        a_srv, a_nic, b_srv, b_nic = (np.array(col) for col in zip(*pairs, strict=True))
        region = a_srv // self.region_servers
        return CircuitTable.build(
            self._ocs_nodes[region], self._ocs_nic_links[a_srv, a_nic], self._ocs_nic_links[b_srv, b_nic]
        )

    def locality(self):
        """One domain: the regions are joined by the non-blocking packet fabric (its
        ``gpus_per_server - ocs_nics`` NICs per server), over which a pipelined chain broadcast
        crosses each region's boundary once per shard (see
        :func:`rfabric.rewrites.locality_from_spec`)."""
        from ..rewrites import Locality

        return Locality.one_domain(self.gpus, "MixNet: regions joined by packet switches, one domain")

    def ring_orders(self) -> np.ndarray | None:
        """Rings over the default plan's circuits (see the class docstring)."""
        s, d, o, r = self.servers, self.gpus_per_server, self.ocs_nics, self.region_servers
        if s < 2 or d < 2 or self.demand is not None:
            return None
        e_out, e_in = o, (o + 1 if self.eps_nics >= 2 else o)
        offsets = round_robin_offsets(r, o // 2) if r >= 2 else []
        rows: list[np.ndarray] = []
        eps_taken = False
        for m, p in enumerate(offsets):
            c_in, c_out = 2 * m + 1, 2 * m
            if self.regions == 1:
                g = math.gcd(p, r)
                if g == 1:
                    fwd = ring_row((np.arange(r) * p) % r, c_in, c_out, d)
                    rows += [fwd, fwd[::-1]]
                elif not eps_taken and self.eps_nics >= 2:
                    # cycles k = 0..g-1 one after another; cycle k ends at server k - p
                    ends = {(k - p) % r: k for k in range(g)}
                    order = [(k + j * p) % r for k in range(g) for j in range(r // g)]
                    ring = ring_row(
                        order,
                        [e_in if v < g else c_in for v in order],
                        [e_out if v in ends else c_out for v in order],
                        d,
                    )
                    # the packet-switched ring takes each freed circuit (cycle end -> start)
                    eps_order = []
                    for v in range(r):
                        if v < g:
                            continue
                        eps_order.append(v)
                        if v in ends:
                            eps_order.append(ends[v])
                    eps = ring_row(
                        eps_order,
                        [c_in if v < g else e_in for v in eps_order],
                        [c_out if v in ends else e_out for v in eps_order],
                        d,
                    )
                    rows += [ring, ring[::-1], eps, eps[::-1]]
                    eps_taken = True
            elif math.gcd(p, r) == 1:
                order = [reg * r + (j * p) % r for reg in range(self.regions) for j in range(r)]
                first = [j == 0 for reg in range(self.regions) for j in range(r)]
                last = [j == r - 1 for reg in range(self.regions) for j in range(r)]
                entry = [e_in if f else c_in for f in first]
                exit_ = [e_out if la else c_out for la in last]
                if e_in == e_out:  # one packet-switched NIC: enter a region through it, leave via NVLink
                    exit_ = [c_out for _ in last]
                fwd = ring_row(order, entry, exit_, d)
                rows += [fwd, fwd[::-1]]
        if self.regions == 1 and not eps_taken and self.eps_nics >= 2:
            fwd = ring_row(np.arange(s), e_in, e_out, d)
            rows += [fwd, fwd[::-1]]
        return np.stack(rows) if rows else None

    @staticmethod
    def _capacity(k: int) -> int:
        return k * (k // 2) ** 2

    @property
    def eps_nics(self) -> int:
        """Packet-switched NICs per server."""
        return self.gpus_per_server - self.ocs_nics

    @property
    def eps_nics_total(self) -> int:
        return self.eps_nics * self.servers

    @property
    def regions(self) -> int:
        return self.servers // self.region_servers

    def build(self, net: TopologyBuilder) -> None:
        s, o, r = self.servers, self.ocs_nics, self.region_servers
        half = self.radix // 2
        gpu = net.add_servers(s, self.gpus_per_server)

        # packet-switched part
        eps_gpu = gpu[:, o:].ravel()
        n_tors = -(-len(eps_gpu) // half)
        tor = net.add_nodes("eps", n_tors, prefix="tor")
        net.add_links(eps_gpu, tor[np.arange(len(eps_gpu)) // half], rate=self.link_bps, kind="nic")
        add_clos_tiers(net, tor, self.radix, self.link_bps)

        if o == 0:
            return
        # regional OCSes; OCS NIC link of (server, j) is nic[server, j]
        ocs = net.add_nodes("ocs", self.regions, prefix="ocs")
        region_of_server = np.arange(s) // r
        nic = net.add_links(
            gpu[:, :o].ravel(), np.repeat(ocs[region_of_server], o), rate=self.link_bps, kind="nic"
        ).reshape(s, o)
        self._ocs_nodes, self._ocs_nic_links = ocs, nic
        if r < 2:
            return
        if self.demand is not None:
            for a, ia, b, ib in self._greedy_pairs(self.demand):
                net.add_circuits(ocs[a // r], nic[a, ia], nic[b, ib])
            return
        offsets = round_robin_offsets(r, o // 2)
        for reg in range(self.regions):
            members = np.arange(reg * r, (reg + 1) * r)
            for m, p in enumerate(offsets):
                net.add_circuits(*ring_circuits(ocs[reg], nic[members, 2 * m], nic[members, 2 * m + 1], p))
            if o % 2:
                pairs = members[: r - r % 2].reshape(-1, 2)
                net.add_circuits(ocs[reg], nic[pairs[:, 0], o - 1], nic[pairs[:, 1], o - 1])
