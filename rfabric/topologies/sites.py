"""Sites: fabrics joined into one by a long link between their gateways (DESIGN §13).

Disaggregated RL systems run training and generation in different clusters, sometimes in
different buildings or cities: StreamRL joins an H800 cluster and an H20 cluster with an
80 Gbps dedicated link, RollMux two 400 Gbps InfiniBand clusters with a 20 Gbps Ethernet
link. ``Sites`` composes any fabrics (built-in or a user's Topology, RFabric with its OCS
circuits included) into one fabric the engine simulates as a whole::

    train = rf.topologies.RailOptimized(gpus=128, link="200Gbps")
    gen = rf.topologies.FatTree(gpus=32, link="100Gbps")
    fab = rf.topologies.Sites({"train": train, "gen": gen}, link="80Gbps", latency="2ms")
    fab.site_gpus("gen")        # GPU ids 128 .. 159

See docs/explanation/sites.md for what is modelled and what is not.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import numpy as np

from ..errors import SpecError
from ..spec import NODE_KINDS, CircuitTable, LinkTable, NetworkSpec, NodeTable, check_routing
from ..units import parse_size, parse_time
from ..validators import integer
from ._common import ring_row
from .base import Topology, TopologyBuilder

__all__ = ["Sites"]

#: Controllers (rfabric.catalog.CONTROLLERS names) that drive a composed fabric: checked by
#: running them on one (tests/test_sites.py).
COMPOSABLE_CONTROLLERS = frozenset({"static", "mixnet"})

#: DCTCP's datacenter step-marking threshold, 5 us of queueing (DctcpParams::ecn in
#: csrc/packet/transports/dctcp_params.hpp): the least the long link's threshold is.
DATACENTER_ECN_PS = 5_000_000
#: Linux's minimum retransmission timeout, TCP_RTO_MIN = HZ/5 = 200 ms (include/net/tcp.h),
#: what TCP between sites runs with unless an operator lowers it per route.
LINUX_MIN_RTO_PS = 200_000_000_000

#: Link kind labels of the rows ``Sites`` adds (``spec.links.kind``).
LONG_HAUL = "long-haul"
GATEWAY = "gateway"


class Sites(Topology):
    """Named fabrics (sites) joined by a long link between one gateway switch per site.

    Structure
    ---------
    * Every site is built by its own ``build()``, unchanged: its nodes, links and initial
      circuit plan are copied in, node names prefixed ``"<site>/"``. Node, link, server and
      GPU ids follow the dict's order, so the GPUs of the first site come first
      (:meth:`site_gpus` gives a site's GPU ids).
    * Gateway: one packet switch per site (node ``"<site>/gateway"``, kind ``eps``), linked
      once to every switch of the site's top packet-switched tier (the switches farthest, in
      switch hops, from the switches the NICs attach to: a FatTree's cores, a leaf-spine's
      spines, RFabric's ToRs, whose upper tiers are optical) at the site's link rate (link
      kind ``"gateway"``). A site without packet switches (TopoOpt) has no tier to attach a
      gateway to and is refused. ``gateway_links`` takes fewer of the tier's switches.
    * Long link: ``links`` parallel links (kind ``"long-haul"``) between consecutive sites'
      gateways (a chain in the dict's order; two sites: one bundle), each of rate ``link``,
      propagation ``latency`` and a per-port buffer ``buffer``.

    Routing: shortest paths over the whole graph, so traffic inside a site keeps its
    shortest paths (the gateway adds only longer ones; the equal-cost choice among them can
    differ from the site alone's, docs/explanation/sites.md), and traffic between sites
    climbs to the gateway, crosses the long link and descends. Circuits inside a site work as in the
    site alone; a controller sees the whole spec (:attr:`default_controller` says which
    run on one).

    Transport: by default the run's transport (``EngineConfig.transport``) runs every flow,
    including those crossing the long link, and the long link is as lossless or lossy as the
    run. With ``transport=`` (e.g. ``"dctcp"``) the long link has its own: flows between GPUs
    of different sites run that transport end to end, flows inside a site the run's; the long
    link's ports are lossy (no PAUSE crosses it, its queues drop when full and mark ECN at
    ``ecn``) while the sites stay as the run makes them. The cross-site flows' settings are
    scaled to the long link's round trip (``ecn``, ``min_rto``; DCTCP paced and starting at
    alpha 0), not the datacenter defaults (docs/explanation/sites.md).

    Flags of the composed spec: ``host_forwarding``, ``pxn`` and ``deadlock_free`` hold if
    any site sets them (they allow paths; a site that did not set them may then find other
    equal-cost routes). ``routing``: the sites' common mode, else pass ``routing=``.

    Parameters
    ----------
    sites : dict
        Site name -> Topology; at least two, names non-empty strings without "/".
    link : str or int
        Rate of each long link (e.g. "80Gbps").
    latency : str or int
        One-way propagation of the long link (e.g. "2ms": about 400 km of fibre at 5 µs/km).
    links : int
        Parallel long links between each pair of joined gateways (default 1). Under D-mod-K
        routing the gateway's hop digit is spent on small sites and all traffic toward a site
        takes one of them; ``routing="flow"`` spreads flows over them
        (docs/explanation/sites.md).
    buffer : str or int, optional
        Buffer of each long-link port. Default: twice the link's bandwidth-delay product
        over a round trip (rate x 2 x latency) plus the first site's per-port buffer. One
        bandwidth-delay product is the classic router sizing rule (Villamizar and Song,
        1994); under PFC the ingress buffer must also hold a round trip of headroom (what
        arrives after a pause is sent), hence twice.
    gateway_links : int, optional
        Links from each gateway to its site's top tier, spread evenly over that tier's
        switches. Default: one to every switch of the tier (every top switch is then one hop
        from the gateway, and no intra-site link carries more cross-site traffic than its
        share); fewer cost less (each is a site link: optics, ports, fibre) and concentrate
        cross-site traffic on the tier's switches they reach.
    routing : str, optional
        ECMP mode of the composed fabric (``rfabric.spec.ROUTING_MODES``); required when the
        sites' modes differ, else theirs.
    transport : str, optional
        Transport of the flows between sites (a loss-recovering one: ``"dctcp"``); the long
        link's ports then run lossy even in a lossless (RoCE) run. None (default): the run's
        transport everywhere.
    ecn : str or int, optional
        With ``transport=``: the long link's step ECN marking threshold, as queueing delay at
        its rate. Default (:attr:`ecn_ps`): a seventh of the base round trip over one long
        link (2 x ``latency``), DCTCP's guideline for full throughput (K > C x RTT / 7,
        Alizadeh et al., SIGCOMM 2010, §3.4), never below DCTCP's datacenter 5 us.
    min_rto : str or int, optional
        With ``transport=``: the cross-site flows' minimum retransmission timeout (the
        run's ``dctcp_min_rto`` stays that of the flows inside the sites). Default
        (:attr:`min_rto_ps`): Linux's 200 ms (TCP_RTO_MIN), or, if longer, the longest round
        trip the long link allows without a drop (2 x ``latency`` plus its full buffer's
        drain), so a timer never fires on a frame that was not lost on the long link.
    """

    family = "sites"

    def __init__(
        self,
        sites: Mapping[str, Topology],
        link,
        latency,
        *,
        links: int = 1,
        buffer=None,
        gateway_links: int | None = None,
        routing: str | None = None,
        transport: str | None = None,
        ecn=None,
        min_rto=None,
    ):
        if transport is None and (ecn is not None or min_rto is not None):
            raise SpecError("Sites: ecn= and min_rto= set the long link's own transport; pass transport= too")
        if transport is not None:
            from .. import _engine

            traits = _engine.transport_traits()
            if transport not in traits:
                raise SpecError(
                    f"Sites: transport={transport!r} is not a transport (known: {', '.join(traits)})"
                )
            if traits[transport]["lossless"]:
                lossy = ", ".join(k for k, v in traits.items() if not v["lossless"])
                raise SpecError(
                    f"Sites: transport={transport!r} assumes a lossless fabric and does not recover "
                    f"loss; the long link's own transport runs over lossy ports (use one of: {lossy})"
                )
        self.transport = transport
        if not isinstance(sites, Mapping):
            raise SpecError(f"Sites: sites must be a dict of name -> Topology, got {type(sites).__name__}")
        if len(sites) < 2:
            raise SpecError(f"Sites: need at least two sites, got {len(sites)}")
        for name, fab in sites.items():
            if not isinstance(name, str) or not name or "/" in name:
                raise SpecError(f"Sites: site name {name!r} must be a non-empty string without '/'")
            if not isinstance(fab, Topology):
                raise SpecError(f"Sites: site {name!r} is a {type(fab).__name__}, not a Topology")
            if isinstance(fab, Sites):
                raise SpecError(f"Sites: site {name!r} is itself a Sites; list its sites here instead")
        self.sites = dict(sites)
        first = next(iter(self.sites.values()))
        gpus = sum(f.gpus for f in self.sites.values())
        gps = math.gcd(*(f.gpus_per_server for f in self.sites.values()))
        super().__init__(
            gpus,
            link,
            gpus_per_server=gps,
            link_latency=first.link_latency_ps,
            switch_latency=first.switch_latency_ps,
            buffer=first.buffer_bytes,
            nvlink=first.nvlink_bps,
            nvlink_latency=first.nvlink_latency_ps,
            nvswitch_latency=first.nvswitch_latency_ps,
            nic_latency=first.nic_latency_ps,
        )
        self.long_link_bps = self.link_bps
        self.latency = latency
        self.latency_ps = parse_time(latency, name="Sites: latency")
        self.links = integer(links, "Sites: links", lo=1, hi=1 << 16)
        self.gateway_links = (
            None
            if gateway_links is None
            else integer(gateway_links, "Sites: gateway_links", lo=1, hi=1 << 16)
        )
        if buffer is None:
            bdp = -(-self.long_link_bps * 2 * self.latency_ps // (8 * 10**12))
            self.long_buffer_bytes = 2 * int(bdp) + first.buffer_bytes
        else:
            self.long_buffer_bytes = parse_size(buffer, allow_zero=False, name="Sites: buffer", buffer=True)
        self.ecn, self.min_rto = ecn, min_rto
        self.ecn_ps: int | None = None
        self.min_rto_ps: int | None = None
        if transport is not None:
            rtt = 2 * self.latency_ps  # base round trip over one long link (its hops: microseconds)
            if ecn is None:
                self.ecn_ps = max(DATACENTER_ECN_PS, -(-rtt // 7))
            else:
                self.ecn_ps = parse_time(ecn, name="Sites: ecn")
            if min_rto is None:
                drain = -(-self.long_buffer_bytes * 8 * 10**12 // self.long_link_bps)
                self.min_rto_ps = max(LINUX_MIN_RTO_PS, rtt + drain)
            else:
                self.min_rto_ps = parse_time(min_rto, allow_zero=False, name="Sites: min_rto")
        modes = {f.routing for f in self.sites.values()}
        if routing is None:
            if len(modes) > 1:
                raise SpecError(
                    f"Sites: the sites route differently ({', '.join(sorted(modes))}); "
                    "pass routing= for the composed fabric"
                )
            routing = modes.pop()
        self.routing = check_routing(routing, "Sites: routing")
        self.host_forwarding = any(f.host_forwarding for f in self.sites.values())
        self.pxn = any(f.pxn for f in self.sites.values())
        self.deadlock_free = any(f.deadlock_free for f in self.sites.values())
        offsets = np.cumsum([0] + [f.gpus for f in self.sites.values()])
        self._gpu_range = {name: (int(offsets[i]), int(offsets[i + 1])) for i, name in enumerate(self.sites)}

    @property
    def name(self) -> str:
        return "sites(" + ",".join(f"{n}={f.name}" for n, f in self.sites.items()) + ")"

    def site_gpus(self, site: str) -> np.ndarray:
        """GPU ids (int64, ascending) of ``site`` in the composed fabric."""
        if site not in self._gpu_range:
            raise SpecError(f"Sites: no site {site!r} (sites: {', '.join(self.sites)})")
        lo, hi = self._gpu_range[site]
        return np.arange(lo, hi, dtype=np.int64)

    def site_of(self, gpus) -> np.ndarray:
        """The site index (position in the dict) of each GPU id in ``gpus``."""
        gpus = np.asarray(gpus, dtype=np.int64)
        if gpus.size and (gpus.min() < 0 or gpus.max() >= self.gpus):
            raise SpecError(f"Sites: GPU ids must be in 0..{self.gpus - 1}")
        bounds = np.array([hi for _, hi in self._gpu_range.values()], dtype=np.int64)
        return np.searchsorted(bounds, gpus, side="right")

    # --- composition -------------------------------------------------------------------

    def tables(self) -> tuple[NodeTable, LinkTable, CircuitTable]:
        kinds: list[np.ndarray] = []
        names: list[str] = []
        servers: list[np.ndarray] = []
        lats: list[np.ndarray] = []
        lsrc, ldst, lrate, llat, lbuf, lkind = [], [], [], [], [], []
        cocs, ca, cb = [], [], []
        gateways: list[int] = []
        node_off = link_off = server_off = 0
        kind_of = {v: k for k, v in NODE_KINDS.items()}
        eps = NODE_KINDS["eps"]
        for site, fab in self.sites.items():
            try:
                nodes, links, circuits = fab.tables()
            except SpecError as exc:
                raise SpecError(f"Sites: site {site!r}: {exc}") from None
            top = _top_tier(nodes, links)
            if top.size == 0:
                raise SpecError(
                    f"Sites: site {site!r} ({fab.name}) has no packet switch to attach a gateway to"
                )
            n, m = len(nodes), len(links)
            kinds.append(nodes.kind)
            names.extend(f"{site}/{x}" for x in nodes.name)
            srv = nodes.server.astype(np.int64)
            servers.append(np.where(srv >= 0, srv + server_off, -1))
            lats.append(nodes.latency_ps)
            lsrc.append(links.src + node_off)
            ldst.append(links.dst + node_off)
            lrate.append(links.rate_bps)
            llat.append(links.latency_ps)
            lbuf.append(links.buffer_bytes)
            lkind.extend(links.kind.astype(str).tolist())
            if len(circuits):
                cocs.append(circuits.ocs + node_off)
                ca.append(circuits.a + link_off)
                cb.append(circuits.b + link_off)
            server_off += int(srv.max()) + 1 if srv.size and srv.max() >= 0 else 0
            node_off += n
            link_off += m
            gateways.append(node_off)  # the gateway node comes right after the sites' nodes
            # gateway node and its links to the top tier
            kinds.append(np.array([eps], dtype=nodes.kind.dtype))
            names.append(f"{site}/gateway")
            servers.append(np.array([-1], dtype=np.int64))
            lats.append(np.array([fab.switch_latency_ps], dtype=np.int64))
            if self.gateway_links is not None and self.gateway_links < len(top):
                k = self.gateway_links
                top = top[(np.arange(k) * len(top)) // k]  # spread evenly over the tier
            t = len(top)
            lsrc.append(np.full(t, node_off, dtype=np.int64))
            ldst.append(top + node_off - n)
            lrate.append(np.full(t, fab.link_bps, dtype=np.int64))
            llat.append(np.full(t, fab.link_latency_ps, dtype=np.int64))
            lbuf.append(np.full(t, fab.buffer_bytes, dtype=np.int64))
            lkind.extend([GATEWAY] * t)
            node_off += 1
            link_off += t
        for a, b in zip(gateways[:-1], gateways[1:], strict=True):
            k = self.links
            lsrc.append(np.full(k, a, dtype=np.int64))
            ldst.append(np.full(k, b, dtype=np.int64))
            lrate.append(np.full(k, self.long_link_bps, dtype=np.int64))
            llat.append(np.full(k, self.latency_ps, dtype=np.int64))
            lbuf.append(np.full(k, self.long_buffer_bytes, dtype=np.int64))
            lkind.extend([LONG_HAUL] * k)
            link_off += k
        node_table = NodeTable.build(
            [kind_of[int(k)] for k in np.concatenate(kinds)],
            names,
            np.concatenate(servers).astype(np.int32),
            np.concatenate(lats),
        )
        link_table = LinkTable.build(
            np.concatenate(lsrc),
            np.concatenate(ldst),
            np.concatenate(lrate),
            np.concatenate(llat),
            np.concatenate(lbuf),
            lkind,
        )
        if cocs:
            circuit_table = CircuitTable.build(np.concatenate(cocs), np.concatenate(ca), np.concatenate(cb))
        else:
            circuit_table = CircuitTable.empty()
        return node_table, link_table, circuit_table

    def to_spec(self) -> NetworkSpec:
        """The composed spec; with ``transport=``, its long links lossy, each GPU's site, the
        cross-site transport and its long-link settings carried in it (NetworkSpec.link_lossy,
        gpu_site, cross_site_transport, cross_site_ecn_ps, cross_site_min_rto_ps)."""
        if self._spec is None:
            spec = super().to_spec()
            if self.transport is not None:
                spec = dataclasses.replace(
                    spec,
                    link_lossy=spec.links.kind.astype(str) == LONG_HAUL,
                    gpu_site=self.site_of(np.arange(self.gpus)),
                    cross_site_transport=self.transport,
                    cross_site_ecn_ps=self.ecn_ps,
                    cross_site_min_rto_ps=self.min_rto_ps,
                )
                spec.validate()
            self._spec = spec
        return self._spec

    def build(self, net: TopologyBuilder) -> None:  # tables() is overridden: never called
        raise SpecError("Sites builds by composing its sites' tables (Sites.tables())")

    def gpu_types_of(self, nodes: NodeTable) -> np.ndarray:
        """Each site's GPU types, in the sites' order (the composed GPU order)."""
        return np.concatenate([f.to_spec().gpu_types for f in self.sites.values()]).astype(object)

    def long_links(self) -> np.ndarray:
        """Link rows (int64) of the long links in the composed spec."""
        return np.flatnonzero(self.to_spec().links.kind.astype(str) == LONG_HAUL).astype(np.int64)

    def gateways(self) -> np.ndarray:
        """Node ids (int64) of the gateways, one per site in the dict's order."""
        names = self.to_spec().nodes.name
        want = {f"{s}/gateway" for s in self.sites}
        return np.array([i for i, x in enumerate(names) if x in want], dtype=np.int64)

    # --- what policies take from a fabric ---------------------------------------------------

    @property
    def default_controller(self) -> str | None:  # type: ignore[override]
        """``None`` when no site has reconfigurable optics. Otherwise the sites' one
        controller if it can drive a composed fabric (``"static"``, ``"mixnet"``: MixNet's
        regional greedy reads the regions from the spec), else ``"static"``: every site's
        initial circuits kept. The stage-aware controller reads an RFabric's layout from
        the whole spec and requires every GPU under an RFabric ToR, which a composed fabric's
        other sites are not: an RFabric site runs its initial plan."""
        names = {f.default_controller for f in self.sites.values()} - {None}
        if not names:
            return None
        if len(names) == 1 and names <= COMPOSABLE_CONTROLLERS:
            return names.pop()
        return "static"

    def locality(self):
        """Each site's PoDs, numbered site after site: a site is at least one PoD, since the
        long link is a boundary worth economising (a weight-sync dissemination forest treats
        it as a PoD boundary). A site that is one PoD alone gets a boundary budget of ``links`` (its long
        links, as circuits at line rate leaving it); a site of several PoDs keeps its own
        PoDs and budgets."""
        from ..rewrites import Locality, locality

        pod_of, budget, sources = [], [], []
        off = 0
        for site, fab in self.sites.items():
            loc = locality(fab)
            pod_of.append(loc.pod_of + off)
            budget.append(np.full(1, self.links) if loc.pods == 1 else loc.pod_budget)
            sources.append(f"{site}: {loc.describe()}")
            off += loc.pods
        return Locality(np.concatenate(pod_of), np.concatenate(budget), "Sites; " + "; ".join(sources))

    def ring_orders(self) -> np.ndarray | None:
        """``None`` when no site has ring orders (the executor's default, servers in rank order,
        keeps each site's servers together since GPU ids are site after site). Otherwise one
        row per channel (as many as the site with most rows): each site's row ``c`` (modulo its
        rows; the executor's default rotation for a site without rows) with its GPU ids
        offset, sites in the dict's order, so a ring crosses the long link twice."""
        per_site = [f.ring_orders() for f in self.sites.values()]
        if all(r is None for r in per_site):
            return None
        channels = max(len(r) for r in per_site if r is not None)
        rows = []
        for c in range(channels):
            row = []
            for (lo, _), fab, r in zip(self._gpu_range.values(), self.sites.values(), per_site, strict=True):
                if r is None:
                    d = fab.gpus_per_server
                    srv = np.arange(fab.servers)
                    part = ring_row(srv, c % d, (c + d - 1) % d, d) if d > 1 else srv
                else:
                    part = np.asarray(r)[c % len(r)]
                row.append(np.asarray(part, dtype=np.int64) + lo)
            rows.append(np.concatenate(row))
        return np.stack(rows)

    def __repr__(self) -> str:
        inner = ", ".join(f"{n!r}: {f!r}" for n, f in self.sites.items())
        more = "" if self.transport is None else f", transport={self.transport!r}"
        more += "".join(
            f", {k}={v!r}" for k, v in (("ecn", self.ecn), ("min_rto", self.min_rto)) if v is not None
        )
        return f"Sites({{{inner}}}, link={self.link!r}, latency={self.latency!r}, links={self.links}{more})"


