"""Rail-optimized Clos (RO): NIC j of every server in a rail group on rail-ToR j, non-blocking above."""

from __future__ import annotations

import numpy as np

from ..errors import SpecError
from ._common import add_clos_tiers, check_bool, check_radix, default_radix
from .base import Topology, TopologyBuilder

__all__ = ["RailOptimized"]


class RailOptimized(Topology):
    """A non-blocking rail-optimized fabric of radix-``k`` packet switches (paper §7.2, "RO").

    Structure
    ---------
    * Rail groups: consecutive servers in groups of ``k/2`` (the last one may be partial).
      A group has one ToR per rail (``gpus_per_server`` ToRs, named ``tor{group}.r{rail}``);
      NIC ``j`` of every server of the group connects to rail-ToR ``j``. A ToR has ``k/2``
      ports down (one per server) and ``k/2`` up: non-blocking.
    * Two tiers when the ToRs fit under one spine layer (``#ToRs <= k``): ``k/2`` spines,
      every ToR linked once to every spine (``tor-spine`` links).
    * Three tiers otherwise: a fat-tree's aggregation and core tiers above the ToRs, with
      *rail-aligned pods*: a pod holds the rail-``j`` ToRs of up to ``k/2`` consecutive rail
      groups, so same-rail traffic between those groups stays inside the pod (two switch hops
      up). A pod has ``k/2`` aggregation switches (ToR uplink ``i`` to agg ``i``, ``tor-agg``)
      and ``k/2`` planes of ``k/2`` cores join agg ``a`` of every pod (``agg-core``).
      Aggregation and core switches are kept whole, as in :class:`FatTree`, so bisection
      stays full with partial pods; at full size the switch counts equal FatTree's, so the
      two fabrics cost about the same (paper §7.2.3).
    * PXN (``pxn=True``): cross-rail traffic first crosses the source server's NVSwitch to
      the GPU on the destination's rail and then stays on that rail (NCCL's PXN).

    Capacity is ``gpus_per_server · (k/2)² · floor(k / gpus_per_server)`` GPUs (at most ``k``
    pods, one per core port), i.e. ``k³/4`` when ``gpus_per_server`` divides ``k``.

    Routing (``routing = "dmodk"``): D-mod-K by the destination's position below the
    switch, as a subnet manager programs a rail fabric: a rail-ToR takes uplink (the
    destination server's position in its rail group) mod ``k/2``, an aggregation switch takes
    core (the destination ToR's rank in its rail-aligned pod) mod ``k/2``. Every uplink carries
    a share of each rail's traffic (on the raw GPU id every GPU of a rail has the same residue
    and a rail's traffic would take one uplink: 128-GPU all_to_all 4.35x FatTree's time,
    1.00x with this routing).

    Collective placement: the executor's default ring order (``ring_orders()`` is ``None``):
    servers in rank order, so consecutive servers share rail groups and pods; channel ``c``
    enters each server at GPU ``c`` and leaves from GPU ``c-1``, whose traffic PXN carries
    over NVLink to rail ``c`` (as NCCL's rings with PXN), so each channel stays on one rail.

    Parameters
    ----------
    gpus : int
        GPUs (= NICs); a multiple of ``gpus_per_server``.
    link : str or int
        Rate of every NIC and switch link (default "200Gbps", paper §7.2).
    radix : int, optional
        Switch port count ``k`` (even, >= 4). Default: the smallest power of two that is at
        least ``2 · gpus_per_server`` and fits the GPUs (FatTree's rule, so RO and FT of the
        same size are built from the same switches): 16 for 128 and for 1024 GPUs.
    pxn : bool
        Route cross-rail traffic over NVLink to the destination's rail (default True; sets
        the instance attribute read by ``to_spec``).
    **kwargs
        Physical parameters of :class:`~rfabric.topologies.base.Topology` (latencies, buffer,
        NVLink, GPUs per server).
    """

    family = "rail_optimized"
    pxn = True

    def __init__(self, gpus: int, link="200Gbps", radix: int | None = None, pxn: bool = True, **kwargs):
        super().__init__(gpus, link, **kwargs)
        self.pxn = check_bool("RailOptimized", "pxn", pxn)
        if radix is None:
            radix = default_radix("RailOptimized", self.gpus_per_server, self._capacity, self.gpus)
        self.radix = check_radix("RailOptimized", radix)
        if self.radix < self.gpus_per_server:
            raise SpecError(
                f"RailOptimized: radix={self.radix} is smaller than gpus_per_server="
                f"{self.gpus_per_server}; a rail-aligned pod needs one core port per rail"
            )
        if self._capacity(self.radix) < self.gpus:
            raise SpecError(
                f"RailOptimized: gpus={self.gpus} exceeds the capacity of radix={self.radix} "
                f"({self._capacity(self.radix)} GPUs)"
            )

    def _capacity(self, k: int) -> int:
        return self.gpus_per_server * (k // 2) ** 2 * (k // self.gpus_per_server)

    @property
    def groups(self) -> int:
        """Rail groups (sets of servers sharing their rail-ToRs)."""
        return -(-self.servers // (self.radix // 2))

    @property
    def tiers(self) -> int:
        """Switch tiers: 1 (one ToR), 2 (leaf-spine) or 3 (rail-aligned fat-tree)."""
        n_tors = self.groups * self.gpus_per_server
        return 1 if n_tors == 1 else 2 if n_tors <= self.radix else 3

    def locality(self):
        """One domain: packet switches join every GPU (see
        :func:`rfabric.rewrites.locality_from_spec`)."""
        from ..rewrites import Locality

        return Locality.one_domain(self.gpus, "RailOptimized: packet-switched, one domain")

    def build(self, net: TopologyBuilder) -> None:
        half = self.radix // 2
        rails, groups = self.gpus_per_server, self.groups
        gpu = net.add_servers(self.servers, rails)
        # ToR of (group g, rail j) is tor[g * rails + j]
        tor = net.add_nodes(
            "eps", groups * rails, names=[f"tor{g}.r{j}" for g in range(groups) for j in range(rails)]
        )
        group_of_server = np.arange(self.servers) // half
        net.add_links(
            gpu.ravel(),
            tor[(group_of_server[:, None] * rails + np.arange(rails)).ravel()],
            rate=self.link_bps,
            kind="nic",
        )
        pod_of_tor = None
        if self.tiers == 3:
            pods_per_rail = -(-groups // half)
            g, j = np.divmod(np.arange(groups * rails), rails)
            pod_of_tor = j * pods_per_rail + g // half
        add_clos_tiers(net, tor, self.radix, self.link_bps, pod_of_tor)