def _top_tier(nodes: NodeTable, links: LinkTable) -> np.ndarray:
    """Packet switches of a site's top tier: those farthest, in hops over switch-to-switch
    links, from the switches a GPU or NVSwitch links to (node ids, ascending)."""
    eps = NODE_KINDS["eps"]
    host = (nodes.kind == NODE_KINDS["gpu"]) | (nodes.kind == NODE_KINDS["nvswitch"])
    is_eps = nodes.kind == eps
    src, dst = links.src.astype(np.int64), links.dst.astype(np.int64)
    n = len(nodes)
    dist = np.full(n, -1, dtype=np.int64)
    edge = (host[src] & is_eps[dst]) | (host[dst] & is_eps[src])
    first = np.unique(np.concatenate([dst[edge & is_eps[dst]], src[edge & is_eps[src]]]))
    if first.size == 0:
        return first
    both = is_eps[src] & is_eps[dst]
    a = np.concatenate([src[both], dst[both]])
    b = np.concatenate([dst[both], src[both]])
    dist[first] = 0
    frontier, d = first, 0
    while frontier.size:
        d += 1
        nxt = np.unique(b[np.isin(a, frontier)])
        nxt = nxt[dist[nxt] < 0]
        dist[nxt] = d
        frontier = nxt
    return np.flatnonzero(dist == dist.max()).astype(np.int64)
